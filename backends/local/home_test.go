//go:build !windows

package local_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/hermes-sandbox/hermes-sandbox/backends/local"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// A local session belongs to the directory it was created in; used from another directory it
// still runs there, and says so.
func TestSessionSaysWhereItBelongs(t *testing.T) {
	state, projA, projB := t.TempDir(), t.TempDir(), t.TempDir()
	open := func(dir string) (sandbox.Session, *strings.Builder) {
		t.Chdir(dir)
		var progress strings.Builder
		b, err := local.New(sandbox.FactoryOptions{StateDir: state, Progress: &progress,
			Environ: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + state}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		s, err := b.Open(context.Background(), "scratch")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s, &progress
	}
	s, progress := open(projA)
	if res, err := s.Exec(context.Background(), sandbox.Command{Script: "pwd"}); err != nil || strings.TrimSpace(res.Stdout) != projA {
		t.Fatalf("first command ran in %q (%v); want %s", res.Stdout, err, projA)
	}
	if progress.Len() != 0 {
		t.Errorf("a new session printed a notice: %q", progress.String())
	}
	s.Close()

	s, progress = open(projB)
	res, err := s.Exec(context.Background(), sandbox.Command{Script: "pwd"})
	if err != nil || strings.TrimSpace(res.Stdout) != projA {
		t.Fatalf("from another directory the session ran in %q (%v); want its own %s", res.Stdout, err, projA)
	}
	if msg := progress.String(); !strings.Contains(msg, projA) || !strings.Contains(msg, "--cwd .") {
		t.Errorf("no notice that the session belongs elsewhere: %q", msg)
	}
	s.Close()

	// From a subdirectory of its own directory there is nothing to say.
	sub := projA + "/sub"
	if err := mkdir(sub); err != nil {
		t.Fatal(err)
	}
	if _, progress = open(sub); progress.Len() != 0 {
		t.Errorf("a notice inside the session's own tree: %q", progress.String())
	}
}

func mkdir(p string) error { return os.MkdirAll(p, 0o700) }
