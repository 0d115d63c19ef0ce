package server

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/mcpsearch/mcpsearch/audit"
	"github.com/mcpsearch/mcpsearch/rerank"
	"github.com/mcpsearch/mcpsearch/searxng"
)

// check is the readiness of one dependency.
type check struct {
	Status string `json:"status"` // ok, down or disabled
	Error  string `json:"error,omitempty"`
	Detail string `json:"detail,omitempty"`
	MS     int64  `json:"latency_ms"`
	// Instances are the SearXNG instances and how each fares.
	Instances []searxng.InstanceStatus `json:"instances,omitempty"`
}

// instanceLister is a web searcher over several instances (searxng.Pool).
type instanceLister interface {
	Instances() []searxng.InstanceStatus
}

// readiness answers /readyz: 200 when every enabled dependency answers,
// 503 otherwise, with one entry per dependency.
func (s *Server) readiness(w http.ResponseWriter, r *http.Request) {
	checks := s.dependencyChecks(r.Context(), s.authenticated(r))
	status, code := "ready", http.StatusOK
	for name, c := range checks {
		if c.Status == "down" {
			status, code = "unavailable", http.StatusServiceUnavailable
		}
		// Error texts name users, databases and hosts: they go to the log
		// and to authenticated callers only.
		if c.Error != "" {
			s.log.Warn("readiness", "dependency", name, "status", c.Status, "error", c.Error)
			if !s.authenticated(r) {
				c.Error, c.Detail = "", ""
				checks[name] = c
			}
		}
	}
	writeJSON(w, code, map[string]any{"status": status, "checks": checks})
}

// dependencyChecks checks every enabled dependency, as /readyz reports
// them, within 3 seconds; detailed adds each SearXNG instance.
func (s *Server) dependencyChecks(ctx context.Context, detailed bool) map[string]check {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	checks := map[string]check{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	// Each tool names the dependency it needs (tool.probe): checked once,
	// however many tools share it, while any of them is offered.
	pings := map[string]func(context.Context) error{}
	for _, d := range s.tools.all {
		if d.probe == "" {
			continue
		}
		if _, seen := pings[d.probe]; !seen {
			pings[d.probe] = nil
		}
		if d.offered {
			pings[d.probe] = d.ping
		}
	}
	for name, ping := range pings {
		if ping == nil {
			mu.Lock()
			checks[name] = check{Status: "disabled"}
			mu.Unlock()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			c := check{Status: "ok"}
			if err := ping(ctx); err != nil {
				c = check{Status: "down", Error: err.Error()}
			}
			c.MS = time.Since(start).Milliseconds()
			mu.Lock()
			checks[name] = c
			mu.Unlock()
		}()
	}
	wg.Wait()
	if il, ok := s.deps.Search.(instanceLister); ok && detailed {
		if c, ok := checks["searxng"]; ok {
			c.Instances = il.Instances()
			checks["searxng"] = c
		}
	}
	if s.deps.Audit != nil {
		checks["audit"] = auditCheck(s.deps.Audit)
	}
	if s.deps.Reranker != nil {
		checks["reranker"] = rerankerCheck(s.deps.Reranker.Status())
	}
	return checks
}

// rerankerCheck reports the reranker from its recent calls, not by calling
// it: a hosted reranker is paid by the call. A reranker whose last call
// failed is "degraded", which does not fail readiness: searches keep their
// fused order and say so.
func rerankerCheck(st rerank.Status) check {
	c := check{Status: "ok", Detail: fmt.Sprintf("%s (%s API); no call yet", st.URL, st.API)}
	if !st.LastOK.IsZero() {
		c.Detail = fmt.Sprintf("%s (%s API); last answered %s", st.URL, st.API, st.LastOK.UTC().Format(time.RFC3339))
	}
	if st.LastError != "" {
		c.Status, c.Error = "degraded", st.LastError
	}
	return c
}

// auditCheck reports where audit rows go. Rows waiting while the database
// is down make the check "degraded", which does not fail readiness: calls
// still work and the rows are kept. A writer whose writes have failed for
// longer than its stall bound while rows wait is "down": the audit promise
// no longer holds, and a load balancer should take the replica out.
func auditCheck(w *audit.Writer) check {
	st := w.Status()
	c := check{Status: "ok", Detail: fmt.Sprintf("rows go to the %s; %d queued, %d written, %d dropped, %d refused by the database, %d sanitised",
		st.Mode, st.Queued, st.Written, st.Dropped, st.Poisoned, st.Sanitised)}
	if !st.LastWrite.IsZero() {
		c.Detail += "; last write " + st.LastWrite.UTC().Format(time.RFC3339)
	}
	if st.Mode == "log" {
		c.Detail = "no database: audit rows go to the log"
	}
	switch {
	case st.Stalled:
		c.Status, c.Error = "down", "audit writes have failed since "+st.FailingSince.UTC().Format(time.RFC3339)+": "+st.LastErr
	case st.LastErr != "":
		c.Status, c.Error = "degraded", st.LastErr
	}
	return c
}
