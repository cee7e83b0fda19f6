package audit

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// openLog opens a log in a fresh directory and closes it at cleanup.
func openLog(t testing.TB, opts Options) (*Log, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state", "audit.log")
	l, err := Open(path, opts)
	if err != nil {
		t.Fatalf("Open(%q) = %v", path, err)
	}
	t.Cleanup(func() { l.Close() })
	return l, path
}

func appendN(t testing.TB, l *Log, session string, n int) {
	t.Helper()
	for i := range n {
		code := i % 3
		r := Record{Session: session, Backend: "local", Tool: ToolExec, Command: fmt.Sprintf("cmd %d", i+1),
			Verdict: "safe", Decision: DecisionAllowed, Approver: "policy", ExitCode: &code}
		if err := l.Append(context.Background(), r); err != nil {
			t.Errorf("Append(%d) = %v", i, err) // not Fatal: may run in a goroutine
			return
		}
	}
}

// lines returns the file's lines without newlines.
func lines(t testing.TB, path string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Split(bytes.TrimSuffix(b, []byte{'\n'}), []byte{'\n'})
}

func mustVerify(t testing.TB, path string) Report {
	t.Helper()
	rep, err := Verify(path)
	if err != nil {
		t.Fatalf("Verify(%q) error = %v", path, err)
	}
	return rep
}

func TestAppendChainRoundTrip(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 600, time.FixedZone("CET", 3600))
	l, path := openLog(t, Options{Now: func() time.Time { return now }})
	ctx := t.Context()
	zero := 0
	in := []Record{
		{Session: "s1", Backend: "docker", Tool: ToolExec, Command: "ls -la /workspace", Verdict: "safe",
			Decision: DecisionAllowed, Approver: "policy", ExitCode: &zero, DurationMS: 1.25, StdoutBytes: 10, Excerpt: "a\nb"},
		{Session: "s1", Backend: "docker", Tool: ToolExec, Command: "rm -rf build", Verdict: "dangerous",
			Findings: []Finding{{Rule: "rm-recursive", Description: "recursive delete"}}, Decision: DecisionApprovedOnce, Approver: "user"},
		{Session: "s2", Backend: "ssh", Tool: ToolWriteFile, Command: "bad \xff utf8 <&> \u2028", Decision: DecisionDenied, Error: "boom"},
		{Session: "s2", Backend: "ssh", Tool: ToolJobStart, Command: "sleep 1", Time: now.Add(time.Hour), Decision: DecisionRefused, Reason: "tools off"},
	}
	in[0].SetDuration(1250 * time.Microsecond)
	for _, r := range in {
		if err := l.Append(ctx, r); err != nil {
			t.Fatalf("Append = %v", err)
		}
	}
	got, err := ReadAll(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(in) {
		t.Fatalf("ReadAll: %d records; want %d", len(got), len(in))
	}
	prev := GenesisHash
	raw := lines(t, path)
	for i, r := range got {
		if r.Seq != int64(i+1) {
			t.Errorf("record %d: seq = %d; want %d", i, r.Seq, i+1)
		}
		if r.PrevHash != prev {
			t.Errorf("record %d: prev_hash = %s; want %s", i, r.PrevHash, prev)
		}
		line, hash, err := encode(r)
		if err != nil || hash != r.Hash || !bytes.Equal(line, raw[i]) {
			t.Errorf("record %d: encode = %s, %v; want the stored line and hash %s", i, line, err, r.Hash)
		}
		if r.Time.Location() != time.UTC {
			t.Errorf("record %d: time %v is not UTC", i, r.Time)
		}
		prev = r.Hash
	}
	if !got[0].Time.Equal(now) || !got[3].Time.Equal(now.Add(time.Hour)) {
		t.Errorf("times = %v, %v; want %v and an hour later", got[0].Time, got[3].Time, now)
	}
	if got[0].DurationMS != 1.25 || *got[0].ExitCode != 0 || got[0].Excerpt != "a\nb" || got[1].Findings[0].Rule != "rm-recursive" {
		t.Errorf("fields lost in round trip: %+v %+v", got[0], got[1])
	}
	if want := "bad \uFFFD utf8 <&> \u2028"; got[2].Command != want {
		t.Errorf("command = %q; want %q", got[2].Command, want)
	}
	rep := mustVerify(t, path)
	if !rep.OK || rep.Records != 4 || rep.LastHash != prev {
		t.Errorf("Verify = %v; want ok with 4 records", rep)
	}
	cp, err := readCheckpoint(path + ".checkpoint")
	if err != nil || cp == nil || cp.Count != 4 || cp.LastHash != prev {
		t.Errorf("checkpoint = %+v, %v; want count 4, last hash %s", cp, err, prev)
	}
}

func TestOpenPermissions(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	path := filepath.Join(dir, "audit.log")
	l, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, l, "s", 1)
	l.Close()
	for p, want := range map[string]os.FileMode{dir: 0o700, path: 0o600, path + ".lock": 0o600, path + ".checkpoint": 0o600} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("mode of %s = %v; want %v", p, got, want)
		}
	}
	// An existing log others can read is tightened.
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	l, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode after reopen = %v; want 0600", fi.Mode().Perm())
	}
}

func TestLevels(t *testing.T) {
	ctx := t.Context()
	long := strings.Repeat("é", 3000) // 6000 bytes of two-byte runes
	t.Run("full", func(t *testing.T) {
		l, path := openLog(t, Options{Level: LevelFull})
		if err := l.Append(ctx, Record{Command: "cat big", Excerpt: long}); err != nil {
			t.Fatal(err)
		}
		rs, _ := ReadAll(path)
		ex := rs[0].Excerpt
		if len(ex) > MaxExcerpt || !strings.Contains(ex, "[excerpt truncated]") || !utf8.ValidString(ex) {
			t.Errorf("excerpt: %d bytes, valid UTF-8 %v; want ≤ %d bytes with a marker", len(ex), utf8.ValidString(ex), MaxExcerpt)
		}
	})
	t.Run("commands", func(t *testing.T) {
		l, path := openLog(t, Options{Level: LevelCommands})
		if err := l.Append(ctx, Record{Command: "cat big", Excerpt: long}); err != nil {
			t.Fatal(err)
		}
		rs, _ := ReadAll(path)
		if len(rs) != 1 || rs[0].Command != "cat big" || rs[0].Excerpt != "" {
			t.Errorf("records = %+v; want the command without an excerpt", rs)
		}
	})
	t.Run("off", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "sub", "audit.log")
		l, err := Open(path, Options{Level: LevelOff})
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Append(ctx, Record{Command: "ls"}); err != nil {
			t.Errorf("Append with level off = %v; want nil", err)
		}
		l.Close()
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("level off created %v; want nothing", entries)
		}
	})
	t.Run("unknown", func(t *testing.T) {
		if _, err := Open(filepath.Join(t.TempDir(), "a.log"), Options{Level: "verbose"}); err == nil {
			t.Error("Open with level verbose succeeded; want an error")
		}
		var lv Level
		if err := lv.UnmarshalText([]byte("loud")); err == nil {
			t.Error(`UnmarshalText("loud") succeeded; want an error`)
		}
	})
}

func TestAppendRedacts(t *testing.T) {
	const secret = "hunter2hunter2"
	l, path := openLog(t, Options{Redact: NewRedactor([]string{secret})})
	r := Record{
		Command: "mysql -p" + secret + " -e 'select 1'",
		Excerpt: "token ghp_abcdefghijklmnopqrstuvwxyz0123456789 " + secret,
		Error:   "auth failed for " + secret,
		Reason:  "user typed " + secret,
	}
	if err := l.Append(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if bytes.Contains(b, []byte(secret)) || bytes.Contains(b, []byte("ghp_abc")) {
		t.Errorf("log holds a secret: %s", b)
	}
	if n := bytes.Count(b, []byte(Redacted)); n != 5 {
		t.Errorf("log has %d redactions; want 5: %s", n, b)
	}
}

func TestCloseAndAppendAfterClose(t *testing.T) {
	l, _ := openLog(t, Options{})
	appendN(t, l, "s", 1)
	if err := l.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	if err := l.Close(); err != nil {
		t.Errorf("second Close = %v; want nil", err)
	}
	if err := l.Append(t.Context(), Record{}); !errors.Is(err, sandbox.ErrClosed) {
		t.Errorf("Append after Close = %v; want ErrClosed", err)
	}
}

// checkOrdered verifies the log and that each session's commands appear in
// the order they were appended.
func checkOrdered(t *testing.T, path string, sessions []string, perSession int) {
	t.Helper()
	rep := mustVerify(t, path)
	if !rep.OK || rep.Records != len(sessions)*perSession {
		t.Fatalf("Verify = %v; want ok with %d records", rep, len(sessions)*perSession)
	}
	rs, err := ReadAll(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sessions {
		got := FilterSession(rs, s)
		if len(got) != perSession {
			t.Fatalf("session %s: %d records; want %d", s, len(got), perSession)
		}
		for i, r := range got {
			if want := fmt.Sprintf("cmd %d", i+1); r.Command != want {
				t.Fatalf("session %s record %d: command %q; want %q", s, i, r.Command, want)
			}
		}
	}
}

func TestConcurrentAppend(t *testing.T) {
	l, path := openLog(t, Options{})
	var sessions []string
	var wg sync.WaitGroup
	for g := range 8 {
		s := "g" + strconv.Itoa(g)
		sessions = append(sessions, s)
		wg.Go(func() { appendN(t, l, s, 200) })
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	checkOrdered(t, path, sessions, 200)
}

// TestTwoLogsOneFile: two Logs in one process share the file through flock.
func TestTwoLogsOneFile(t *testing.T) {
	a, path := openLog(t, Options{})
	b, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	var wg sync.WaitGroup
	for i, l := range []*Log{a, b, a, b} {
		wg.Go(func() { appendN(t, l, "l"+strconv.Itoa(i), 50) })
	}
	wg.Wait()
	checkOrdered(t, path, []string{"l0", "l1", "l2", "l3"}, 50)
}

const (
	helperPathEnv    = "HERMES_AUDIT_TEST_HELPER_PATH"
	helperSessionEnv = "HERMES_AUDIT_TEST_HELPER_SESSION"
	perProcess       = 150
)

// TestHelperProcessAppend is the child of TestMultiProcessAppend: it opens
// the log, says "ready", waits for its stdin to close, then appends.
func TestHelperProcessAppend(t *testing.T) {
	path := os.Getenv(helperPathEnv)
	if path == "" {
		t.Skip("helper process for TestMultiProcessAppend")
	}
	l, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin)
	appendN(t, l, os.Getenv(helperSessionEnv), perProcess)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestMultiProcessAppend(t *testing.T) {
	l, path := openLog(t, Options{})
	sessions := []string{"parent", "child1", "child2"}
	type child struct {
		cmd    *exec.Cmd
		stdin  io.Closer
		out    bytes.Buffer // stdout after "ready"
		errOut bytes.Buffer
		copied chan struct{}
	}
	var children []*child
	for _, s := range sessions[1:] {
		c := &child{copied: make(chan struct{})}
		c.cmd = exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestHelperProcessAppend$", "-test.count=1")
		c.cmd.Env = append(os.Environ(), helperPathEnv+"="+path, helperSessionEnv+"="+s)
		c.cmd.Stderr = &c.errOut
		stdin, err := c.cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := c.cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := c.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		c.stdin = stdin
		br := bufio.NewReader(stdout)
		if line, err := br.ReadString('\n'); line != "ready\n" {
			t.Fatalf("helper %s said %q, %v; want ready", s, line, err)
		}
		go func() { io.Copy(&c.out, br); close(c.copied) }()
		children = append(children, c)
	}
	// Start everyone at once so that the appends really contend.
	for _, c := range children {
		c.stdin.Close()
	}
	appendN(t, l, "parent", perProcess)
	for _, c := range children {
		<-c.copied
		if err := c.cmd.Wait(); err != nil {
			t.Fatalf("helper process: %v\n%s%s", err, c.out.String(), c.errOut.String())
		}
	}
	checkOrdered(t, path, sessions, perProcess)
	rs, _ := ReadAll(path)
	switches := 0
	for i := 1; i < len(rs); i++ {
		if rs[i].Session != rs[i-1].Session {
			switches++
		}
	}
	t.Logf("the writer changed %d times in %d records", switches, len(rs))
}

func TestTornTailRecovery(t *testing.T) {
	l, path := openLog(t, Options{})
	appendN(t, l, "s", 3)
	l.Close()
	// A crash in the middle of writing record 4.
	half := []byte(`{"seq":4,"time":"2025-01-02T03:04:05Z","session":"s","backend":"lo`)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(half)
	f.Close()

	l, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	appendN(t, l, "s", 2)

	ls := lines(t, path)
	if len(ls) != 6 || !bytes.Equal(ls[3], half) {
		t.Fatalf("log has %d lines, line 4 = %q; want 6 lines with the torn line kept alone", len(ls), ls[3])
	}
	rs, _ := ReadAll(path)
	if len(rs) != 5 || rs[3].Seq != 4 || rs[3].PrevHash != rs[2].Hash {
		t.Fatalf("records after recovery = %+v; want seq 4 chained to seq 3", rs)
	}
	rep := mustVerify(t, path)
	if rep.OK || rep.ProblemCount != 1 || rep.Records != 5 {
		t.Fatalf("Verify = %v (%v); want exactly one problem", rep, rep.Problems)
	}
	if p := rep.First(); p.Line != 4 || p.Kind != KindTorn || !strings.Contains(p.Detail, "torn line") {
		t.Errorf("first problem = %v; want a torn line at line 4", p)
	}
}

func TestTruncateThenAppend(t *testing.T) {
	l, path := openLog(t, Options{})
	appendN(t, l, "s", 5)
	ls := lines(t, path)
	if err := os.WriteFile(path, append(bytes.Join(ls[:3], []byte{'\n'}), '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	appendN(t, l, "s", 1)
	rs, _ := ReadAll(path)
	if len(rs) != 5 || rs[3].Tool != ToolAudit || rs[3].Decision != DecisionLogTruncated {
		t.Fatalf("records = %+v; want a log_truncated marker as seq 4", rs)
	}
	rep := mustVerify(t, path)
	if rep.OK || rep.ProblemCount != 1 {
		t.Fatalf("Verify = %v (%v); want one problem", rep, rep.Problems)
	}
	if p := rep.First(); p.Line != 4 || p.Kind != KindTruncated || !strings.Contains(p.Detail, "checkpoint says 5 records, found 3") {
		t.Errorf("first problem = %v; want the truncation at line 4", p)
	}
}

func TestRotatedLogStartsNewChain(t *testing.T) {
	l, path := openLog(t, Options{})
	appendN(t, l, "s", 3)
	for _, p := range []string{path, path + ".checkpoint"} {
		if err := os.Rename(p, p+".1"); err != nil {
			t.Fatal(err)
		}
	}
	appendN(t, l, "s", 2)
	if rep := mustVerify(t, path); !rep.OK || rep.Records != 2 {
		t.Errorf("Verify(new) = %v; want ok with 2 records", rep)
	}
	if rep := mustVerify(t, path+".1"); !rep.OK || rep.Records != 3 {
		t.Errorf("Verify(rotated) = %v; want ok with 3 records", rep)
	}
}

func BenchmarkAppend(b *testing.B) {
	r := Record{Session: "bench", Backend: "local", Tool: ToolExec, Command: "echo hello world",
		Verdict: "safe", Decision: DecisionAllowed, Approver: "policy", DurationMS: 1.5, Excerpt: "hello world\n"}
	b.Run("serial", func(b *testing.B) {
		l, _ := openLog(b, Options{})
		for b.Loop() {
			if err := l.Append(context.Background(), r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		l, _ := openLog(b, Options{})
		b.SetParallelism(8)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := l.Append(context.Background(), r); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}
