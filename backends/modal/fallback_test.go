//go:build unix

package modal

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// TestFallback: when the helper cannot run (here: no helper for the machine's architecture),
// each command is one Exec with the shell state in a file, and it still behaves like the
// helper: exit codes, separate streams, state, dir, env, stdin, timeouts that kill the tree,
// scripts over the exec size limit. sandbox_info's warnings say so.
func TestFallback(t *testing.T) {
	f := newFake(t)
	base := newBackend(t, f, t.TempDir(), nil)
	b, err := NewWith(base.cfg, base.opts, Options{HelperArch: "riscv64"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	sess := open(t, b, "fb")
	res := run(t, sess, "echo out; echo err >&2; exit 4")
	if res.ExitCode != 4 || res.Stdout != "out\n" || res.Stderr != "err\n" {
		t.Errorf("fallback exec = %d %q %q; want 4, out, err", res.ExitCode, res.Stdout, res.Stderr)
	}
	run(t, sess, "mkdir -p '/tmp/f b' && cd '/tmp/f b' && export FB='x y'; HERMES_LOCAL=1")
	res = run(t, sess, `pwd; echo "$FB|${HERMES_LOCAL-unset}"`)
	if res.Stdout != "/tmp/f b\nx y|unset\n" || res.Cwd != "/tmp/f b" {
		t.Errorf("state = %q (cwd %q); want /tmp/f b, x y|unset", res.Stdout, res.Cwd)
	}
	run(t, sess, "cd /; unset FB; exit 5")
	if res = run(t, sess, `pwd; echo "${FB-gone}"`); res.Stdout != "/\ngone\n" {
		t.Errorf("state after exit 5 = %q", res.Stdout)
	}
	// A script's own EXIT trap does not lose its state; a state that cannot be written (the
	// wrapper's __hermes_st pointed at a missing directory, as a full disk refuses it) is
	// reported, and the session keeps the state from before.
	if res = run(t, sess, "trap 'echo bye' EXIT; cd /tmp && export FB=trapped"); res.Stdout != "bye\n" || res.StateNotSaved {
		t.Errorf("script with its own EXIT trap = %q, state not saved %v; want bye, saved", res.Stdout, res.StateNotSaved)
	}
	if res = run(t, sess, `pwd; echo "${FB-lost}"`); res.Stdout != "/tmp\ntrapped\n" || res.StateNotSaved {
		t.Errorf("state after a script with its own EXIT trap = %q, state not saved %v; want /tmp, trapped", res.Stdout, res.StateNotSaved)
	}
	res = run(t, sess, "cd / && export FB=unsaved; __hermes_st=/nonexistent-hermes-dir/state")
	if !res.StateNotSaved || res.StateError == "" || res.ExitCode != 0 {
		t.Errorf("unwritable state = exit %d, state not saved %v (%q); want 0, true and a reason", res.ExitCode, res.StateNotSaved, res.StateError)
	}
	if res = run(t, sess, `pwd; echo "${FB-lost}"`); res.Stdout != "/tmp\ntrapped\n" {
		t.Errorf("state after a failed save = %q; want the state from before it", res.Stdout)
	}
	ctx := ctxT(t, 2*time.Minute)
	res, err = sess.Exec(ctx, sandbox.Command{Script: `pwd; echo "$ONE"`, Dir: "/tmp", Env: map[string]string{"ONE": "x"}})
	if err != nil || res.Stdout != "/tmp\nx\n" {
		t.Errorf("Dir and Env = %+v, %v", res, err)
	}
	if res = run(t, sess, `echo "${ONE-only-once}"`); res.Stdout != "only-once\n" {
		t.Errorf("a per-command variable stayed in the session: %q", res.Stdout)
	}
	res, err = sess.Exec(ctx, sandbox.Command{Argv: []string{"printf", "%s|", "a b", "c'd", "$(x)"}, Stdin: strings.NewReader("ignored")})
	if err != nil || res.Stdout != "a b|c'd|$(x)|" {
		t.Errorf("argv = %+v, %v", res, err)
	}
	res, err = sess.Exec(ctx, sandbox.Command{Script: "cat", Stdin: strings.NewReader("hello\x00\n")})
	if err != nil || res.Stdout != "hello\x00\n" {
		t.Errorf("stdin = %+v, %v", res, err)
	}
	// Timeout: prove ps sees such a process, then that none is left.
	// (The forked child becomes `sleep` when it execs: poll for it, for up to 10 s.)
	if res = run(t, sess, "sleep 6179 & i=0; while [ $i -lt 100 ] && ! ps -o args | grep -q '^sleep 6179'; do sleep "+
		"0.1; i=$((i+1)); done; ps -o args | grep -c '^sleep 6179'; kill $!"); strings.TrimSpace(res.Stdout) != "1" {
		t.Fatalf("ps does not see a background sleep: %q", res.Stdout)
	}
	res, err = sess.Exec(ctx, sandbox.Command{Script: "sleep 6171 & sleep 6172; echo not-reached", Timeout: 2 * time.Second})
	if err != nil || res.ExitCode != sandbox.ExitTimeout || !res.TimedOut || strings.Contains(res.Stdout, "not-reached") {
		t.Errorf("timeout = %+v, %v; want exit 124", res, err)
	}
	if res = run(t, sess, "ps -o args | grep -c '^sleep 617[12]'"); strings.TrimSpace(res.Stdout) != "0" {
		t.Errorf("processes left after the timeout: %q", res.Stdout)
	}
	// Over the 64 KiB exec limit: a script goes as a file, an argv is refused.
	big := strings.Repeat("a", 70_000)
	if res = run(t, sess, "x='"+big+"'; echo ${#x}"); res.Stdout != "70000\n" {
		t.Errorf("70 KB script = %q", res.Stdout)
	}
	if _, err = sess.Exec(ctx, sandbox.Command{Argv: []string{"echo", big}}); !errors.Is(err, sandbox.ErrInvalidConfig) || !strings.Contains(err.Error(), "65536") {
		t.Errorf("70 KB argv = %v; want ErrInvalidConfig naming the 65536-byte limit", err)
	}
	if jr, ok := sess.(sandbox.JobRunner); ok {
		if _, err := jr.Jobs(ctx); !errors.Is(err, sandbox.ErrUnsupported) {
			t.Errorf("Jobs without the helper = %v; want ErrUnsupported", err)
		}
	}
	warned := false
	for _, w := range b.Warnings() {
		warned = warned || strings.Contains(w, "could not start")
	}
	if !warned {
		t.Errorf("Warnings() = %q; want the fallback reported", b.Warnings())
	}
}
