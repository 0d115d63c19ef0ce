package citustest

import (
	"slices"
	"testing"
)

func TestParsePlan(t *testing.T) {
	tests := []struct {
		name      string
		js        string
		tasks     int
		nodes     []string
		subplans  int
		routed    bool
		unplanned int
		local     []string
	}{
		{
			name: "one task",
			js: `[{"Plan": {"Node Type": "Custom Scan", "Distributed Query": {"Job": {"Task Count": 1, "Tasks": [
				{"Node": "host=10.0.0.2 port=5432 dbname=db", "Remote Plan": [[{"Plan": {"Node Type": "Index Scan", "Relation Name": "files_102008"}}]]}]}}}}]`,
			tasks: 1, nodes: []string{"10.0.0.2:5432"}, routed: true,
		},
		{
			name: "every shard, under an aggregate",
			js: `[{"Plan": {"Node Type": "Aggregate", "Plans": [{"Node Type": "Custom Scan", "Distributed Query": {"Job": {"Task Count": 3, "Tasks": [
				{"Node": "host=w1 port=5432 dbname=db"}, {"Node": "host=w2 port=5432 dbname=db"}, {"Node": "host=w1 port=5432 dbname=db"}]}}}]}}]`,
			tasks: 3, nodes: []string{"w1:5432", "w2:5432"},
		},
		{
			name: "a subplan on the coordinator, then one task",
			js: `[{"Plan": {"Distributed Query": {"Subplans": [{"PlannedStmt": [{"Plan": {"Node Type": "Result"}}]}],
				"Job": {"Task Count": 1, "Tasks": [{"Node": "host=w1 port=9701 dbname=db"}]}}}}]`,
			tasks: 1, nodes: []string{"w1:9701"}, subplans: 1, routed: true,
		},
		{
			name: "a subplan reading another worker",
			js: `[{"Plan": {"Distributed Query": {"Subplans": [{"PlannedStmt": [{"Plan": {"Distributed Query": {"Job": {"Task Count": 1, "Tasks": [{"Node": "host=w2 port=9702 dbname=db"}]}}}}]}],
				"Job": {"Task Count": 1, "Tasks": [{"Node": "host=w1 port=9701 dbname=db"}]}}}}]`,
			tasks: 2, nodes: []string{"w1:9701", "w2:9702"}, subplans: 1,
		},
		{
			name:  "a task whose plan the worker did not give",
			js:    `[{"Plan": {"Distributed Query": {"Job": {"Task Count": 1, "Tasks": [{"Error": "Could not get remote plan."}]}}}}]`,
			tasks: 1, routed: true, unplanned: 1,
		},
		{
			name:  "nothing distributed",
			js:    `[{"Plan": {"Node Type": "Result"}}]`,
			tasks: 0,
		},
		{
			name: "a table Citus does not know, joined on the coordinator",
			js: `[{"Plan": {"Node Type": "Nested Loop", "Plans": [
				{"Node Type": "Seq Scan", "Relation Name": "schema_migrations"},
				{"Node Type": "Index Scan", "Relation Name": "pg_extension"}]}}]`,
			tasks: 0, local: []string{"pg_extension", "schema_migrations"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := ParsePlan(tt.js)
			if err != nil {
				t.Fatal(err)
			}
			if p.Tasks() != tt.tasks {
				t.Errorf("Tasks() = %d, want %d", p.Tasks(), tt.tasks)
			}
			if !slices.Equal(p.Nodes(), tt.nodes) {
				t.Errorf("Nodes() = %v, want %v", p.Nodes(), tt.nodes)
			}
			if p.Subplans != tt.subplans {
				t.Errorf("Subplans = %d, want %d", p.Subplans, tt.subplans)
			}
			if p.Routed() != tt.routed {
				t.Errorf("Routed() = %v, want %v (%s)", p.Routed(), tt.routed, p)
			}
			unplanned := 0
			for _, j := range p.Jobs {
				unplanned += j.Unplanned
			}
			if unplanned != tt.unplanned {
				t.Errorf("unplanned tasks %d, want %d", unplanned, tt.unplanned)
			}
			local := slices.Sorted(slices.Values(p.Local))
			if !slices.Equal(local, tt.local) {
				t.Errorf("Local = %v, want %v", local, tt.local)
			}
		})
	}
	if _, err := ParsePlan("not json"); err == nil {
		t.Error("ParsePlan accepted text that is not JSON")
	}
}
