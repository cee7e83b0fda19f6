//go:build unix

package agent

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

func TestParseTrapStateShells(t *testing.T) {
	want := map[string]string{"A": "x y", "B": "it's \"q\"\nline2", "C": "", "D": "$HOME `x` \\"}
	setup := `export A='x y' B="it's \"q\"
line2" C= D='$HOME ` + "`x`" + ` \'; printf '%s\0' "$PWD"; export -p`
	for _, shell := range []string{"/bin/sh", "/bin/bash", "/bin/busybox"} {
		if _, err := exec.LookPath(shell); err != nil {
			continue
		}
		args := []string{"-c", setup}
		if strings.HasSuffix(shell, "busybox") {
			args = append([]string{"sh"}, args...)
		}
		cmd := exec.Command(shell, args...)
		cmd.Dir = "/tmp"
		cmd.Env = []string{"PATH=/usr/bin:/bin"}
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v", shell, err)
		}
		cwd, env, err := parseTrapState(out)
		if err != nil {
			t.Fatalf("parseTrapState(%s output) error = %v", shell, err)
		}
		if cwd != "/tmp" {
			t.Errorf("%s: cwd = %q; want /tmp", shell, cwd)
		}
		for k, v := range want {
			if env[k] != v {
				t.Errorf("%s: %s = %q; want %q", shell, k, env[k], v)
			}
		}
		for _, k := range []string{"SHLVL", "PWD", "_"} {
			if _, ok := env[k]; ok {
				t.Errorf("%s: volatile %s kept", shell, k)
			}
		}
	}
}

func TestBytesRoundTrip(t *testing.T) {
	for _, s := range []string{"", "plain", "ünï", "\xff\xfe bad", "nul\x00byte"} {
		b, err := json.Marshal(Bytes(s))
		if err != nil {
			t.Fatal(err)
		}
		var got Bytes
		if err := json.Unmarshal(b, &got); err != nil || string(got) != s {
			t.Errorf("Bytes(%q) round trip = %q, %v", s, got, err)
		}
	}
}

func TestSkipToMagicReturnsBanner(t *testing.T) {
	in := "Welcome!\n\x00HERMES\x00partial" + frameMagic + "rest"
	r := bufio.NewReader(strings.NewReader(in))
	skipped, err := skipToMagic(r)
	if err != nil {
		t.Fatal(err)
	}
	if want := "Welcome!\n\x00HERMES\x00partial"; string(skipped) != want {
		t.Errorf("skipped = %q; want %q", skipped, want)
	}
	rest, _ := r.ReadString(0)
	if rest != "rest" {
		t.Errorf("after magic = %q", rest)
	}
}

func TestFrameRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	w := newFrameWriter(&buf)
	big := bytes.Repeat([]byte("x"), maxFrame+10)
	if err := w.write(tStdout, 7, big); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(&buf)
	var got []byte
	for len(got) < len(big) {
		f, err := readFrame(r)
		if err != nil {
			t.Fatal(err)
		}
		if f.typ != tStdout || f.id != 7 {
			t.Fatalf("frame = %c %d", f.typ, f.id)
		}
		got = append(got, f.payload...)
	}
	if !bytes.Equal(got, big) {
		t.Errorf("payload of %d bytes came back as %d", len(big), len(got))
	}
}

func TestSimpleCommand(t *testing.T) {
	tests := []struct {
		script string
		argv   []string
	}{
		{"true", []string{"true"}},
		{"ls -la /tmp", []string{"ls", "-la", "/tmp"}},
		{`git commit -m 'a message' "with quotes"`, []string{"git", "commit", "-m", "a message", "with quotes"}},
		{"python3 -m pytest -q", []string{"python3", "-m", "pytest", "-q"}},
		{"cd /tmp", nil},
		{"echo hi", nil},
		{"pwd", nil},
		{"ls *.go", nil},
		{"ls ~", nil},
		{"ls $HOME", nil},
		{"X=1 env", nil},
		{"ls > out", nil},
		{"ls; ls", nil},
		{"ls && ls", nil},
		{"ls | cat", nil},
		{"ls &", nil},
		{"! ls", nil},
		{"ls {a,b}", nil},
		{`ls "$x"`, nil},
		{`ls a\ b`, nil},
		{"ls # comment", nil},
		{"if true; then ls; fi", nil},
		{"export X=1", nil},
		{"f", nil}, // an exported bash function below
	}
	env := []string{"PATH=/usr/bin:/bin", "BASH_FUNC_f%%=() {  echo fn\n}"}
	for _, tt := range tests {
		argv, ok := simpleCommand(tt.script, env)
		if ok != (tt.argv != nil) || strings.Join(argv, "\x00") != strings.Join(tt.argv, "\x00") {
			t.Errorf("simpleCommand(%q) = %q, %v; want %q", tt.script, argv, ok, tt.argv)
		}
	}
}
