package gate_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/hermes-sandbox/hermes-sandbox/audit"
	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/gate"
	"github.com/hermes-sandbox/hermes-sandbox/policy"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// fakeSession is a session that only records what reaches it: the gate's state-aware checks
// are tested with commands that must never run anywhere. It reports a shell state and serves
// files from a map.
type fakeSession struct {
	mu       sync.Mutex
	cwd      string
	env      map[string]string
	files    map[string]string
	readErr  error // returned for every read when set
	stateErr error
	ran      []string
	written  []string
}

func (f *fakeSession) Name() string { return "fake" }
func (f *fakeSession) Close() error { return nil }

func (f *fakeSession) Exec(ctx context.Context, cmd sandbox.Command) (*sandbox.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ran = append(f.ran, cmd.Script)
	return &sandbox.Result{Cwd: f.cwd}, nil
}

func (f *fakeSession) ShellState(ctx context.Context) (string, map[string]string, error) {
	if f.stateErr != nil {
		return "", nil, f.stateErr
	}
	return f.cwd, f.env, nil
}

func (f *fakeSession) abs(p string) string {
	if !filepath.IsAbs(p) {
		p = filepath.Join(f.cwd, p)
	}
	return filepath.Clean(p)
}

func (f *fakeSession) ReadFile(ctx context.Context, p string, offset, limit int64) ([]byte, error) {
	if f.readErr != nil {
		return nil, f.readErr
	}
	s, ok := f.files[f.abs(p)]
	if !ok {
		return nil, fmt.Errorf("read %s: %w", p, sandbox.ErrNotFound)
	}
	return []byte(s), nil
}

func (f *fakeSession) WriteFile(ctx context.Context, p string, data []byte, mode uint32) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.written = append(f.written, p)
	return nil
}

func (f *fakeSession) ListDir(ctx context.Context, p string) ([]sandbox.FileInfo, error) {
	return nil, nil
}

type fakeBackend struct{ sess *fakeSession }

func (b fakeBackend) Name() string                       { return "fake" }
func (b fakeBackend) Capabilities() sandbox.Capabilities { return sandbox.Capabilities{Files: true} }
func (b fakeBackend) Close() error                       { return nil }
func (b fakeBackend) Open(context.Context, string) (sandbox.Session, error) {
	return b.sess, nil
}

const home = "/home/u"

// elfProgram is the start of a compiled program, as the policy sees one.
const elfProgram = "\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00"

func gated(f *fakeSession, mutate func(*gate.Options)) sandbox.Session {
	opts := gate.Options{Mode: config.ApprovalDeny, Tools: config.NewConfig().Tools,
		Classifier: policy.New(policy.Options{WorkDir: "/work", Home: home,
			ProtectedPaths: []string{home + "/.config/hermes-sandbox", home + "/.local/state/hermes-sandbox"}})}
	if mutate != nil {
		mutate(&opts)
	}
	s, _ := gate.Wrap(fakeBackend{f}, opts).Open(context.Background(), "fake")
	return s
}

// TestTwoStepBypassesAreRefusedBeforeTheBackend replays the reproductions of the gate's
// two-step bypasses: each is refused, and nothing reaches the session.
func TestTwoStepBypassesAreRefusedBeforeTheBackend(t *testing.T) {
	cfgDir, stateDir := home+"/.config/hermes-sandbox", home+"/.local/state/hermes-sandbox"
	noCode := func(o *gate.Options) { o.Tools.CodeExecution = false }
	tests := []struct {
		name    string
		cwd     string
		env     map[string]string
		files   map[string]string
		cmd     sandbox.Command
		write   string // write_file path instead of a command
		data    string
		mode    uint32
		mutate  func(*gate.Options)
		reason  string
		finding string
	}{
		{name: "config edit after cd", cwd: cfgDir, cmd: sandbox.Command{Script: `printf 'approvals:\n  mode: off\n' >> config.yaml`}, reason: "hardline", finding: "gate-config-write"},
		{name: "config edit with Dir", cwd: "/work", cmd: sandbox.Command{Script: `printf 'approvals:\n  mode: off\n' >> config.yaml`, Dir: cfgDir}, reason: "hardline", finding: "gate-config-write"},
		{name: "config edit with relative Dir", cwd: home, cmd: sandbox.Command{Script: `echo x >> config.yaml`, Dir: ".config/hermes-sandbox"}, reason: "hardline", finding: "gate-config-write"},
		{name: "write_file config after cd", cwd: cfgDir, write: "config.yaml", data: "approvals: {mode: off}\n", reason: "hardline", finding: "gate-config-write"},
		{name: "audit wipe after cd", cwd: stateDir, cmd: sandbox.Command{Script: ": > audit.log; rm -f audit.log.checkpoint"}, reason: "hardline", finding: "gate-config-write"},
		{name: "rm -rf * after cd /", cwd: "/", cmd: sandbox.Command{Script: "rm -rf *"}, reason: "hardline", finding: "recursive-delete-root"},
		{name: "rm -rf * with Dir /", cwd: "/work", cmd: sandbox.Command{Script: "rm -rf *", Dir: "/"}, reason: "hardline", finding: "recursive-delete-root"},
		{name: "rm in an unknown directory", cmd: sandbox.Command{Script: "rm -rf build"}, reason: "denied"},
		{name: "sh FILE", cwd: "/work", files: map[string]string{"/tmp/x.sh": "rm -rf ~/*"}, cmd: sandbox.Command{Script: "sh /tmp/x.sh"}, reason: "hardline", finding: "recursive-delete-home"},
		{name: "bash -c 'source FILE'", cwd: "/work", files: map[string]string{"/work/x.sh": "rm -rf ~/*"},
			cmd: sandbox.Command{Script: "bash -c 'source x.sh'"}, reason: "hardline", finding: "recursive-delete-home"},
		{name: "python3 FILE", cwd: "/work", files: map[string]string{"/work/a.py": "import shutil\nshutil.rmtree('/')\n"},
			cmd: sandbox.Command{Script: "python3 a.py"}, reason: "hardline", finding: "recursive-delete-root"},
		{name: "./FILE with a python shebang", cwd: "/work", files: map[string]string{"/work/run": "#!/usr/bin/env python3\nimport shutil\nshutil.rmtree('/')\n"},
			cmd: sandbox.Command{Script: "./run"}, reason: "hardline", finding: "recursive-delete-root"},
		{name: "xargs < FILE", cwd: "/work", files: map[string]string{"/work/list": "/\n"}, cmd: sandbox.Command{Script: "xargs rm -rf < list"}, reason: "hardline", finding: "recursive-delete-root"},
		{name: "export PATH", cwd: "/work", cmd: sandbox.Command{Script: "export PATH=/tmp/evil:$PATH"}, reason: "denied", finding: "session-env-change"},
		{name: "export BASH_ENV", cwd: "/work", cmd: sandbox.Command{Script: "export BASH_ENV=/tmp/x"}, reason: "denied", finding: "session-env-change"},
		{name: "PROMPT_COMMAND in Command.Env", cwd: "/work", cmd: sandbox.Command{Script: "true", Env: map[string]string{"PROMPT_COMMAND": "true"}}, reason: "denied", finding: "session-env-change"},
		{name: "edit ~/.bashrc", cwd: "/work", cmd: sandbox.Command{Script: "echo 'alias ls=rm' >> ~/.bashrc"}, reason: "denied"},
		{name: "program on a changed PATH", cwd: "/work", env: map[string]string{"PATH": "/tmp/evil:/usr/bin:/bin"},
			files: map[string]string{"/tmp/evil/ls": "#!/bin/sh\nrm -rf /\n"}, cmd: sandbox.Command{Script: "ls"}, reason: "hardline", finding: "recursive-delete-root"},
		{name: "BASH_ENV in the session", cwd: "/work", env: map[string]string{"BASH_ENV": "/tmp/x"},
			files: map[string]string{"/tmp/x": "rm -rf ~/*"}, cmd: sandbox.Command{Script: "echo hi"}, reason: "hardline", finding: "recursive-delete-home"},
		{name: "unreadable script", cwd: "/work", cmd: sandbox.Command{Script: "sh /tmp/x.sh"}, reason: "denied", finding: "unreadable-script"},
		{name: "write_file of a hardline script", cwd: "/work", write: "x.sh", data: "rm -rf ~/*\n", reason: "hardline", finding: "recursive-delete-home"},
		{name: "write_file executable mode", cwd: "/work", write: "tool", data: "#!/bin/sh\nrm -rf /\n", mode: 0o755, reason: "hardline", finding: "recursive-delete-root"},
		{name: "code_execution off: env python3", cwd: "/work", cmd: sandbox.Command{Script: "env python3 -c 'print(1)'"}, mutate: noCode, reason: "tool-disabled"},
		{name: "code_execution off: sh -c python3", cwd: "/work", cmd: sandbox.Command{Script: `sh -c "python3 -c 'print(1)'"`}, mutate: noCode, reason: "tool-disabled"},
		{name: "code_execution off: timeout ipython", cwd: "/work", cmd: sandbox.Command{Script: "timeout 5 ipython -c 'print(1)'"}, mutate: noCode, reason: "tool-disabled"},
		{name: "code_execution off: a compiled program by path (an interpreter copied in an earlier call)", cwd: "/work",
			files: map[string]string{"/work/p": elfProgram}, cmd: sandbox.Command{Script: "./p -c 'print(1)'"}, mutate: noCode, reason: "tool-disabled"},
		{name: "code_execution off: a compiled program in /tmp", cwd: "/work",
			files: map[string]string{"/tmp/build/app": elfProgram}, cmd: sandbox.Command{Script: "/tmp/build/app"}, mutate: noCode, reason: "tool-disabled"},
		{name: "file_write off: redirect", cwd: "/work", cmd: sandbox.Command{Script: "echo x > out.txt"}, mutate: func(o *gate.Options) { o.Tools.FileWrite = false }, reason: "tool-disabled"},
		{name: "file_write off: sudo tee", cwd: "/work",
			cmd: sandbox.Command{Script: "echo x | sudo -n tee out.txt"}, mutate: func(o *gate.Options) { o.Tools.FileWrite = false }, reason: "tool-disabled"},
		{name: "ipython one-liner", cwd: "/work", cmd: sandbox.Command{Script: `ipython -c 'import shutil; shutil.rmtree("/")'`}, reason: "hardline", finding: "recursive-delete-root"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeSession{cwd: tt.cwd, env: tt.env, files: tt.files}
			if tt.cwd == "" {
				f.stateErr = errors.New("no state")
			}
			if tt.name == "unreadable script" {
				f.readErr = fs.ErrPermission
			}
			s := gated(f, tt.mutate)
			if tt.env["PATH"] != "" {
				// The gate first sees the session with its usual PATH; an earlier command it did
				// not judge (or approved) then changed it.
				f.env = map[string]string{"PATH": "/usr/bin:/bin"}
				if _, err := s.Exec(context.Background(), sandbox.Command{Script: "true"}); err != nil {
					t.Fatal(err)
				}
				f.env, f.ran = tt.env, nil
			}
			var err error
			if tt.write != "" {
				err = s.(sandbox.FileSystem).WriteFile(context.Background(), tt.write, []byte(tt.data), tt.mode)
			} else {
				_, err = s.Exec(context.Background(), tt.cmd)
			}
			re := refusal(t, err, tt.reason)
			if tt.finding != "" && !slices.ContainsFunc(re.Findings, func(x policy.Finding) bool { return x.Rule == tt.finding }) {
				t.Errorf("findings %v; want %s", re.Findings, tt.finding)
			}
			if len(f.ran) > 0 || len(f.written) > 0 {
				t.Errorf("the backend was reached: ran %q, wrote %q", f.ran, f.written)
			}
			if tt.name == "unreadable script" && !strings.Contains(re.Error(), "/tmp/x.sh") {
				t.Errorf("refusal %q; want it to name the file it could not read", re)
			}
		})
	}
	// With code_execution off, a system program run by its path still runs.
	f := &fakeSession{cwd: "/work", files: map[string]string{"/usr/bin/true": elfProgram}}
	if _, err := gated(f, func(o *gate.Options) { o.Tools.CodeExecution = false }).Exec(context.Background(), sandbox.Command{Script: "/usr/bin/true"}); err != nil {
		t.Errorf("code_execution off: /usr/bin/true refused: %v", err)
	}
	// With file_write off, commands that write no file still run.
	for _, script := range []string{"ls -la 2>/dev/null", "cat a.txt | grep x > /dev/null"} {
		f := &fakeSession{cwd: "/work"}
		if _, err := gated(f, func(o *gate.Options) { o.Tools.FileWrite = false }).Exec(context.Background(), sandbox.Command{Script: script}); err != nil {
			t.Errorf("file_write off: %q refused: %v", script, err)
		}
	}
	// The same commands in a harmless state do run.
	for _, c := range []struct{ cwd, script string }{{"/work", "rm -rf *"}, {"/work", "sh x.sh"}, {"/work", "python3 a.py"}} {
		f := &fakeSession{cwd: c.cwd, files: map[string]string{"/work/x.sh": "echo hi", "/work/a.py": "print(1)"}}
		if _, err := gated(f, nil).Exec(context.Background(), sandbox.Command{Script: c.script}); err != nil || len(f.ran) != 1 {
			t.Errorf("%q in %s: %v (ran %q); want it to run", c.script, c.cwd, err, f.ran)
		}
	}
}

func TestAlwaysStoresEveryFinding(t *testing.T) {
	var saved []string
	f := &fakeSession{cwd: "/work"}
	s := gated(f, func(o *gate.Options) {
		o.Mode = config.ApprovalManual
		o.SaveAlways = func(d []string) error { saved = append(saved, d...); return nil }
	})
	cmd := sandbox.Command{Script: "git reset --hard; git clean -fdx"}
	if _, err := s.Exec(gate.WithApprover(context.Background(), &fakeApprover{decision: gate.ApproveAlways}), cmd); err != nil {
		t.Fatal(err)
	}
	if len(saved) != 2 {
		t.Fatalf("saved %q; want both findings' descriptions in one answer", saved)
	}
	// Both are covered now: no approver needed, for the command and its parts.
	for _, script := range []string{cmd.Script, "git clean -fdx", "git reset --hard && echo done"} {
		if _, err := s.Exec(context.Background(), sandbox.Command{Script: script}); err != nil {
			t.Errorf("%q after always: %v", script, err)
		}
	}
}

func TestUnparseableHasAStableKeyAndNoAllowlistHint(t *testing.T) {
	s := gated(&fakeSession{cwd: "/work"}, nil)
	_, err := s.Exec(context.Background(), sandbox.Command{Script: "if then fi ("})
	re := refusal(t, err, "denied")
	for _, f := range re.Findings {
		if f.Rule == "unparseable" && strings.Contains(f.Description, ":") {
			t.Errorf("unparseable description %q carries the parse error", f.Description)
		}
	}
	if strings.Contains(re.Hint, "command_allowlist") || !strings.Contains(strings.Join(re.Notes, " "), "parse error") {
		t.Errorf("hint %q notes %q; want no allowlist suggestion and the parse error as a note", re.Hint, re.Notes)
	}
}

func TestCorruptStoreFailsClosed(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "fake", "fake.json")
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := &fakeSession{cwd: "/work"}
	sink := &memSink{}
	s := gated(f, func(o *gate.Options) { o.Store, o.MaxToolCalls, o.Audit = gate.NewStore(dir), 5, sink })
	_, err := s.Exec(context.Background(), sandbox.Command{Script: "echo hi"})
	re := refusal(t, err, "store")
	if !strings.Contains(re.Error(), p) || len(f.ran) != 0 {
		t.Errorf("refusal %q (ran %q); want it to name %s and run nothing", re, f.ran, p)
	}
	if len(sink.recs) != 1 || sink.recs[0].Verdict != "safe" || sink.recs[0].Decision != audit.DecisionRefused {
		t.Errorf("audit = %+v; want one refused record with the verdict", sink.recs)
	}
}

func TestCallLimitKeepsTheVerdictAndAddsUpAcrossProcesses(t *testing.T) {
	dir := t.TempDir()
	sink := &memSink{}
	mk := func() sandbox.Session {
		return gated(&fakeSession{cwd: "/work"}, func(o *gate.Options) {
			o.Store, o.MaxToolCalls, o.Audit = gate.NewStore(dir), 4, sink
		})
	}
	a, b := mk(), mk() // two processes on one session
	var wg sync.WaitGroup
	for _, s := range []sandbox.Session{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 2 {
				if _, err := s.Exec(context.Background(), sandbox.Command{Script: "true"}); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	_, err := a.Exec(context.Background(), sandbox.Command{Script: "rm -rf /"})
	refusal(t, err, "call-limit")
	last := sink.recs[len(sink.recs)-1]
	if last.Verdict != "hardline" || last.Reason != "call-limit" {
		t.Errorf("record past the cap = %+v; want the hardline verdict kept", last)
	}
	matches, _ := filepath.Glob(filepath.Join(dir, "fake", "*.tmp"))
	if len(matches) > 0 {
		t.Errorf("temporary files left: %v", matches)
	}
}

type memSink struct {
	mu   sync.Mutex
	recs []audit.Record
}

func (m *memSink) Append(ctx context.Context, r audit.Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recs = append(m.recs, r)
	return nil
}

func (m *memSink) Intent(ctx context.Context, r audit.Record) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recs = append(m.recs, r)
	return int64(len(m.recs)), nil
}

func (m *memSink) Result(ctx context.Context, intent int64, r audit.Record) error {
	return m.Append(ctx, r)
}
