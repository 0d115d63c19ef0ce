package interop

import (
	"testing"

	"github.com/mcpsearch/mcpsearch/internal/searxngtest"
)

// TestTypeScriptSDKOversizedCall: the TypeScript SDK, which writes a
// request's id after its params, gets a tool error for a tools/call past
// the 4 MB message limit over every transport, and its session goes on.
func TestTypeScriptSDKOversizedCall(t *testing.T) {
	requireNode(t)
	for _, tc := range transportCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fake := searxngtest.New(t)
			runTS(t, newTarget(t, tc, baseConfig(fake.URL)), "oversize", "--query", "oversize")
		})
	}
}
