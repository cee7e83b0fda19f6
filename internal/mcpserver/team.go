package mcpserver

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hermes-sandbox/hermes-sandbox/gate"
)

// CodeQuota is the JSON-RPC error code of a call refused by its key's limit. Its data holds
// limit, value, retry_after_seconds and reset.
const CodeQuota = -32029

// identityOf is who sent an MCP request: over HTTP, the key (or admin token) that the front
// door verified; over stdio, nobody in particular.
func identityOf(req mcp.Request) identity {
	if req == nil {
		return identity{}
	}
	ex := req.GetExtra()
	if ex == nil || ex.TokenInfo == nil {
		return identity{}
	}
	k, _ := ex.TokenInfo.Extra["key"].(*Key)
	return identity{name: ex.TokenInfo.UserID, key: k}
}

func requestIDOf(req mcp.Request) string {
	if req == nil {
		return ""
	}
	if ex := req.GetExtra(); ex != nil && ex.Header != nil {
		return ex.Header.Get(requestIDHeader)
	}
	return ""
}

// admissionOf is the front door's ticket for an HTTP tool call it admitted, or "".
func admissionOf(req mcp.Request) string {
	if req == nil {
		return ""
	}
	if ex := req.GetExtra(); ex != nil && ex.Header != nil {
		return ex.Header.Get(admissionHeader)
	}
	return ""
}

type callIdentityKey struct{}

func identityFrom(ctx context.Context) identity {
	id, _ := ctx.Value(callIdentityKey{}).(identity)
	return id
}

// keyGate applies a key's tool scope and limits to tools/call and counts every call in the
// metrics; it also hides from tools/list the tools a key may not call.
func (s *Server) keyGate(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		who := identityOf(req)
		ctx = context.WithValue(ctx, callIdentityKey{}, who)
		switch method {
		case "tools/list":
			res, err := next(ctx, method, req)
			if lr, ok := res.(*mcp.ListToolsResult); ok && err == nil && who.key != nil {
				var keep []*mcp.Tool
				for _, t := range lr.Tools {
					if who.key.AllowsTool(t.Name) {
						keep = append(keep, t)
					}
				}
				lr.Tools = keep
			}
			return res, err
		case "tools/call":
		default:
			return next(ctx, method, req)
		}
		cr, _ := req.(*mcp.CallToolRequest)
		tool := ""
		if cr != nil && cr.Params != nil {
			tool = cr.Params.Name
		}
		start := time.Now()
		log := s.log.With("key", who.name, "request_id", requestIDOf(req), "tool", tool)
		if who.key != nil && !who.key.AllowsTool(tool) {
			res := &mcp.CallToolResult{}
			res.SetError(&gate.RefusedError{Tool: tool, Reason: "key-scope",
				Hint: fmt.Sprintf("key %q may call only %s; an operator can issue a key with more (`hermes-sandbox mcp keys add --tools`)",
					who.name, strings.Join(who.key.Tools, ", "))})
			s.metrics.observe(who.name, tool, s.backend.Name(), time.Since(start), res, nil)
			log.Info("tool call refused by the key's scope")
			return res, nil
		}
		if s.isDraining() {
			res := &mcp.CallToolResult{}
			res.SetError(fmt.Errorf("the server is shutting down and starts no new commands; reconnect later"))
			return res, nil
		}
		done := func() {}
		if who.key != nil {
			// Admitted at the HTTP front door (which answers 429 over a limit), or here.
			if d := s.admits.take(admissionOf(req)); d != nil {
				done = d
			} else {
				d, q := s.limits.startCall(who.key, time.Now())
				if q != nil {
					s.metrics.quota(who.name, q.Limit)
					log.Info("tool call over quota", "limit", q.Limit)
					return nil, &jsonrpc.Error{Code: CodeQuota, Message: q.Error(), Data: q.data()}
				}
				done = d
			}
		}
		s.inflight.Add(1)
		res, err := next(ctx, method, req)
		s.inflight.Add(-1)
		done()
		d := time.Since(start)
		s.metrics.observe(who.name, tool, s.backend.Name(), d, res, err)
		log.Debug("tool call", "duration_ms", d.Milliseconds())
		return res, err
	}
}

// inflightCounter counts running tool calls, for the drain.
type inflightCounter struct{ n atomic.Int64 }

func (c *inflightCounter) Add(d int64) { c.n.Add(d) }
func (c *inflightCounter) Load() int64 { return c.n.Load() }

// isDraining reports whether the server has been told to stop.
func (s *Server) isDraining() bool { return s.draining.Load() }

// denyApprover answers no to every approval request: a key issued with --approvals deny.
type denyApprover struct{}

func (denyApprover) Approve(context.Context, gate.Request) (gate.Decision, error) {
	return gate.Deny, nil
}
