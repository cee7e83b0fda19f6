package policy

import "testing"

// The analyser quotes loop items (parallel's :::) with sandbox.ShellQuote before reading
// the command they make: each item stays one literal word, whatever it holds.
func TestParallelItemsStayLiteral(t *testing.T) {
	for _, c := range []struct {
		cmd  string
		want Verdict
	}{
		{`parallel echo {} ::: if '}' "a'b" '$(rm -rf /)' '~' 'a=b' '!' '; rm -rf /'`, VerdictSafe},
		{`parallel echo ::: '/; rm -rf /' '$(rm -rf /)'`, VerdictSafe},
		{`parallel rm -rf {} ::: /`, VerdictHardline},
		{`parallel rm -rf ::: /`, VerdictHardline},
	} {
		if got := Classify(c.cmd).Verdict; got != c.want {
			t.Errorf("Classify(%q) = %v; want %v", c.cmd, got, c.want)
		}
	}
}
