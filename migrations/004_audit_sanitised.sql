-- The audit writer makes every value of a row storable before queueing it
-- (NUL and invalid UTF-8 replaced, over-long text cut, numbers beyond
-- numeric's range kept as strings); sanitised names the columns it changed,
-- so that a reader knows the stored value is not exactly what the caller
-- sent. NULL for rows stored as sent.

ALTER TABLE chat_mcp_tool_calls ADD COLUMN sanitised text[];
