package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hermes-sandbox/hermes-sandbox/gate"
)

// canElicit reports whether the client said in initialize that it can show a form
// elicitation to its user.
func canElicit(ss *mcp.ServerSession) bool {
	p := ss.InitializeParams()
	if p == nil || p.Capabilities == nil || p.Capabilities.Elicitation == nil {
		return false
	}
	e := p.Capabilities.Elicitation
	// A client that lists neither mode supports form (the 2025-06-18 shape).
	return e.Form != nil || e.URL == nil
}

// approvalSchema is the form a person answers: one choice.
var approvalSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"decision": map[string]any{
			"type":        "string",
			"title":       "Decision",
			"description": "once: run it this time. session: also allow these findings for the rest of this session. deny: refuse it.",
			"enum":        []string{string(gate.ApproveOnce), string(gate.ApproveSession), string(gate.Deny)},
			"enumNames":   []string{"Allow once", "Allow for this session", "Deny"},
			"default":     string(gate.Deny),
		},
	},
	"required": []string{"decision"},
}

// elicitApprover asks the person behind the MCP client, through elicitation. Declining,
// cancelling or not answering in time (the gate's approvals.timeout, through ctx) denies.
type elicitApprover struct {
	ss *mcp.ServerSession
}

func (a *elicitApprover) Approve(ctx context.Context, req gate.Request) (gate.Decision, error) {
	res, err := a.ss.Elicit(ctx, &mcp.ElicitParams{
		Mode:            "form",
		Message:         approvalMessage(req),
		RequestedSchema: approvalSchema,
	})
	if err != nil {
		return gate.Deny, err
	}
	if res.Action != "accept" {
		return gate.Deny, nil
	}
	switch d, _ := res.Content["decision"].(string); gate.Decision(d) {
	case gate.ApproveOnce:
		return gate.ApproveOnce, nil
	case gate.ApproveSession:
		return gate.ApproveSession, nil
	}
	return gate.Deny, nil
}

// approvalMessage is what the person reads: what would run, where, and why it needs asking.
func approvalMessage(req gate.Request) string {
	var b strings.Builder
	// The command and anything else from the session go through gate.Visible, as in the CLI's
	// prompt: control and bidirectional characters are shown escaped, never interpreted.
	fmt.Fprintf(&b, "The agent wants to run a %s %s in the %s sandbox (session %s):\n\n",
		req.Verdict, req.Tool, req.Backend, gate.Visible(req.Session))
	fmt.Fprintf(&b, "    %s\n\n", strings.ReplaceAll(gate.Visible(req.Command), "\n", "\n    "))
	if len(req.Findings) > 0 {
		b.WriteString("Why it needs approval:\n")
		for _, f := range req.Findings {
			fmt.Fprintf(&b, "  - [%s] %s\n", f.Rule, f.Description)
		}
		for _, n := range req.Notes {
			fmt.Fprintf(&b, "    (%s)\n", gate.Visible(n))
		}
		b.WriteString("\n")
	}
	b.WriteString("Allow it once, allow these findings for the rest of this session, or deny it?")
	return b.String()
}

// toolError is a tool failure shown to the model as an isError result.
type toolError struct {
	msg string
	err error
}

func (e *toolError) Error() string { return e.msg }
func (e *toolError) Unwrap() error { return e.err }

// failure turns an error from the sandbox or the gate into the message the model reads. A
// refusal says why and how an operator can allow it; a client without elicitation is told so.
func failure(ss *mcp.ServerSession, op string, err error) error {
	var re *gate.RefusedError
	if !errors.As(err, &re) {
		return &toolError{msg: op + ": " + err.Error(), err: err}
	}
	msg := re.Error()
	switch re.Reason {
	case "no-approver":
		if !canElicit(ss) {
			msg += ". This MCP client cannot show approval requests (it does not support elicitation), so nobody could be asked"
		}
	case "denied", "timeout":
		msg += ". Do not retry it in another form; ask the user how to proceed"
	case "call-limit":
		msg += ". No further tool calls will run in this session"
	}
	return &toolError{msg: msg, err: err}
}
