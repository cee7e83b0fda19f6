//go:build unix

package cli

import (
	"strings"
	"testing"

	"github.com/hermes-sandbox/hermes-sandbox/gate"
	"github.com/hermes-sandbox/hermes-sandbox/policy"
)

// hiddenCommand is a hardline command whose comment repaints the terminal line as a harmless
// one: printed raw, a person reads "ls -la".
const hiddenCommand = "rm -rf ~/work # \x1b[2K\x1b[1G\x1b[1A\rls -la \u202e\u200b"

func TestApprovalPromptShowsEscapes(t *testing.T) {
	req := gate.Request{Backend: "local", Session: "s\x1b]0;x\x07", Tool: "terminal", Command: hiddenCommand,
		Verdict: policy.VerdictDangerous, Notes: []string{"could not check /tmp/\x1b[8mx"}}
	p := approvalPrompt(req)
	for _, bad := range []string{"\x1b", "\r", "\u202e", "\u200b", "\x07"} {
		if strings.Contains(p, bad) {
			t.Errorf("approvalPrompt(%q) holds %q raw:\n%s", req.Command, bad, p)
		}
	}
	for _, want := range []string{`rm -rf ~/work # \x1b[2K\x1b[1G\x1b[1A\rls -la \u202e\u200b`, `s\x1b]0;x\x07`, `/tmp/\x1b[8mx`} {
		if !strings.Contains(p, want) {
			t.Errorf("approvalPrompt(%q) = %q; want it to show %q", req.Command, p, want)
		}
	}
}
