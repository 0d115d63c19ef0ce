// Package citustest tells tests how a Citus cluster runs a statement: the
// tasks of its distributed plan and the nodes they run on, read from
// EXPLAIN. A statement that names one conversation should run as one task on
// one worker; Explain lets a test assert that without reading plans by eye.
package citustest

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"

	"github.com/jackc/pgx/v5"
)

// Job is one distributed step of a plan: the statement's own, or a subplan
// whose result the coordinator computes first and sends to the tasks.
type Job struct {
	// Tasks is Citus's "Task Count": how many shard queries the step runs.
	Tasks int
	// Nodes are the nodes of those tasks, as host:port, in plan order and
	// with repeats: one per task shown (every task, as Explain asks).
	Nodes []string
	// Unplanned counts the tasks whose plan the worker did not give, and
	// so whose node is not known. Citus then shows "Could not get remote
	// plan": it happens when a parameter has an extension's type, such as
	// a pgvector query vector, which Citus sends to the worker's EXPLAIN
	// untyped while it inlines its value (the worker logs "could not
	// determine data type of parameter $1"). Running the statement is not
	// affected.
	Unplanned int
}

// Plan is how Citus runs one statement.
type Plan struct {
	// Jobs are the distributed steps, the statement's own last. A
	// statement Citus does not distribute (it reads no distributed table)
	// has none.
	Jobs []Job
	// Subplans counts the subplans computed before the statement: each one
	// a round of the coordinator's before the statement's own tasks run.
	Subplans int
	// Local names the relations the coordinator scans itself, outside
	// every distributed step: tables Citus does not know (neither
	// distributed nor reference tables) and catalogs.
	Local []string
	// JSON is the whole plan as EXPLAIN (FORMAT JSON) gave it.
	JSON string
}

// Nodes returns the distinct nodes the plan's tasks run on, sorted.
func (p Plan) Nodes() []string {
	var all []string
	for _, j := range p.Jobs {
		all = append(all, j.Nodes...)
	}
	slices.Sort(all)
	return slices.Compact(all)
}

// Tasks returns the number of tasks of every job together.
func (p Plan) Tasks() int {
	n := 0
	for _, j := range p.Jobs {
		n += j.Tasks
	}
	return n
}

// Routed reports whether the statement runs on one node alone, each of its
// distributed steps as a single task: what a statement that names one
// conversation should do on tables distributed by conversation. A step of
// one task whose node is not known (see Job.Unplanned) runs on one node
// too, which the others' must then share.
func (p Plan) Routed() bool {
	if len(p.Jobs) == 0 {
		return false
	}
	for _, j := range p.Jobs {
		if j.Tasks != 1 {
			return false
		}
	}
	return len(p.Nodes()) <= 1
}

// String summarises the plan for a test's failure message.
func (p Plan) String() string {
	unplanned := 0
	for _, j := range p.Jobs {
		unplanned += j.Unplanned
	}
	return fmt.Sprintf("%d task(s) on %v (%d not planned) in %d job(s), %d subplan(s)", p.Tasks(), p.Nodes(), unplanned, len(p.Jobs), p.Subplans)
}

// Beginner starts a transaction: a *pgx.Conn, a *pgxpool.Pool or a pgx.Tx
// (a savepoint).
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Explain returns the distributed plan of sql with args, as the coordinator
// of db would run it. The statement is planned, not run (its subplans
// neither: a nextval in one takes no number), in a transaction that is
// rolled back.
func Explain(ctx context.Context, db Beginner, sql string, args ...any) (Plan, error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return Plan{}, fmt.Errorf("explain: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	// Every task is listed, not one of them, so that the nodes are all
	// known.
	if _, err := tx.Exec(ctx, `SET LOCAL citus.explain_all_tasks = on`); err != nil {
		return Plan{}, fmt.Errorf("explain: %w", err)
	}
	var out string
	if err := tx.QueryRow(ctx, "EXPLAIN (FORMAT JSON, COSTS OFF) "+sql, args...).Scan(&out); err != nil {
		return Plan{}, fmt.Errorf("explain: %w", err)
	}
	return ParsePlan(out)
}

// ParsePlan reads the output of EXPLAIN (FORMAT JSON) on a Citus
// coordinator.
func ParsePlan(js string) (Plan, error) {
	var v any
	if err := json.Unmarshal([]byte(js), &v); err != nil {
		return Plan{}, fmt.Errorf("explain output: %w", err)
	}
	p := Plan{JSON: js}
	walk(v, &p)
	return p, nil
}

// walk collects the jobs and subplans of every "Distributed Query" in v,
// subplans first, as Citus runs them, and the relations scanned outside
// them.
func walk(v any, p *Plan) {
	switch v := v.(type) {
	case []any:
		for _, e := range v {
			walk(e, p)
		}
	case map[string]any:
		if dq, ok := v["Distributed Query"].(map[string]any); ok {
			if subs, ok := dq["Subplans"].([]any); ok {
				p.Subplans += len(subs)
				walk(subs, p)
			}
			if job, ok := dq["Job"].(map[string]any); ok {
				p.Jobs = append(p.Jobs, readJob(job))
			}
			return
		}
		if rel, ok := v["Relation Name"].(string); ok {
			p.Local = append(p.Local, rel)
		}
		for _, e := range v {
			walk(e, p)
		}
	}
}

// nodePattern reads host and port out of a task's "Node" line.
var nodePattern = regexp.MustCompile(`host=(\S+) port=(\d+)`)

func readJob(job map[string]any) Job {
	var j Job
	if n, ok := job["Task Count"].(float64); ok {
		j.Tasks = int(n)
	}
	tasks, _ := job["Tasks"].([]any)
	for _, t := range tasks {
		task, ok := t.(map[string]any)
		if !ok {
			continue
		}
		node, _ := task["Node"].(string)
		if m := nodePattern.FindStringSubmatch(node); m != nil {
			j.Nodes = append(j.Nodes, m[1]+":"+m[2])
		} else {
			j.Unplanned++
		}
	}
	return j
}
