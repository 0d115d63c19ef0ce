// Package pg opens the PostgreSQL connection pool that the documents store,
// the audit writer and the migrations share, and classifies database errors
// once for all of them: worth retrying later, or a configuration mistake the
// operator must fix.
package pg

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	pgxvec "github.com/pgvector/pgvector-go/pgx"
)

// Errors that Error wraps; test with errors.Is.
var (
	// ErrUnavailable reports that the database cannot be reached right now:
	// refused or broken connections, a starting or stopping server, too
	// many connections. Trying again later may succeed.
	ErrUnavailable = errors.New("database unavailable")
	// ErrMisconfigured reports a connection the server refused for a reason
	// that waiting will not cure: a wrong user or password, a database that
	// does not exist. The message says what to fix in DATABASE_URL.
	ErrMisconfigured = errors.New("database connection misconfigured")
)

// Option changes the pool Open makes.
type Option func(*pgxpool.Config)

// WithTracer has every connection of the pool report its statements to t
// (NewTracer); a nil t changes nothing.
func WithTracer(t pgx.QueryTracer) Option {
	return func(c *pgxpool.Config) {
		if t != nil {
			c.ConnConfig.Tracer = t
		}
	}
}

// Open returns a pool on the database at databaseURL whose connections know
// pgvector's types. It does not connect: the pool connects on first use, so
// Open succeeds while the database is down and its users recover when it
// comes back. The caller owns the pool and closes it.
func Open(ctx context.Context, databaseURL string, opts ...Option) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("database URL: %w", err)
	}
	cfg.AfterConnect = registerVector
	for _, o := range opts {
		o(cfg)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open database pool: %w", err)
	}
	return pool, nil
}

// registerVector teaches a new connection pgvector's binary format. A
// database without the extension (not migrated yet) still gets a working
// connection, so that schema checks and migrations can run on it.
func registerVector(ctx context.Context, conn *pgx.Conn) error {
	err := pgxvec.RegisterTypes(ctx, conn)
	if err == nil {
		return nil
	}
	var missing bool
	if qerr := conn.QueryRow(ctx, `SELECT to_regtype('vector') IS NULL`).Scan(&missing); qerr == nil && missing {
		return nil
	}
	return err
}

// Error wraps err, an error from the database, with op, and classifies it:
// an outage wraps ErrUnavailable, a rejected login or a missing database
// wraps ErrMisconfigured with advice. Other errors are wrapped unchanged; nil
// stays nil.
func Error(op string, err error) error {
	if err == nil {
		return nil
	}
	if advice, ok := misconfigured(err); ok {
		return fmt.Errorf("%s: %w: %s: %w", op, ErrMisconfigured, advice, err)
	}
	if Unavailable(err) {
		return fmt.Errorf("%s: %w: %w", op, ErrUnavailable, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// Retryable reports whether the call that returned err may succeed later
// unchanged: the database was unreachable, or a transaction lost a
// serialisation or deadlock race.
func Retryable(err error) bool {
	if errors.Is(err, ErrMisconfigured) {
		return false
	}
	if errors.Is(err, ErrUnavailable) {
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

// misconfigured reports a refusal that no retry cures and what to do
// about it.
func misconfigured(err error) (string, bool) {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return "", false
	}
	switch pgErr.Code {
	case "28P01", "28000": // invalid_password, invalid_authorization_specification
		return "the server rejected the login: check the user and password in DATABASE_URL", true
	case "3D000": // invalid_catalog_name
		return "the database named in DATABASE_URL does not exist: create it (createdb NAME) or fix its name", true
	}
	return "", false
}

// Unavailable reports whether err means the server could not be reached or
// dropped the connection, as opposed to rejecting a statement or a login.
func Unavailable(err error) bool {
	// The caller's own deadline or cancellation is not the database's fault.
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	if _, ok := misconfigured(err); ok {
		return false
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
		// A connection refused for another reason (such as a
		// pg_hba.conf rule) is reported as it is.
		return false
	}
	// A failure to connect without an answer from the server: refused,
	// unreachable, timed out.
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) {
		return true
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
