package server

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// notifyProgress sends the caller of a tool call a progress notification:
// progress grows with every call, total is 0 when unknown.
type notifyProgress func(ctx context.Context, progress, total float64, message string)

type progressKey struct{}

// withProgress gives the call's handler a way to report progress when the
// request asked for it with a progressToken (MCP's notifications/progress);
// requests without one get none.
func withProgress(ctx context.Context, req *mcp.CallToolRequest) context.Context {
	if req == nil || req.Params == nil || req.Session == nil {
		return ctx
	}
	token := req.Params.GetProgressToken()
	if token == nil {
		return ctx
	}
	ss := req.Session
	var notify notifyProgress = func(ctx context.Context, progress, total float64, message string) {
		// A client that stopped listening is the call's own business: the
		// call goes on.
		_ = ss.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: progress, Total: total, Message: message})
	}
	return context.WithValue(ctx, progressKey{}, notify)
}

// progressFrom returns the call's progress reporter, nil when the caller
// asked for none.
func progressFrom(ctx context.Context) notifyProgress {
	n, _ := ctx.Value(progressKey{}).(notifyProgress)
	return n
}
