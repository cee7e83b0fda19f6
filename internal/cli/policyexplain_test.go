//go:build unix

package cli_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestPolicyCheckExplain: --explain shows how the program read each word, so a
// person can see why "--compress-program" after -o is a file name, not the option.
func TestPolicyCheckExplain(t *testing.T) {
	e := newEnv(t)
	code, out, errOut := e.run("", "policy", "check", "--explain", "sort -o --compress-program names.txt")
	if code != 0 {
		t.Fatalf("policy check --explain: exit %d; want 0 (safe)\n%s%s", code, out, errOut)
	}
	for _, want := range []string{
		`command          "sort"`,
		`option           "-o"  -o`,
		`option-value     "--compress-program"  -o`,
		`operand          "names.txt"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("policy check --explain output lacks %q:\n%s", want, out)
		}
	}
	code, out, _ = e.run("", "policy", "check", "--explain", "--json", "sort --compress-prog=sh x")
	if code != 1 {
		t.Fatalf("policy check --explain --json: exit %d; want 1 (dangerous)\n%s", code, out)
	}
	var res struct {
		Verdict string `json:"verdict"`
		Words   [][]struct {
			Word, Kind, Option, Value string
		} `json:"words"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("policy check --json: %v\n%s", err, out)
	}
	if len(res.Words) != 1 || len(res.Words[0]) != 3 {
		t.Fatalf("words = %+v; want one call of three words", res.Words)
	}
	if w := res.Words[0][1]; w.Kind != "option" || w.Option != "--compress-program" || w.Value != "sh" {
		t.Errorf("word 1 = %+v; want the option --compress-program with value sh", w)
	}
}
