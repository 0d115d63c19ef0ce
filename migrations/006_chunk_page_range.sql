-- A chunk can begin with the last lines of one page and run onto the next:
-- page_start and page_end are the pages of its first and last characters,
-- so that a citation names both. page_number stays, equal to page_start.
--
-- Chunks stored before this migration hold NULL in both, read as
-- page_number: setting them here would rewrite every chunk row, vector
-- included, and insert each again into every HNSW index. New chunks always
-- have both.

ALTER TABLE chunks
	ADD COLUMN page_start integer,
	ADD COLUMN page_end   integer;
