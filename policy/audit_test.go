package policy

import "testing"

func TestAuditInitIsHardline(t *testing.T) {
	c := New(Options{})
	for _, cmd := range []string{"hermes-sandbox audit init", "hermes-sandbox audit init --rotate",
		"./bin/hermes-sandbox --sandbox local audit init --rotate",
		"hermes-sandbox --sandbox local config set audit.on_failure warn"} {
		if got := c.Classify(cmd).Verdict; got != VerdictHardline {
			t.Errorf("Classify(%q) = %s; want hardline", cmd, got)
		}
	}
	for _, cmd := range []string{"hermes-sandbox audit verify", "hermes-sandbox audit show --session s"} {
		if got := c.Classify(cmd).Verdict; got != VerdictSafe {
			t.Errorf("Classify(%q) = %s; want safe", cmd, got)
		}
	}
}
