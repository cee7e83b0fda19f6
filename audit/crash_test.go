package audit

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

const crashPathEnv = "HERMES_AUDIT_TEST_CRASH_PATH"

// TestHelperProcessCrashAppend is the child of TestKillDuringAppends: it appends intent and
// result pairs, some with large excerpts, until it is killed.
func TestHelperProcessCrashAppend(t *testing.T) {
	path := os.Getenv(crashPathEnv)
	if path == "" {
		t.Skip("helper process for TestKillDuringAppends")
	}
	l, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	big := strings.Repeat("output line\n", 150) // a record of ~2 KiB: writes span pages
	for i := 0; ; i++ {
		seq, err := l.Intent(ctx, Record{Session: "crash", Tool: ToolExec, Command: fmt.Sprintf("cmd %d", i), Decision: DecisionAllowed})
		if err != nil {
			t.Fatal(err)
		}
		code := 0
		if err := l.Result(ctx, seq, Record{Session: "crash", Tool: ToolExec, ExitCode: &code, Excerpt: big[:i%len(big)]}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestKillDuringAppends kills writers with SIGKILL in the middle of their appends, several
// times over, and finds every record whole and verifiable under the key.
func TestKillDuringAppends(t *testing.T) {
	path, key := sealedLog(t, 1)
	for round := range 4 {
		before := len(lines(t, path))
		var children []*exec.Cmd
		var stderr []*bytes.Buffer
		for range 2 {
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestHelperProcessCrashAppend$", "-test.count=1")
			cmd.Env = append(os.Environ(), crashPathEnv+"="+path)
			var b bytes.Buffer
			cmd.Stderr, cmd.Stdout = &b, &b
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			children, stderr = append(children, cmd), append(stderr, &b)
		}
		// Let them write a while, polling the file, then kill them mid-stream.
		want := before + 60 + 37*round
		deadline := time.Now().Add(60 * time.Second)
		for len(lines(t, path)) < want {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: the writers did not reach %d lines", round, want)
			}
			time.Sleep(2 * time.Millisecond)
		}
		for _, c := range children {
			c.Process.Signal(syscall.SIGKILL)
		}
		for i, c := range children {
			err := c.Wait()
			if ws, ok := c.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
				t.Fatalf("round %d: writer ended with %v, not killed: %s", round, err, stderr[i])
			}
		}
		rep := verifyWith(t, path, key)
		if !rep.OK || !rep.Keyed {
			t.Fatalf("round %d: VerifyWith after kill -9 = %v", round, rep)
		}
		for _, w := range rep.Warnings {
			if w.Kind != KindDangling {
				t.Errorf("round %d: unexpected warning %v", round, w)
			}
		}
		t.Logf("round %d: %d records, %d intents without a result", round, rep.Records, len(rep.Warnings))
	}
	// The log goes on after the crashes.
	l, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	writeCalls(t, l, "after", 2)
	l.Close()
	if rep := verifyWith(t, path, key); !rep.OK || rep.SealedCount != int64(rep.Records) {
		t.Fatalf("VerifyWith after the crashes and more appends = %v", rep)
	}
}
