package pg

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mcpsearch/mcpsearch/internal/closedport"
	"github.com/mcpsearch/mcpsearch/internal/pgtest"
)

// TestErrorClassification connects with broken settings to a real server and
// checks what each failure is reported as.
func TestErrorClassification(t *testing.T) {
	t.Parallel()
	admin := pgtest.AdminURL(t)
	u, err := url.Parse(admin)
	if err != nil || u.User == nil || u.Host == "" {
		t.Skipf("DATABASE_URL is not a URL with a user and host; cannot derive broken ones")
	}
	wrongPassword := *u
	wrongPassword.User = url.UserPassword(u.User.Username(), "not-the-password")
	missingDB, err := pgtest.WithDatabase(admin, "mcpsearch_no_such_database")
	if err != nil {
		t.Fatal(err)
	}
	refused := *u
	refused.Host = closedport.Reserve(t).Addr()

	tests := []struct {
		name      string
		url       string
		want      error
		retryable bool
		advice    string
	}{
		{"reachable", pgtest.NewDatabase(t), nil, false, ""},
		{"wrong password", wrongPassword.String(), ErrMisconfigured, false, "check the user and password in DATABASE_URL"},
		{"missing database", missingDB, ErrMisconfigured, false, "does not exist: create it"},
		{"connection refused", refused.String(), ErrUnavailable, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			pool, err := Open(ctx, tt.url)
			if err != nil {
				t.Fatalf("Open = %v; want a lazy pool", err)
			}
			defer pool.Close()
			err = Error("ping", pool.Ping(ctx))
			if tt.want == nil {
				if err != nil {
					t.Fatalf("ping = %v", err)
				}
				return
			}
			if !errors.Is(err, tt.want) || Retryable(err) != tt.retryable || !strings.Contains(err.Error(), tt.advice) {
				t.Errorf("ping = %v; want %v, retryable %v, saying %q", err, tt.want, tt.retryable, tt.advice)
			}
			if tt.want == ErrMisconfigured && (errors.Is(err, ErrUnavailable) || Unavailable(err)) {
				t.Errorf("ping = %v; a misconfiguration must not read as an outage", err)
			}
		})
	}
}

func TestUnavailableCodes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  error
		want error
	}{
		{&pgconn.PgError{Code: "53300"}, ErrUnavailable},
		{&pgconn.PgError{Code: "57P03"}, ErrUnavailable},
		{&pgconn.PgError{Code: "08006"}, ErrUnavailable},
		{&pgconn.PgError{Code: "28P01"}, ErrMisconfigured},
		{&pgconn.PgError{Code: "28000"}, ErrMisconfigured},
		{&pgconn.PgError{Code: "3D000"}, ErrMisconfigured},
		{&pgconn.PgError{Code: "42601"}, nil},
		{context.DeadlineExceeded, nil},
	}
	for _, tt := range tests {
		err := Error("op", fmt.Errorf("wrapped: %w", tt.err))
		for _, sentinel := range []error{ErrUnavailable, ErrMisconfigured} {
			if errors.Is(err, sentinel) != (sentinel == tt.want) {
				t.Errorf("Error(%v) = %v; want it to wrap %v", tt.err, err, tt.want)
			}
		}
	}
	if Error("op", nil) != nil {
		t.Error("Error(nil) is not nil")
	}
}
