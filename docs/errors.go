package docs

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mcpsearch/mcpsearch/embed"
	"github.com/mcpsearch/mcpsearch/pg"
)

// Errors returned by the Store, wrapped with detail; test with errors.Is.
var (
	// ErrNotFound reports an unknown file or chunk id.
	ErrNotFound = errors.New("not found")
	// ErrInvalidID reports an id that is not a UUID; no query was run.
	ErrInvalidID = errors.New("invalid id")
	// ErrInvalidArgument reports another unusable argument: an empty
	// conversation id or file name, a query longer than MaxQueryRunes, a
	// threshold outside 0..1, a negative top_k or an unknown mode.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrEmptyQuery reports a search without any text to look for.
	ErrEmptyQuery = errors.New("empty query")
	// ErrUnavailable reports that the database cannot be reached: refused
	// or broken connections, a restarting server, too many connections.
	// Trying again later may succeed. It is pg.ErrUnavailable.
	ErrUnavailable = pg.ErrUnavailable
	// ErrMisconfigured reports a login the database refused (wrong user or
	// password) or a database that does not exist; retrying does not help.
	// It is pg.ErrMisconfigured.
	ErrMisconfigured = pg.ErrMisconfigured
	// ErrSchemaOutdated reports a database whose schema is older than this
	// build needs; `mcpsearch migrate` brings it up to date.
	ErrSchemaOutdated = errors.New("database schema is outdated: run `mcpsearch migrate`")
	// ErrUnsupportedType reports a file type that cannot be indexed. It
	// wraps extract.ErrUnsupported's detail.
	ErrUnsupportedType = errors.New("unsupported file type")
	// ErrTooLarge reports a file over Options.MaxFileBytes.
	ErrTooLarge = errors.New("file too large")
	// ErrBusy reports that the ingestion queue is full (Reserve, Submit,
	// SubmitUpload); retry later.
	ErrBusy = errors.New("ingestion queue is full")
	// ErrNotReady reports a file that is still processing or has failed,
	// where a ready one is needed.
	ErrNotReady = errors.New("file is not ready")
	// ErrProcessing reports an upload whose processing failed (no text,
	// damaged file, embedding failure); the file is stored with status
	// failed and the reason in File.Error.
	ErrProcessing = errors.New("file processing failed")
	// ErrClosed reports a call after Close.
	ErrClosed = errors.New("document store closed")
)

// Retryable reports whether the same call may succeed later: the database
// or the embedding provider is unavailable, the ingestion queue is full, or
// a transaction lost a serialisation race. A wrong password or a missing
// database (ErrMisconfigured) is not retryable.
func Retryable(err error) bool {
	return errors.Is(err, ErrBusy) || embed.Retryable(err) || pg.Retryable(err)
}

// dbError wraps err, an error from the database, with op and classifies it as
// ErrUnavailable, ErrMisconfigured or ErrSchemaOutdated where it is one.
func dbError(op string, err error) error {
	if err != nil && undefinedObject(err) {
		return fmt.Errorf("%s: %w: %w", op, ErrSchemaOutdated, err)
	}
	return pg.Error(op, err)
}

// DatabaseError is dbError for the packages that keep their own tables
// beside the documents' (package jobs): the same classification, so the
// server maps their failures as it maps the store's.
func DatabaseError(op string, err error) error { return dbError(op, err) }

// undefinedObject reports a missing table, column or function: the schema
// predates this build.
func undefinedObject(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	switch pgErr.Code {
	case "42P01", "42703", "42883", "42704": // undefined_table, _column, _function, _object
		return true
	}
	return false
}
