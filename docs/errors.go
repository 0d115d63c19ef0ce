package docs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mcpsearch/mcpsearch/embed"
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
	// Trying again later may succeed.
	ErrUnavailable = errors.New("document database unavailable")
	// ErrSchemaOutdated reports a database whose schema is older than this
	// build needs; `mcpsearch migrate` brings it up to date.
	ErrSchemaOutdated = errors.New("database schema is outdated: run `mcpsearch migrate`")
	// ErrUnsupportedType reports a file type that cannot be indexed. It
	// wraps extract.ErrUnsupported's detail.
	ErrUnsupportedType = errors.New("unsupported file type")
	// ErrTooLarge reports a file over Options.MaxFileBytes.
	ErrTooLarge = errors.New("file too large")
	// ErrBusy reports that Submit's queue is full; retry later.
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
// a transaction lost a serialisation race.
func Retryable(err error) bool {
	if errors.Is(err, ErrUnavailable) || errors.Is(err, ErrBusy) || embed.Retryable(err) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "40001", "40P01": // serialization_failure, deadlock_detected
			return true
		}
	}
	return false
}

// dbError wraps err, an error from the database, with op and classifies it as
// ErrUnavailable or ErrSchemaOutdated where it is one.
func dbError(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case unavailable(err):
		return fmt.Errorf("%s: %w: %w", op, ErrUnavailable, err)
	case undefinedObject(err):
		return fmt.Errorf("%s: %w: %w", op, ErrSchemaOutdated, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// unavailable reports whether err means the server could not be reached or
// dropped the connection, as opposed to rejecting a statement.
func unavailable(err error) bool {
	// The caller's own deadline or cancellation is not the database's fault.
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	// Any failure to connect counts, even one the server answered (such as
	// "the database system is starting up" or a rejected password): no
	// statement can run.
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		if strings.HasPrefix(pgErr.Code, "08") { // connection_exception
			return true
		}
		switch pgErr.Code {
		case "57P01", "57P02", "57P03", // admin_shutdown, crash_shutdown, cannot_connect_now
			"53300": // too_many_connections
			return true
		}
		return false
	}
	var netErr net.Error
	switch {
	case errors.As(err, &netErr):
		return true
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return true
	}
	// pgconn marks errors raised before anything reached the server (such as
	// a connection found closed) as safe to retry.
	return pgconn.SafeToRetry(err)
}

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
