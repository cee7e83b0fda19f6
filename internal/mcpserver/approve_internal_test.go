package mcpserver

import (
	"strings"
	"testing"

	"github.com/hermes-sandbox/hermes-sandbox/gate"
	"github.com/hermes-sandbox/hermes-sandbox/policy"
)

func TestApprovalMessageShowsEscapes(t *testing.T) {
	req := gate.Request{Backend: "local", Session: "s\x1b]0;x\x07", Tool: "terminal",
		Command: "rm -rf ~/work # \x1b[2K\x1b[1G\x1b[1A\rls -la \u202e\u200b\nsecond line",
		Verdict: policy.VerdictDangerous, Findings: []policy.Finding{{Rule: "r", Description: "d"}},
		Notes: []string{"could not check /tmp/\x1b[8mx"}}
	m := approvalMessage(req)
	for _, bad := range []string{"\x1b", "\r", "\u202e", "\u200b", "\x07"} {
		if strings.Contains(m, bad) {
			t.Errorf("approvalMessage(%q) holds %q raw:\n%s", req.Command, bad, m)
		}
	}
	for _, want := range []string{`rm -rf ~/work # \x1b[2K\x1b[1G\x1b[1A\rls -la \u202e\u200b` + "\n    second line",
		`s\x1b]0;x\x07`, `/tmp/\x1b[8mx`} {
		if !strings.Contains(m, want) {
			t.Errorf("approvalMessage(%q) = %q; want it to show %q", req.Command, m, want)
		}
	}
}
