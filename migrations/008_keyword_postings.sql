-- Each ready file carries its keyword postings: a compact copy of its
-- chunks' tsvectors (chunk ids and lengths, and each lexeme's chunks and
-- occurrences) in a versioned binary format described in docs/keyword.go,
-- written in the transaction that stores the chunks. A process builds a
-- conversation's keyword index from one value per file instead of reading
-- every chunk's tsvector out of line.
--
-- Adding a nullable column rewrites no row. Files stored before this
-- migration hold NULL: mcpsearch migrate writes their postings after
-- applying it, and until then the first search of their conversation reads
-- their chunks as before and writes the postings back.
ALTER TABLE files ADD COLUMN keyword_postings bytea;

-- Measured on a million chunks, PostgreSQL's default compression saves
-- nothing on these varint-packed values (it stores them raw after trying);
-- stored uncompressed from the start, they cost no compression attempt on
-- write.
ALTER TABLE files ALTER COLUMN keyword_postings SET STORAGE EXTERNAL;
