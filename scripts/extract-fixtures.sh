#!/usr/bin/env bash
# Regenerates the documents and reference texts that extract's
# comparison tests read (extract/testdata/formats), from the sources
# in its src/ folder, with programs we did not write:
#
#   pandoc            Markdown -> DOCX, ODT, RTF, EPUB, PPTX; and the plain
#                     text, headings and titles of what it wrote
#   LibreOffice       flat OpenDocument -> PPTX, ODP, XLSX, ODS, legacy
#                     .xls; ODT -> DOCX, PDF, legacy .doc; decks -> PDF;
#                     workbooks -> one CSV per sheet
#   pdftotext/pdfinfo text and page counts of the PDF exports
#   pdftoppm, img2pdf a scan: two pages rasterised at 300 dpi, rewrapped
#   unzip             the sheet names in the order the workbooks list them
#
# Debian: apt-get install pandoc libreoffice-writer libreoffice-impress
# libreoffice-calc poppler-utils img2pdf unzip. The tests only compare against the
# committed results; run this (make extract-fixtures) after changing a source.
set -euo pipefail
cd "$(dirname "$0")/.."

dir=extract/testdata/formats
src=$dir/src
ref=$dir/ref
for tool in pandoc soffice pdftotext pdfinfo pdftoppm img2pdf unzip; do
  command -v "$tool" >/dev/null || { echo "extract-fixtures: $tool is not installed" >&2; exit 1; }
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# LibreOffice keeps its profile here, apart from any running instance.
lo() { soffice -env:UserInstallation=file://"$work/profile" --headless "$@" >/dev/null 2>&1; }

rm -rf "$ref"
mkdir -p "$ref"
rm -f "$dir"/*.docx "$dir"/*.odt "$dir"/*.rtf "$dir"/*.epub "$dir"/*.pptx "$dir"/*.odp \
  "$dir"/*.xlsx "$dir"/*.ods "$dir"/*.pdf "$dir"/*.doc "$dir"/*.xls "$dir"/*.ppt

# Word processing: pandoc writes DOCX, ODT, RTF and a deck from the
# contract; LibreOffice writes a second DOCX, a PDF and a legacy .doc from
# pandoc's ODT.
pandoc "$src/contract.md" -o "$dir/contract.docx"
pandoc "$src/contract.md" -o "$dir/contract.odt"
pandoc -s "$src/contract.md" -t rtf -o "$dir/contract.rtf"
pandoc "$src/contract.md" -o "$dir/contract.pptx"
pandoc "$src/book.md" -o "$dir/book.epub"
cp "$dir/contract.odt" "$work/contract-lo.odt"
lo --convert-to docx:"MS Word 2007 XML" --outdir "$work" "$work/contract-lo.odt"
cp "$work/contract-lo.docx" "$dir/contract-lo.docx"
lo --convert-to pdf --outdir "$work" "$dir/contract.odt"
cp "$work/contract.pdf" "$dir/contract.pdf"
lo --convert-to doc:"MS Word 97" --outdir "$work" "$dir/contract.odt"
cp "$work/contract.doc" "$dir/contract.doc"

# Presentations and workbooks: LibreOffice from the flat sources.
for f in deck.fodp budget.fods; do cp "$src/$f" "$work/"; done
lo --convert-to pptx --outdir "$work" "$work/deck.fodp"
lo --convert-to odp --outdir "$work" "$work/deck.fodp"
lo --convert-to xlsx:"Calc MS Excel 2007 XML" --outdir "$work" "$work/budget.fods"
lo --convert-to ods --outdir "$work" "$work/budget.fods"
lo --convert-to xls:"MS Excel 97" --outdir "$work" "$work/budget.fods"
cp "$work/deck.pptx" "$work/deck.odp" "$work/budget.xlsx" "$work/budget.ods" "$work/budget.xls" "$dir/"

# A scan: the contract's first two pages as 300 dpi black and white images
# (as a document scanner makes them, and small) in a PDF without a text
# layer.
pdftoppm -r 300 -mono -f 1 -l 2 "$dir/contract.pdf" "$work/scan"
img2pdf "$work"/scan-*.pbm -o "$dir/scanned.pdf" >/dev/null 2>&1
pdftotext -f 1 -l 2 "$dir/contract.pdf" "$ref/scanned.pdf.txt"

# Reference texts. pandoc reads back what it and LibreOffice wrote; its
# plain writer gives the words, its GitHub Markdown writer the headings,
# and a one-line template the title it sees.
for f in contract.docx contract-lo.docx contract.odt contract.rtf book.epub; do
  pandoc "$dir/$f" -t plain --wrap=none -o "$ref/$f.txt"
  pandoc "$dir/$f" -t gfm-raw_html --wrap=none | grep -E '^#{1,6} ' >"$ref/$f.headings" || true
  printf '%s\n' '$title$' >"$work/title.tpl"
  pandoc "$dir/$f" -t plain --template="$work/title.tpl" -o "$ref/$f.title"
done
pdftotext "$dir/contract.pdf" "$ref/contract.pdf.txt"

# Decks: LibreOffice's PDF export, one page a slide, read by pdftotext.
for f in deck.pptx deck.odp contract.pptx; do
  lo --convert-to pdf --outdir "$work/$f.d" "$dir/$f"
  pdf=$(ls "$work/$f.d"/*.pdf)
  pdftotext "$pdf" "$ref/$f.txt"
  pdfinfo "$pdf" | awk '/^Pages:/ {print $2}' >"$ref/$f.slides"
done

# Workbooks: LibreOffice's CSV export, one file a sheet, named after it.
for f in budget.xlsx budget.ods; do
  mkdir -p "$work/$f.d" "$ref/$f.sheets"
  cp "$dir/$f" "$work/$f.d/book.${f##*.}"
  lo --convert-to 'csv:Text - txt - csv (StarCalc):44,34,76,1,,0,false,true,false,false,false,-1' \
    --outdir "$work/$f.d" "$work/$f.d/book.${f##*.}"
  for csv in "$work/$f.d"/book-*.csv; do
    sheet=${csv##*/book-}
    cp "$csv" "$ref/$f.sheets/$sheet"
  done
done
# The sheet names in workbook order, as LibreOffice wrote them.
unzip -p "$dir/budget.xlsx" xl/workbook.xml | grep -o '<sheet [^>]*name="[^"]*"' |
  sed 's/.*name="\([^"]*\)"/\1/' >"$ref/budget.xlsx.sheets/order"
unzip -p "$dir/budget.ods" content.xml | grep -o '<table:table table:name="[^"]*"' |
  sed 's/.*name="\([^"]*\)"/\1/' >"$ref/budget.ods.sheets/order"
echo "extract-fixtures: wrote $(ls "$dir" | wc -l) files in $dir"
