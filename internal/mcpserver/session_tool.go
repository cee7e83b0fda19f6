package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// toolSession snapshots, restores and forks sandbox sessions (sandbox.Brancher).
const toolSession = "session"

// SessionInput is the session tool's arguments.
type SessionInput struct {
	Action   string `json:"action" jsonschema:"snapshot: store this session's files and cd/export state and return the snapshot id; snapshots: list the stored snapshots; restore: make the new session name from snapshot; fork: copy this session, as it is now, into the new session name"`
	Name     string `json:"name,omitempty" jsonschema:"restore and fork: the new session's name (letters, digits, '-', '_', '.'; must not exist)"`
	Snapshot string `json:"snapshot,omitempty" jsonschema:"restore: the snapshot id that snapshot or snapshots returned"`
}

// SessionResult is the session tool's structured result.
type SessionResult struct {
	Action     string                `json:"action"`
	Session    string                `json:"session" jsonschema:"this MCP session's sandbox session"`
	NewSession string                `json:"new_session,omitempty" jsonschema:"the session restore or fork made"`
	Snapshot   *sandbox.SnapshotRef  `json:"snapshot,omitempty"`
	Snapshots  []sandbox.SnapshotRef `json:"snapshots,omitempty"`
}

func (s *Server) addSessionTool() {
	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:  toolSession,
		Title: "Snapshot, restore and fork sandbox sessions",
		Description: "Branch this sandbox session (backend " + s.backend.Name() + "). action snapshot stores its files and " +
			"its cd/export state and returns the snapshot id; snapshots lists the stored snapshots; restore makes a new " +
			"session `name` from `snapshot`; fork copies this session as it is now into a new session `name`, this one " +
			"running on. Running processes and background jobs are not carried. The new session is a sandbox session of " +
			"its own, reachable as `hermes-sandbox exec --session NAME` or `hermes-sandbox mcp --session NAME`; nothing it " +
			"does reaches this one. Each call passes the policy gate and counts as a tool call.",
		InputSchema: schemaFor[SessionInput](map[string][]any{"action": {"snapshot", "snapshots", "restore", "fork"}}),
		Annotations: &mcp.ToolAnnotations{Title: "Snapshot, restore and fork sessions", DestructiveHint: boolPtr(false),
			OpenWorldHint: boolPtr(false)},
	}, s.session)
}

func (s *Server) session(ctx context.Context, req *mcp.CallToolRequest, in SessionInput) (*mcp.CallToolResult, SessionResult, error) {
	out := SessionResult{Action: in.Action}
	switch in.Action {
	case "snapshot", "snapshots":
	case "restore":
		if strings.TrimSpace(in.Snapshot) == "" || strings.TrimSpace(in.Name) == "" {
			return nil, out, fmt.Errorf("session: action restore needs snapshot (an id from snapshot or snapshots) and name (the new session)")
		}
	case "fork":
		if strings.TrimSpace(in.Name) == "" {
			return nil, out, fmt.Errorf("session: action fork needs name, the new session's name")
		}
	default:
		return nil, out, fmt.Errorf("session: unknown action %q: want snapshot, snapshots, restore or fork", in.Action)
	}
	sb, cctx, release, err := s.call(ctx, req)
	if err != nil {
		return nil, out, failure(req.Session, "session", err)
	}
	defer release()
	if err := s.checkEnabled(sb, toolSession); err != nil {
		return nil, out, failure(req.Session, "session", err)
	}
	br, ok := s.backend.(sandbox.Brancher)
	if !ok {
		return nil, out, fmt.Errorf("session: the %s backend cannot snapshot, restore or fork sessions: %w", s.backend.Name(), sandbox.ErrUnsupported)
	}
	out.Session = sb.Name()
	op := "session " + in.Action
	var text string
	switch in.Action {
	case "snapshot":
		ref, err := br.Snapshot(cctx, sb.Name())
		if err != nil {
			return nil, out, failure(req.Session, op, err)
		}
		out.Snapshot = &ref
		text = fmt.Sprintf("snapshot %s of session %s; make a session from it with session {action: \"restore\", snapshot: %q, name: NEW}", ref.ID, ref.Session, ref.ID)
	case "snapshots":
		list, err := br.Snapshots(cctx)
		if err != nil {
			return nil, out, failure(req.Session, op, err)
		}
		out.Snapshots = list
		b, _ := json.Marshal(list)
		text = fmt.Sprintf("%d snapshot(s): %s", len(list), b)
	case "restore":
		if err := br.Restore(cctx, in.Snapshot, in.Name); err != nil {
			return nil, out, failure(req.Session, op, err)
		}
		out.NewSession, out.Snapshot = in.Name, &sandbox.SnapshotRef{ID: in.Snapshot}
		text = fmt.Sprintf("restored snapshot %s as session %s", in.Snapshot, in.Name)
	case "fork":
		if err := br.Fork(cctx, sb.Name(), in.Name); err != nil {
			return nil, out, failure(req.Session, op, err)
		}
		out.NewSession = in.Name
		text = fmt.Sprintf("forked session %s as %s; this session goes on unchanged", sb.Name(), in.Name)
	}
	return textResult(text), out, nil
}
