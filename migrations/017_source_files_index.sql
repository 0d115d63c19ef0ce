-- The files of one source, in order: search_docs with source_id reads them
-- on every search. Without it, they were found through the index of every
-- page of the conversation by file, each page read from the table; with it,
-- the source's own entries alone, often without the table (3.3 ms in the
-- server for a source of 10,000 pages among 30,000).
CREATE INDEX source_pages_source_files_idx ON source_pages (conversation_id, source_id, file_id);
