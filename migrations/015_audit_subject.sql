-- A call made with an OAuth access token (sign-in through the operator's
-- identity provider) names the person in subject: the token's sub claim,
-- as the issuer writes it. api_key_name stays the name of the API key a
-- call came with; a call has one or the other, or neither (stdio, a
-- server without access control). Tokens themselves are never stored.

ALTER TABLE chat_mcp_tool_calls ADD COLUMN subject text;
