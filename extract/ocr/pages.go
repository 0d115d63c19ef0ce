package ocr

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	_ "image/jpeg" // DecodeConfig of JPEG uploads
	_ "image/png"  // DecodeConfig of PNG uploads and rendered pages
	"math"
	"os"
	"strconv"
	"strings"
	"time"
)

// maxRendered bounds the bytes of one rendered page image.
const maxRendered = 256 << 20

// ErrTooLarge reports an image or a page beyond the pixel or page limits.
var ErrTooLarge = errors.New("image too large for OCR")

// PDF is a PDF whose pages can be recognised, one call a page. Close
// removes the copy the renderer reads.
type PDF struct {
	e     *Engine
	path  string
	sizes map[int][2]float64 // page size in points, from pdfinfo
}

// OpenPDF prepares data, a PDF, for recognising its pages: it writes a
// copy for the renderer and reads the pages' sizes. Errors wrap
// ErrUnavailable when OCR or the renderer is missing.
func (e *Engine) OpenPDF(ctx context.Context, data []byte) (*PDF, error) {
	if err := e.available(ctx, true); err != nil {
		return nil, err
	}
	path, err := copyTemp(e.opts.TempDir, "mcpsearch-ocr-*.pdf", data)
	if err != nil {
		return nil, err
	}
	p := &PDF{e: e, path: path, sizes: map[int][2]float64{}}
	ctx, cancel := context.WithTimeout(ctx, e.opts.PageTimeout)
	defer cancel()
	out, err := run(ctx, 16<<20, e.opts.Pdfinfo, "-f", "1", "-l", strconv.Itoa(1<<20), path)
	if err != nil {
		// Without sizes pages render at the configured resolution, which
		// the pixel limit may then refuse.
		return p, nil
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		// "Page    1 size:  612 x 792 pts (letter)"
		f := strings.Fields(sc.Text())
		if len(f) >= 6 && f[0] == "Page" && f[2] == "size:" && f[4] == "x" {
			n, err1 := strconv.Atoi(f[1])
			w, err2 := strconv.ParseFloat(f[3], 64)
			h, err3 := strconv.ParseFloat(f[5], 64)
			if err1 == nil && err2 == nil && err3 == nil {
				p.sizes[n] = [2]float64{w, h}
			}
		}
	}
	return p, nil
}

// Close removes the PDF's temporary copy.
func (p *PDF) Close() error {
	if p == nil || p.path == "" {
		return nil
	}
	err := os.Remove(p.path)
	p.path = ""
	return err
}

// dpiFor returns the resolution page n is rendered at: the configured one,
// lowered so that the page stays within the pixel limit.
func (p *PDF) dpiFor(n int) int {
	dpi := p.e.opts.DPI
	size, ok := p.sizes[n]
	if !ok || size[0] <= 0 || size[1] <= 0 {
		return dpi
	}
	// Pixels at dpi: (w/72*dpi) * (h/72*dpi).
	inches := size[0] / 72 * size[1] / 72
	if inches*float64(dpi)*float64(dpi) > float64(p.e.opts.MaxPixels) {
		dpi = int(math.Sqrt(float64(p.e.opts.MaxPixels) / inches))
	}
	return max(dpi, 1)
}

// Page renders page n (from 1) and returns its recognised text, within the
// page time limit.
func (p *PDF) Page(ctx context.Context, n int) (string, error) {
	e := p.e
	if err := e.acquire(ctx); err != nil {
		return "", err
	}
	defer e.release()
	ctx, cancel := context.WithTimeout(ctx, e.opts.PageTimeout)
	defer cancel()
	dpi := p.dpiFor(n)
	img, err := run(ctx, maxRendered, e.opts.Pdftoppm, "-r", strconv.Itoa(dpi), "-gray", "-png",
		"-f", strconv.Itoa(n), "-l", strconv.Itoa(n), p.path)
	if err == nil && len(img) == 0 {
		err = fmt.Errorf("pdftoppm rendered nothing for page %d", n)
	}
	if err == nil {
		err = e.checkPixels(img)
	}
	if err != nil {
		return "", pageError(ctx, err, e.opts.PageTimeout)
	}
	text, err := e.recognise(ctx, img, dpi)
	if err != nil {
		return "", pageError(ctx, err, e.opts.PageTimeout)
	}
	return cleanText(text), nil
}

// pageError names a time-out as such.
func pageError(ctx context.Context, err error, limit time.Duration) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("timed out after %s", limit)
	}
	return err
}

// Image recognises an image upload (PNG, JPEG, or TIFF with one or more
// pages) and returns the text of each of its pages. It refuses images of
// more than Options.MaxPixels pixels a page, and TIFFs of more than
// Options.MaxPages pages, with an error wrapping ErrTooLarge.
func (e *Engine) Image(ctx context.Context, data []byte) ([]string, error) {
	if err := e.available(ctx, false); err != nil {
		return nil, err
	}
	pages := 1
	if isTIFF(data) {
		n, err := e.checkTIFF(data)
		if err != nil {
			return nil, err
		}
		pages = n
	} else if err := e.checkPixels(data); err != nil {
		return nil, err
	}
	if err := e.acquire(ctx); err != nil {
		return nil, err
	}
	defer e.release()
	limit := e.opts.PageTimeout * time.Duration(pages)
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	text, err := e.recognise(ctx, data, 0)
	if err != nil {
		return nil, pageError(ctx, err, limit)
	}
	// tesseract ends each page of a multi-page image with a form feed.
	raw := strings.Split(text, "\f")
	if pages == 1 || len(raw) == 1 {
		return []string{cleanText(text)}, nil
	}
	out := make([]string, 0, len(raw))
	for _, r := range raw {
		out = append(out, cleanText(r))
	}
	for len(out) > pages && out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	return out, nil
}

// checkPixels refuses a PNG or JPEG image of more than MaxPixels pixels,
// which tesseract would decode whole into memory.
func (e *Engine) checkPixels(data []byte) error {
	cfg, _, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("unreadable image: %v", err)
	}
	if px := int64(cfg.Width) * int64(cfg.Height); px > int64(e.opts.MaxPixels) {
		return fmt.Errorf("%w: %d x %d pixels, more than the limit of %d", ErrTooLarge, cfg.Width, cfg.Height, e.opts.MaxPixels)
	}
	return nil
}

func isTIFF(data []byte) bool {
	return bytes.HasPrefix(data, []byte("II*\x00")) || bytes.HasPrefix(data, []byte("MM\x00*"))
}

// checkTIFF walks a TIFF's image directories and returns how many pages it
// holds, refusing pages beyond MaxPixels and files beyond MaxPages.
func (e *Engine) checkTIFF(data []byte) (int, error) {
	var bo binary.ByteOrder = binary.LittleEndian
	if data[0] == 'M' {
		bo = binary.BigEndian
	}
	off := int64(bo.Uint32(data[4:]))
	seen := map[int64]bool{}
	pages := 0
	for off != 0 {
		if off < 8 || off+2 > int64(len(data)) || seen[off] {
			return 0, errors.New("unreadable TIFF: bad image directory offset")
		}
		seen[off] = true
		pages++
		if pages > e.opts.MaxPages {
			return 0, fmt.Errorf("%w: the TIFF holds more than %d pages (the OCR page limit)", ErrTooLarge, e.opts.MaxPages)
		}
		n := int64(bo.Uint16(data[off:]))
		end := off + 2 + 12*n
		if end+4 > int64(len(data)) {
			return 0, errors.New("unreadable TIFF: image directory out of the file")
		}
		var w, h int64
		for i := int64(0); i < n; i++ {
			ent := data[off+2+12*i:]
			tag, typ := bo.Uint16(ent), bo.Uint16(ent[2:])
			var v int64
			switch typ {
			case 3: // SHORT
				v = int64(bo.Uint16(ent[8:]))
			case 4: // LONG
				v = int64(bo.Uint32(ent[8:]))
			}
			switch tag {
			case 256:
				w = v
			case 257:
				h = v
			}
		}
		if w*h > int64(e.opts.MaxPixels) {
			return 0, fmt.Errorf("%w: a page of %d x %d pixels, more than the limit of %d", ErrTooLarge, w, h, e.opts.MaxPixels)
		}
		off = int64(bo.Uint32(data[end:]))
	}
	if pages == 0 {
		return 0, errors.New("unreadable TIFF: no image")
	}
	return pages, nil
}
