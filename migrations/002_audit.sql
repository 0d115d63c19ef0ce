-- Every tool call, as the MCP tools contract's audit table, with what an
-- operator also needs: the error code, the transport, the session, the
-- client and the API key. conversation_id is text without a foreign key:
-- this server does not own conversations. server_id names the server
-- instance when an operator sets one.

CREATE TABLE chat_mcp_tool_calls (
	id              uuid PRIMARY KEY,
	server_id       uuid,
	conversation_id text,
	tool_name       varchar(100) NOT NULL,
	arguments       jsonb,
	result          jsonb,
	error           text,
	error_code      text,
	latency_ms      integer,
	transport       text,
	session_id      text,
	client_name     text,
	client_version  text,
	api_key_name    text,
	created_at      timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX chat_mcp_tool_calls_created_idx ON chat_mcp_tool_calls (created_at);
CREATE INDEX chat_mcp_tool_calls_conversation_idx ON chat_mcp_tool_calls (conversation_id, created_at);
CREATE INDEX chat_mcp_tool_calls_tool_idx ON chat_mcp_tool_calls (tool_name, created_at);
