package config

import "testing"

func TestWriteToolsDefaults(t *testing.T) {
	c := Default()
	if !c.WriteToolsOn() || !c.WritesOn() || c.JobLeaseSeconds != 10 {
		t.Fatalf("defaults: write tools %v, writes %v, lease %d", c.WriteToolsOn(), c.WritesOn(), c.JobLeaseSeconds)
	}
	read := c.RateLimitFor("search_docs")
	for tool := range WriteToolRateLimits {
		w := c.RateLimitFor(tool)
		if w.PerMinute >= read.PerMinute || w.Burst > read.Burst {
			t.Errorf("%s: %+v, want less than the reads' %+v", tool, w, read)
		}
	}
	if err := c.LoadEnv([]string{"MCP_add_document_rate_limit_per_minute=2", "MCP_read_only=true"}); err != nil {
		t.Fatal(err)
	}
	if rl := c.RateLimitFor("add_document"); rl.PerMinute != 2 || rl.Burst != WriteToolRateLimits["add_document"].Burst {
		t.Errorf("override: %+v", rl)
	}
	if c.WritesOn() || c.WriteToolsOn() {
		t.Error("MCP_read_only=true leaves writes on")
	}
}
