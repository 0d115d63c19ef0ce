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

// TestRateLimitZeroTurnsEveryDefaultOff: MCP_rate_limit_per_minute=0 is
// documented as turning limiting off, so it turns off the write tools'
// built-in buckets too; only a tool's own setting brings one back.
func TestRateLimitZeroTurnsEveryDefaultOff(t *testing.T) {
	for _, tt := range []struct {
		env  []string
		tool string
		want RateLimit
	}{
		{[]string{"MCP_rate_limit_per_minute=0"}, "add_document", RateLimit{PerMinute: 0, Burst: 5}},
		{[]string{"MCP_rate_limit_per_minute=0"}, "delete_document", RateLimit{PerMinute: 0, Burst: 5}},
		{[]string{"MCP_rate_limit_per_minute=0"}, "search_docs", RateLimit{PerMinute: 0, Burst: 5}},
		{[]string{"MCP_rate_limit_per_minute=0", "MCP_add_document_rate_limit_per_minute=4"}, "add_document", RateLimit{PerMinute: 4, Burst: 5}},
		{[]string{"MCP_rate_limit_per_minute=0", "MCP_add_document_rate_limit_per_minute=4", "MCP_add_document_rate_limit_burst=2"}, "add_document", RateLimit{PerMinute: 4, Burst: 2}},
		{[]string{"MCP_rate_limit_per_minute=60"}, "add_document", WriteToolRateLimits["add_document"]},
		{[]string{"MCP_rate_limit_per_minute=60", "MCP_add_document_rate_limit_burst=7"}, "add_document", RateLimit{PerMinute: 10, Burst: 7}},
		{[]string{"MCP_rate_limit_per_minute=60"}, "search_docs", RateLimit{PerMinute: 60, Burst: 5}},
	} {
		c := Default()
		if err := c.LoadEnv(tt.env); err != nil {
			t.Fatal(err)
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("%v: %v", tt.env, err)
		}
		if got := c.RateLimitFor(tt.tool); got != tt.want {
			t.Errorf("%v: RateLimitFor(%s) = %+v, want %+v", tt.env, tt.tool, got, tt.want)
		}
	}
}
