package jobs

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/mcpsearch/mcpsearch/docs"
	"github.com/mcpsearch/mcpsearch/extract"
)

// Unpacker turns an archive of documents into its files.
type Unpacker interface {
	// Unpack reports whether u is an archive (ok) and, if it is, returns
	// its entries as uploads and the entries it refused, or why the
	// archive could not be read. Close the result when its uploads are
	// stored.
	Unpack(ctx context.Context, u docs.Upload) (u2 Unpacked, ok bool, err error)
}

// Unpacked is an archive's files, spooled to a folder Close removes.
type Unpacked struct {
	Entries  []docs.Upload
	Refusals []Refusal
	dir      string
}

// Close removes the spooled entries.
func (u Unpacked) Close() {
	if u.dir != "" {
		_ = os.RemoveAll(u.dir)
	}
}

// ArchiveUnpacker unpacks ZIP and .tar.gz archives of documents within the
// limits of extract.Limits (entries, bytes in all, zip bombs); each entry
// must also be within MaxFileBytes, as any upload.
type ArchiveUnpacker struct {
	Limits       extract.Limits
	MaxFileBytes int64
}

// Unpack implements Unpacker.
func (a ArchiveUnpacker) Unpack(ctx context.Context, u docs.Upload) (Unpacked, bool, error) {
	var r io.ReaderAt
	var size int64
	if u.Path != "" {
		f, err := os.Open(u.Path)
		if err != nil {
			return Unpacked{}, false, fmt.Errorf("open %s: %w", u.FileName, err)
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return Unpacked{}, false, fmt.Errorf("open %s: %w", u.FileName, err)
		}
		r, size = f, fi.Size()
	} else {
		r, size = bytes.NewReader(u.Data), int64(len(u.Data))
	}
	kind := a.Limits.ArchiveOf(r, size)
	if kind == "" {
		return Unpacked{}, false, nil
	}
	dir, err := os.MkdirTemp("", "mcpsearch-unpack-*")
	if err != nil {
		return Unpacked{}, true, fmt.Errorf("unpack %s: %w", u.FileName, err)
	}
	out := Unpacked{dir: dir}
	n := 0
	err = a.Limits.Unpack(kind, r, size, func(name string, size int64, er io.Reader) error {
		if err := ctx.Err(); err != nil {
			return context.Cause(ctx)
		}
		if a.MaxFileBytes > 0 && size > a.MaxFileBytes {
			out.Refusals = append(out.Refusals, Refusal{FileName: name,
				Reason: fmt.Sprintf("larger than the %d MB limit of one file (MCP_docs_max_file_mb)", a.MaxFileBytes>>20)})
			return nil
		}
		n++
		path := filepath.Join(dir, fmt.Sprintf("%06d", n))
		f, err := os.Create(path)
		if err != nil {
			return fmt.Errorf("unpack %s: %w", u.FileName, err)
		}
		_, err = io.Copy(f, er)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("unpack %s: %s: %w", u.FileName, name, err)
		}
		out.Entries = append(out.Entries, docs.Upload{ConversationID: u.ConversationID, FileName: name, Path: path,
			Source: u.Source, JobID: u.JobID})
		return nil
	})
	if err != nil {
		out.Close()
		return Unpacked{}, true, fmt.Errorf("%s: %w", u.FileName, err)
	}
	return out, true, nil
}
