-- Where a chunk comes from, in its format's own terms, for citations: the
-- pages of a PDF or a scan, the slides of a deck and the first one's title,
-- a sheet and its cells, the heading path of a word-processing document or
-- an e-book, and whether its text was recognised by OCR. Compact JSON of
-- the fields that apply ({"slide_start":3,"slide_end":4,"slide_title":
-- "Results"}); NULL for chunks stored before this migration, whose page
-- range (page_start, page_end) says the same for a PDF.
ALTER TABLE chunks ADD COLUMN location jsonb;

-- What a user should know of a file that is ready: the pages of a scan that
-- still need OCR and why ("pages 3-5 need OCR: the tesseract program is not
-- installed"). '' when there is nothing to say.
ALTER TABLE files ADD COLUMN note text NOT NULL DEFAULT '';
