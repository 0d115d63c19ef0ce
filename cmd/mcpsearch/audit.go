package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mcpsearch/mcpsearch/audit"
	"github.com/mcpsearch/mcpsearch/config"
	"github.com/mcpsearch/mcpsearch/migrations"
	"github.com/mcpsearch/mcpsearch/pg"
)

func runAudit(ctx context.Context, env *environment, args []string) error {
	if len(args) == 0 {
		return usageError{errors.New("usage: mcpsearch audit tail [-n N] | mcpsearch audit prune --older-than 30d")}
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		printHelp(env.stdout, newFlagSet("audit", nil), helpFor("audit"))
		return flag.ErrHelp
	case "tail":
		return auditTail(ctx, env, args[1:])
	case "prune":
		return auditPrune(ctx, env, args[1:])
	}
	return usageError{fmt.Errorf("unknown audit command %q: want tail or prune", args[0])}
}

func auditTail(ctx context.Context, env *environment, args []string) error {
	var n int
	cfg, _, err := loadConfig(env, "audit tail", args, func(fs *flag.FlagSet) {
		fs.IntVar(&n, "n", 20, "how many recent calls to show")
	})
	if err != nil {
		return err
	}
	if n < 1 {
		return usageError{errors.New("-n must be at least 1")}
	}
	pool, err := openAuditPool(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	entries, err := audit.Tail(ctx, pool, n)
	if err != nil {
		return pg.Error("database", err)
	}
	tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tTOOL\tOUTCOME\tMS\tTRANSPORT\tCLIENT\tCALLER\tCONVERSATION\tARGUMENTS")
	for i := len(entries) - 1; i >= 0; i-- {
		e := entries[i]
		outcome := "ok"
		if e.ErrorCode != "" {
			outcome = e.ErrorCode
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", e.CreatedAt.Local().Format("2006-01-02 15:04:05"), e.ToolName, outcome,
			e.LatencyMS, dash(e.Transport), dash(strings.TrimSpace(e.ClientName+" "+e.ClientVersion)), dash(cmp.Or(e.APIKey, e.Subject)),
			dash(e.ConversationID), shorten(string(e.Arguments), 80))
	}
	return tw.Flush()
}

func auditPrune(ctx context.Context, env *environment, args []string) error {
	var older string
	cfg, _, err := loadConfig(env, "audit prune", args, func(fs *flag.FlagSet) {
		fs.StringVar(&older, "older-than", "", "delete calls older than this: 30d, 12h, 90m (required)")
	})
	if err != nil {
		return err
	}
	age, err := parseAge(older)
	if err != nil {
		return usageError{fmt.Errorf("--older-than: %w", err)}
	}
	pool, err := openAuditPool(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	n, err := audit.Prune(ctx, pool, age)
	if err != nil {
		return pg.Error("database", err)
	}
	fmt.Fprintf(env.stdout, "deleted %d audit rows older than %s\n", n, older)
	return nil
}

// openAuditPool opens the pool of cfg and checks the schema first, so that
// a database not migrated yet, a rejected login or a server that does not
// answer each get their own advice instead of an SQL error. The caller
// closes the pool.
func openAuditPool(ctx context.Context, cfg config.Config) (*pgxpool.Pool, error) {
	pool, err := openPool(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := checkSchema(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
}

// checkSchema says what to do when the database at DATABASE_URL cannot
// serve the audit commands.
func checkSchema(ctx context.Context, pool *pgxpool.Pool) error {
	err := migrations.Check(ctx, pool)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, migrations.ErrOutdated):
		return fmt.Errorf("DATABASE_URL: %w", err)
	}
	err = pg.Error("check schema", err)
	if errors.Is(err, pg.ErrUnavailable) {
		return fmt.Errorf("DATABASE_URL: %w (is PostgreSQL running and reachable at that address?)", err)
	}
	return fmt.Errorf("DATABASE_URL: %w", err)
}

// parseAge reads retention ages: whole days ("30d") or Go durations.
func parseAge(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if d, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(d)
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("want a positive number of days such as 30d, got %q", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("want an age such as 30d, 12h or 90m, got %q", s)
	}
	return d, nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-3]) + "..."
}
