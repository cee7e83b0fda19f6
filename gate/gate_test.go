package gate_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/hermes-sandbox/hermes-sandbox/audit"
	"github.com/hermes-sandbox/hermes-sandbox/backends/local"
	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/gate"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// fakeApprover answers with a fixed decision and remembers what it was asked.
type fakeApprover struct {
	mu       sync.Mutex
	decision gate.Decision
	asked    []gate.Request
}

func (f *fakeApprover) Approve(ctx context.Context, req gate.Request) (gate.Decision, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, req)
	return f.decision, nil
}

// blockingApprover never answers: silence must deny when the timeout runs out.
type blockingApprover struct{}

func (blockingApprover) Approve(ctx context.Context, req gate.Request) (gate.Decision, error) {
	<-ctx.Done()
	return gate.Deny, ctx.Err()
}

type env struct {
	b     sandbox.Backend
	log   *audit.Log
	path  string
	saved []string
	inner sandbox.Backend // the backend behind the gate
	opts  gate.Options    // the gate's options
}

func newEnv(t *testing.T, mutate func(*gate.Options)) *env {
	t.Helper()
	dir := t.TempDir()
	cfg := config.NewConfig()
	// Sessions start in a scratch directory: some tests run git commands that must never
	// touch the repository the tests run from.
	cfg.Terminal.Cwd = dir
	lb, err := local.New(cfg.BackendOptions(sandbox.FactoryOptions{StateDir: filepath.Join(dir, "state"),
		Environ: []string{"PATH=/usr/bin:/bin", "HOME=" + dir}}))
	if err != nil {
		t.Fatal(err)
	}
	e := &env{path: filepath.Join(dir, "audit.log")}
	e.log, err = audit.Open(e.path, audit.Options{Level: audit.LevelFull})
	if err != nil {
		t.Fatal(err)
	}
	opts := gate.Options{Mode: config.ApprovalManual, Tools: cfg.Tools, Audit: e.log,
		SaveAlways: func(d []string) error { e.saved = append(e.saved, d...); return nil }}
	if mutate != nil {
		mutate(&opts)
	}
	e.b = gate.Wrap(lb, opts)
	e.inner, e.opts = lb, opts
	t.Cleanup(func() { e.b.Close(); e.log.Close() })
	return e
}

func (e *env) session(t *testing.T) sandbox.Session {
	s, err := e.b.Open(context.Background(), "s1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func (e *env) records(t *testing.T) []audit.Record {
	t.Helper()
	rs, err := audit.ReadAll(e.path)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func refusal(t *testing.T, err error, reason string) *gate.RefusedError {
	t.Helper()
	var re *gate.RefusedError
	if !errors.As(err, &re) || !errors.Is(err, sandbox.ErrDenied) {
		t.Fatalf("error = %v; want a *gate.RefusedError", err)
	}
	if re.Reason != reason {
		t.Fatalf("refusal reason = %q; want %q (%v)", re.Reason, reason, re)
	}
	return re
}

func TestHardlineRefusedInEveryMode(t *testing.T) {
	for _, mode := range []config.ApprovalMode{config.ApprovalManual, config.ApprovalDeny, config.ApprovalOff} {
		t.Run(string(mode), func(t *testing.T) {
			ap := &fakeApprover{decision: gate.ApproveAlways}
			e := newEnv(t, func(o *gate.Options) { o.Mode = mode })
			s := e.session(t)
			_, err := s.Exec(gate.WithApprover(context.Background(), ap), sandbox.Command{Script: "rm -rf /"})
			re := refusal(t, err, "hardline")
			if len(re.Findings) == 0 || re.ExitCode() != 126 {
				t.Errorf("refusal = %+v; want findings and exit code 126", re)
			}
			if len(ap.asked) != 0 {
				t.Errorf("a hardline command was put to the approver")
			}
			rs := e.records(t)
			if len(rs) != 1 || rs[0].Verdict != "hardline" || rs[0].Decision != audit.DecisionRefused {
				t.Errorf("audit = %+v; want one refused hardline record", rs)
			}
		})
	}
}

const dangerous = "git push --force origin main"

func TestDangerousByMode(t *testing.T) {
	t.Run("deny", func(t *testing.T) {
		e := newEnv(t, func(o *gate.Options) { o.Mode = config.ApprovalDeny })
		_, err := e.session(t).Exec(context.Background(), sandbox.Command{Script: dangerous})
		re := refusal(t, err, "denied")
		if !strings.Contains(re.Error(), "command_allowlist") {
			t.Errorf("refusal %q does not say how to allow it", re.Error())
		}
	})
	t.Run("off", func(t *testing.T) {
		e := newEnv(t, func(o *gate.Options) { o.Mode = config.ApprovalOff })
		res, err := e.session(t).Exec(context.Background(), sandbox.Command{Script: "echo ran; # " + dangerous})
		if err != nil || res.Stdout != "ran\n" {
			t.Fatalf("mode off: %v, %v", res, err)
		}
	})
	t.Run("manual without approver", func(t *testing.T) {
		e := newEnv(t, nil)
		_, err := e.session(t).Exec(context.Background(), sandbox.Command{Script: dangerous})
		refusal(t, err, "no-approver")
		if rs := e.records(t); len(rs) != 1 || rs[0].Decision != audit.DecisionDenied || rs[0].Verdict != "dangerous" {
			t.Errorf("audit = %+v", rs)
		}
	})
	t.Run("manual silence times out", func(t *testing.T) {
		e := newEnv(t, func(o *gate.Options) { o.Timeout = 50_000_000 })
		_, err := e.session(t).Exec(gate.WithApprover(context.Background(), blockingApprover{}), sandbox.Command{Script: dangerous})
		refusal(t, err, "timeout")
	})
}

// A dangerous command that is harmless to actually run here: the findings are what matter.
const dangerousButHarmless = "git reset --hard 2>/dev/null; echo done"

func TestApprovalDecisions(t *testing.T) {
	ctx := context.Background()
	t.Run("deny", func(t *testing.T) {
		e := newEnv(t, nil)
		ap := &fakeApprover{decision: gate.Deny}
		_, err := e.session(t).Exec(gate.WithApprover(ctx, ap), sandbox.Command{Script: dangerousButHarmless})
		refusal(t, err, "denied")
		if len(ap.asked) != 1 || ap.asked[0].Command != dangerousButHarmless || len(ap.asked[0].Findings) == 0 {
			t.Errorf("approver was asked %+v", ap.asked)
		}
	})
	t.Run("once asks every time", func(t *testing.T) {
		e := newEnv(t, nil)
		ap := &fakeApprover{decision: gate.ApproveOnce}
		s := e.session(t)
		for i := 0; i < 2; i++ {
			res, err := s.Exec(gate.WithApprover(ctx, ap), sandbox.Command{Script: dangerousButHarmless})
			if err != nil || !strings.Contains(res.Stdout, "done") {
				t.Fatalf("approved once: %v, %v", res, err)
			}
		}
		if len(ap.asked) != 2 {
			t.Errorf("asked %d times; want 2", len(ap.asked))
		}
		rs := e.records(t)
		if rs[0].Decision != audit.DecisionApprovedOnce || rs[0].Approver != "user" {
			t.Errorf("audit = %+v", rs[0])
		}
	})
	t.Run("session asks once", func(t *testing.T) {
		e := newEnv(t, nil)
		ap := &fakeApprover{decision: gate.ApproveSession}
		s := e.session(t)
		for i := 0; i < 3; i++ {
			if _, err := s.Exec(gate.WithApprover(ctx, ap), sandbox.Command{Script: "git reset --hard 2>/dev/null"}); err != nil {
				t.Fatal(err)
			}
		}
		if len(ap.asked) != 1 {
			t.Errorf("asked %d times; want 1", len(ap.asked))
		}
	})
	t.Run("always persists and covers compound commands with no new finding", func(t *testing.T) {
		e := newEnv(t, nil)
		ap := &fakeApprover{decision: gate.ApproveAlways}
		s := e.session(t)
		if _, err := s.Exec(gate.WithApprover(ctx, ap), sandbox.Command{Script: "git reset --hard 2>/dev/null"}); err != nil {
			t.Fatal(err)
		}
		if len(e.saved) == 0 {
			t.Fatalf("always did not save the finding's description")
		}
		// The same finding alone: allowlisted, no question, even without an approver.
		if _, err := s.Exec(ctx, sandbox.Command{Script: "git reset --hard 2>/dev/null"}); err != nil {
			t.Errorf("allowlisted command refused: %v", err)
		}
		// A compound command whose findings are all covered is covered too.
		if _, err := s.Exec(ctx, sandbox.Command{Script: "git reset --hard 2>/dev/null; echo more"}); err != nil {
			t.Errorf("compound command with only allowlisted findings refused: %v", err)
		}
		// One with a finding nobody allowed still asks, and the hint names only that one.
		_, err := s.Exec(ctx, sandbox.Command{Script: "git reset --hard 2>/dev/null; git clean -fdx"})
		re := refusal(t, err, "no-approver")
		if re != nil && (strings.Contains(re.Hint, "git reset") || !strings.Contains(re.Hint, "git clean")) {
			t.Errorf("hint = %q; want only the uncovered git clean finding", re.Hint)
		}
	})
}

func TestToolSwitches(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, func(o *gate.Options) {
		o.Tools.FileWrite = false
		o.Tools.CodeExecution = false
	})
	s := e.session(t)
	fs := s.(sandbox.FileSystem)
	err := fs.WriteFile(ctx, "x.txt", []byte("x"), 0o644)
	re := refusal(t, err, "tool-disabled")
	if !strings.Contains(re.Error(), "tools.file_write") {
		t.Errorf("refusal %q does not name the switch", re.Error())
	}
	if _, err := s.Exec(ctx, sandbox.Command{Script: "python3 -c 'print(1)'"}); err == nil {
		t.Errorf("code execution ran with tools.code_execution off")
	}
	if res, err := s.Exec(ctx, sandbox.Command{Script: "echo shell"}); err != nil || res.Stdout != "shell\n" {
		t.Errorf("shell command refused: %v %v", res, err)
	}
	e2 := newEnv(t, func(o *gate.Options) { o.Tools.ShellExecute = false })
	_, err = e2.session(t).Exec(ctx, sandbox.Command{Script: "echo hi"})
	refusal(t, err, "tool-disabled")
}

func TestCallLimit(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, func(o *gate.Options) { o.MaxToolCalls = 3 })
	s := e.session(t)
	if got := s.(gate.Budget).RemainingCalls(); got != 3 {
		t.Errorf("RemainingCalls() = %d; want 3", got)
	}
	for i := 0; i < 3; i++ {
		if _, err := s.Exec(ctx, sandbox.Command{Script: "true"}); err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
	}
	_, err := s.Exec(ctx, sandbox.Command{Script: "true"})
	re := refusal(t, err, "call-limit")
	if !strings.Contains(re.Error(), "max_tool_calls") {
		t.Errorf("refusal %q does not explain the cap", re.Error())
	}
	rs := e.records(t)
	if len(rs) != 7 || rs[6].Decision != audit.DecisionRefused || rs[6].Reason != "call-limit" || audit.NeedsResult(rs[6]) {
		t.Errorf("audit = %+v; want 3 intent+result pairs + 1 refused", rs)
	}
}

func TestStorePersistsAcrossOpens(t *testing.T) {
	ctx := context.Background()
	store := gate.NewStore(t.TempDir())
	e := newEnv(t, func(o *gate.Options) { o.MaxToolCalls = 2; o.Store = store })
	s := e.session(t)
	s.Exec(ctx, sandbox.Command{Script: "true"})
	s.Exec(ctx, sandbox.Command{Script: "true"})
	s.Close()
	s2, err := e.b.Open(ctx, "s1") // a later CLI run of the same session
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	_, err = s2.Exec(ctx, sandbox.Command{Script: "true"})
	refusal(t, err, "call-limit")
}

func TestAuditRecordsAndVerifies(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, nil)
	s := e.session(t)
	res, err := s.Exec(ctx, sandbox.Command{Script: "echo out; echo err >&2; exit 3"})
	if err != nil || res.ExitCode != 3 {
		t.Fatal(res, err)
	}
	fs := s.(sandbox.FileSystem)
	if err := fs.WriteFile(ctx, "f.txt", []byte("data"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.ReadFile(ctx, "f.txt", 0, 0); err != nil {
		t.Fatal(err)
	}
	e.log.Close()
	rs := e.records(t)
	if len(rs) != 6 {
		t.Fatalf("got %d records; want 3 intent+result pairs", len(rs))
	}
	in, r := rs[0], rs[1]
	if in.Type != audit.TypeIntent || in.Tool != audit.ToolExec || in.ExitCode != nil || !strings.Contains(in.Command, "exit 3") ||
		in.Decision != audit.DecisionAllowed || in.Session != "s1" || in.Backend != "local" {
		t.Errorf("exec intent = %+v", in)
	}
	if r.Type != audit.TypeResult || r.Intent != in.Seq || r.ExitCode == nil || *r.ExitCode != 3 || r.StdoutBytes != 4 ||
		r.StderrBytes != 4 || r.Session != "s1" || !strings.Contains(r.Excerpt, "out") {
		t.Errorf("exec result = %+v", r)
	}
	if rs[2].Tool != audit.ToolWriteFile || rs[3].Intent != rs[2].Seq || rs[4].Tool != audit.ToolReadFile || rs[5].Intent != rs[4].Seq {
		t.Errorf("file records = %+v", rs[2:])
	}
	rep, err := audit.Verify(e.path)
	if err != nil || !rep.OK {
		t.Errorf("Verify = %v, %v", rep, err)
	}
}

func TestFileWriteToProtectedPathIsHardline(t *testing.T) {
	e := newEnv(t, func(o *gate.Options) { o.Mode = config.ApprovalOff })
	fs := e.session(t).(sandbox.FileSystem)
	err := fs.WriteFile(context.Background(), "/root/.config/hermes-sandbox/config.yaml", []byte("approvals: {mode: off}"), 0o600)
	refusal(t, err, "hardline")
}

func TestSecretsRedactedFromOutput(t *testing.T) {
	secret := "s3cr3t-token-value"
	e := newEnv(t, func(o *gate.Options) { o.RedactOutput = audit.NewExactRedactor([]string{secret}) })
	res, err := e.session(t).Exec(context.Background(), sandbox.Command{Script: "echo " + secret + "; echo " + secret + " >&2"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(res.Stdout+res.Stderr, secret) || !strings.Contains(res.Stdout, "***") {
		t.Errorf("output = %q / %q; want the secret replaced by ***", res.Stdout, res.Stderr)
	}
}
