//go:build unix

package ssh

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"testing/iotest"
)

func execSh(t *testing.T, script string) (string, error) {
	t.Helper()
	out, err := exec.Command("/bin/sh", "-c", script).Output()
	return string(out), err
}

func TestStreamUntil(t *testing.T) {
	tok := []byte("abcdefABCDEF")
	input := "noise ab\x00 abc" + string(tok) + "Sp123\n" + "out" + "abcde" + string(tok) + "E0 1 0 /x y" + string(tok) + "\n"
	for _, name := range []string{"whole", "one byte at a time"} {
		var r = strings.NewReader(input)
		s := newStream(r)
		if name != "whole" {
			s = newStream(iotest.OneByteReader(strings.NewReader(input)))
		}
		var got bytes.Buffer
		if err := s.until(tok, func(p []byte) { got.Write(p) }); err != nil {
			t.Fatal(err)
		}
		if got.String() != "noise ab\x00 abc" {
			t.Errorf("%s: before the first token = %q", name, got.String())
		}
		if c, _ := s.readByte(); c != 'S' {
			t.Errorf("%s: kind = %q", name, c)
		}
		pid, _ := s.collect([]byte("\n"))
		if string(pid) != "p123" {
			t.Errorf("%s: pid = %q", name, pid)
		}
		got.Reset()
		if err := s.until(tok, func(p []byte) { got.Write(p) }); err != nil || got.String() != "outabcde" {
			t.Errorf("%s: output = %q, %v", name, got.String(), err)
		}
		s.readByte()
		body, err := s.collect(tok)
		if err != nil || string(body) != "0 1 0 /x y" {
			t.Errorf("%s: end = %q, %v", name, body, err)
		}
	}
}

// TestStreamDoesNotHoldBackOutput checks that output which cannot be the start of a token is
// passed on at once (streaming), before any token arrives.
func TestStreamDoesNotHoldBackOutput(t *testing.T) {
	tok := []byte("abcdefABCDEF")
	r, w := ioPipe()
	s := newStream(r)
	seen := make(chan string, 4)
	go s.until(tok, func(p []byte) { seen <- string(p) })
	w.Write([]byte("first\n"))
	if got := <-seen; got != "first\n" {
		t.Errorf("streamed %q; want %q", got, "first\n")
	}
	w.Close()
}

func TestWrapperRunsLocally(t *testing.T) {
	// The generated wrapper is plain POSIX sh: run it here against a scratch state dir.
	dir := t.TempDir()
	spec := wrapperSpec{stateDir: shq(dir), initialCwd: shq(dir), env: map[string]string{"HERMES_X": "it's $(x)"}}
	w, err := spec.wrapper()
	if err != nil {
		t.Fatal(err)
	}
	f := dir + "/run-1"
	if err := writeFiles(f+".sh", `printf '%s|' "$HERMES_X"; cd /; export KEEP=1`, f+".w", w); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("/bin/sh", f+".w", f).CombinedOutput()
	if err != nil || string(out) != "it's $(x)|" {
		t.Fatalf("wrapper printed %q, %v", out, err)
	}
	env, _ := readFile(f + ".env")
	cwd, _ := readFile(f + ".cwd")
	if cwd != "/" || !strings.Contains(env, "KEEP") || strings.Contains(env, "HERMES_X") {
		t.Errorf("saved cwd %q env %q; want /, KEEP kept, HERMES_X dropped", cwd, env)
	}
	if _, err := (wrapperSpec{env: map[string]string{"A-B": "x"}}).wrapper(); err == nil {
		t.Errorf("wrapper accepted an environment name that is not a shell identifier")
	}
}

func ioPipe() (*pipeReader, *pipeWriter) {
	ch := make(chan []byte, 16)
	return &pipeReader{ch: ch}, &pipeWriter{ch: ch}
}

type pipeReader struct{ ch chan []byte }
type pipeWriter struct{ ch chan []byte }

func (r *pipeReader) Read(p []byte) (int, error) {
	b, ok := <-r.ch
	if !ok {
		return 0, io.EOF
	}
	return copy(p, b), nil
}

func (w *pipeWriter) Write(p []byte) (int, error) {
	w.ch <- append([]byte(nil), p...)
	return len(p), nil
}
func (w *pipeWriter) Close() error { close(w.ch); return nil }

func writeFiles(kv ...string) error {
	for i := 0; i+1 < len(kv); i += 2 {
		if err := os.WriteFile(kv[i], []byte(kv[i+1]), 0o600); err != nil {
			return err
		}
	}
	return nil
}

func readFile(p string) (string, error) {
	b, err := os.ReadFile(p)
	return string(b), err
}
