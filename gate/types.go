// Package gate puts the policy gate, the tool switches, the tool-call cap and the audit log
// in front of any backend. Every call of every backend goes through it: a command is
// classified (policy), approved or refused according to approvals.mode, and recorded (audit),
// refused ones included. No backend has policy code of its own.
package gate

import (
	"context"
	"fmt"

	"github.com/hermes-sandbox/hermes-sandbox/policy"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// Decision is a person's answer to an approval request.
type Decision string

// Decisions.
const (
	ApproveOnce    Decision = "once"    // run this command this time
	ApproveSession Decision = "session" // allow these findings for the rest of the session
	ApproveAlways  Decision = "always"  // add the findings' descriptions to command_allowlist
	Deny           Decision = "deny"
)

// Request is what an approver is shown.
type Request struct {
	Backend  string
	Session  string
	Tool     string // "terminal", "job_start", …
	Command  string
	Verdict  policy.Verdict
	Findings []policy.Finding
	// Notes say more about the findings (which file could not be read, a parse error).
	Notes []string
}

// Approver asks a person. It must honour ctx (approvals.timeout is applied through it) and
// return Deny, never an error, when the person declines.
type Approver interface {
	Approve(ctx context.Context, req Request) (Decision, error)
}

type approverKey struct{}

// WithApprover attaches the approver for calls made with ctx (the CLI's terminal prompt, or an
// MCP session's elicitation). Without one, manual mode refuses, as silence is never consent.
func WithApprover(ctx context.Context, a Approver) context.Context {
	return context.WithValue(ctx, approverKey{}, a)
}

func approverFrom(ctx context.Context) Approver {
	a, _ := ctx.Value(approverKey{}).(Approver)
	return a
}

// Caller says who makes the calls on a context: the MCP client's name and the transport
// (stdio, http), or the CLI. The gate puts it in every audit record.
type Caller struct {
	Client    string
	Transport string
	// Key names the MCP access key the call came with (`mcp keys add NAME`); "" for the
	// admin token, stdio and the CLI.
	Key string
}

type callerKey struct{}

// WithCaller attaches the caller to calls made with ctx.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, &c)
}

func callerFrom(ctx context.Context) *Caller {
	c, _ := ctx.Value(callerKey{}).(*Caller)
	return c
}

// RefusedError says the gate did not let a call through. It matches sandbox.ErrDenied.
type RefusedError struct {
	Tool    string
	Command string
	// Reason is one of: hardline, denied, no-approver, timeout, tool-disabled, call-limit,
	// store, audit-failed.
	Reason   string
	Verdict  policy.Verdict
	Findings []policy.Finding
	// Notes say more about the findings (which file could not be read, and why).
	Notes []string
	// Hint says how an operator can allow it, if that is possible at all.
	Hint string
}

func (e *RefusedError) Error() string {
	msg := "refused " + e.Tool
	switch e.Reason {
	case "hardline":
		msg += ": blocked by a hardline rule, which no mode or allowlist can lift"
	case "denied":
		msg += ": the approver denied it"
	case "no-approver":
		msg += ": it needs approval and nobody can be asked"
	case "timeout":
		msg += ": nobody answered the approval request in time"
	case "tool-disabled":
		msg += ": this tool is switched off"
	case "call-limit":
		msg += ": the session used up its tool calls (loop.max_tool_calls)"
	case "store":
		msg += ": the gate's session store cannot be used"
	case "audit-failed":
		msg += ": its intent could not be recorded in the audit log, so it did not run"
	default:
		msg += ": " + e.Reason
	}
	for _, f := range e.Findings {
		msg += fmt.Sprintf("; [%s] %s", f.Rule, f.Description)
	}
	for _, n := range e.Notes {
		msg += "; " + n
	}
	if e.Hint != "" {
		msg += " (" + e.Hint + ")"
	}
	return msg
}

// Unwrap makes errors.Is(err, sandbox.ErrDenied) true.
func (e *RefusedError) Unwrap() error { return sandbox.ErrDenied }

// ExitCode is what the CLI exits with for a refused command.
func (e *RefusedError) ExitCode() int { return sandbox.ExitNotExec }

// Budget is implemented by gated sessions: how many tool calls remain (-1 = unlimited).
type Budget interface {
	RemainingCalls() int
}

// Confiner is implemented by backends that confine commands in the kernel as well (local,
// with Landlock): enforced says whether the kernel does, detail how or why not. A gated
// backend passes it through; detail is "" when the backend has no such confinement.
type Confiner interface {
	Confinement() (enforced bool, detail string)
}
