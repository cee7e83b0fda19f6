// Package sandboxtest is the conformance suite every backend passes. A backend's test file is
// mostly one call to Run. The suite uses only POSIX shell and tools that busybox has, so it
// runs unchanged in a minimal container image, on a remote host and in a cloud sandbox.
//
// Run runs every check on the backend as it is ("Direct"), and the checks that exercise the
// gate's wrapper again with the backend wrapped in the gate ("Gated", approvals off so that
// only hardline commands are refused), as every real command path of the CLI and the MCP
// server uses it.
package sandboxtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/gate"
	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// Options describe the backend under test.
type Options struct {
	// NewBackend returns a backend for the test. It is called more than once when the suite
	// checks that state survives a new process; each call should behave like a fresh process.
	// The suite closes what it gets.
	NewBackend func(t testing.TB) sandbox.Backend
	// Scratch is a writable directory inside the sandbox for test files ("/tmp" by default).
	Scratch string
	// Slow multiplies the suite's deadlines for backends with network-bound latency.
	Slow time.Duration
	// StateSavedWhole, if not empty, says why concurrent commands of one session may
	// overwrite each other's cd and export (a per-command shell fallback saves the state
	// whole); the case that checks they do not is then skipped with this reason.
	StateSavedWhole string
	// CallerGoneSurvives, if not empty, says why a foreground command outlives the process
	// that started it on this backend; the case that checks it does not is then skipped with
	// this reason (a known gap, listed in the run's summary).
	CallerGoneSurvives string
	// CallerGoneAfter is how long the sandbox may take to notice that a caller went: where
	// the stream to the helper outlives its client (a provider's PTY session), the helper's
	// heartbeat timeout (agent.BeatTimeout). 0: at once, when the stream ends.
	CallerGoneAfter time.Duration
	// Parallel runs the checks in parallel (t.Parallel), the Direct and Gated passes too. Every
	// check opens sessions of its own, with names, scratch paths and process markers of its
	// own; a backend sets it when its sessions are independent of each other (go test's
	// -parallel, GOMAXPROCS by default, bounds how many run at once).
	Parallel bool
	// InstallDir, for backends that branch, is a directory on the sandbox's PATH that
	// commands may write, where a package manager would put a program: the Branching checks
	// install one there and expect forks to run it. Empty skips that assertion.
	InstallDir string
	// BranchDir, for backends that branch, is where the Branching checks write the files a
	// fork must carry (a backend may carry only its workspace); empty means the session's
	// starting directory.
	BranchDir string
	// BranchOwnDir, if not empty, says why a session made by Fork or Restore works in a
	// directory of its own (a copy of the source's tree elsewhere: local), not at the source's
	// path: the Branching checks then accept, for the source's directory, a different one of
	// the same name.
	BranchOwnDir string
	// ForkStopsSource, if not empty, says why taking a snapshot or fork ends the source's
	// running processes (the service stops the VM to snapshot it: vercel); the check that a
	// busy source keeps running through a fork is then skipped with this reason.
	ForkStopsSource string
	// SharedProcesses, if not empty, says why sessions see the host's processes (no PID
	// namespace: local on macOS): a fork then sees the source's, so the check that a fork
	// carries no running process is skipped with this reason; the rest of the check runs.
	SharedProcesses string
}

type suite struct {
	opts  Options
	b     sandbox.Backend
	gated bool
}

// GatedEnv is the environment variable that, set to "all", runs the whole suite behind the
// gate too, not only the checks that exercise the gate's wrapper (gatedChecks).
const GatedEnv = "HERMES_SANDBOX_TEST_GATED"

// Run runs the whole conformance suite on the backend ("Direct"), then, on the backend behind
// the gate ("Gated"), the checks that go through the gate's own code: its Exec, job, file,
// terminal and session wrappers, streaming, cancel, timeout, a caller that goes, and state
// kept across calls and processes. The other checks would run the same backend code a second
// time; HERMES_SANDBOX_TEST_GATED=all runs them gated as well.
func Run(t *testing.T, opts Options) {
	if opts.Scratch == "" {
		opts.Scratch = "/tmp"
	}
	if opts.Slow == 0 {
		opts.Slow = 1
	}
	all := false
	switch v := os.Getenv(GatedEnv); v {
	case "":
	case "all":
		all = true
	default:
		t.Fatalf("%s=%q; want all or unset", GatedEnv, v)
	}
	t.Run("Direct", func(t *testing.T) {
		if opts.Parallel {
			t.Parallel()
		}
		run(t, opts, false, checks)
	})
	gated := opts
	gated.NewBackend = func(t testing.TB) sandbox.Backend {
		return gate.Wrap(opts.NewBackend(t), gate.Options{Mode: config.ApprovalOff, Tools: config.NewConfig().Tools})
	}
	t.Run("Gated", func(t *testing.T) {
		if opts.Parallel {
			t.Parallel()
		}
		run(t, gated, true, selectGated(all))
	})
}

// check is one conformance check.
type check struct {
	name string
	fn   func(*suite, *testing.T)
}

// checks is the whole suite, in the order it runs.
var checks = []check{
	{"ExecBasics", (*suite).testExecBasics},
	{"CommandNotFound", (*suite).testNotFound},
	{"ArgvFidelity", (*suite).testArgv},
	{"EnvFidelity", (*suite).testEnvFidelity},
	{"BinaryOutput", (*suite).testBinary},
	{"Stdin", (*suite).testStdin},
	{"StatePersists", (*suite).testState},
	{"StateSurvivesScriptExitTrap", (*suite).testExitTrap},
	{"ConcurrentExportsKept", (*suite).testConcurrentExports},
	{"ConcurrentFirstUse", (*suite).testConcurrentFirstUse},
	{"CallerGoneKillsCommand", (*suite).testCallerGone},
	{"StateSaveFailureReported", (*suite).testStateSaveFailure},
	{"Dir", (*suite).testDir},
	{"Timeout", (*suite).testTimeout},
	{"Cancel", (*suite).testCancel},
	{"Streaming", (*suite).testStreaming},
	{"OutputBounded", (*suite).testOutputBounded},
	{"DaemonHoldingPipe", (*suite).testDaemon},
	{"LargeScript", (*suite).testLargeScript},
	{"Lifecycle", (*suite).testLifecycle},
	{"Concurrency", (*suite).testConcurrency},
	{"SessionIsolation", (*suite).testIsolation},
	{"Persistence", (*suite).testPersistence},
	{"Files", (*suite).testFiles},
	{"Jobs", (*suite).testJobs},
	{"JobLimit", (*suite).testJobLimit},
	{"JobTimeout", (*suite).testJobTimeout},
	{"SessionManager", (*suite).testSessionManager},
	{"CapabilityHonesty", (*suite).testCapabilities},
	{"Terminal", (*suite).testTerminal},
	{"Network", (*suite).testNetwork},
	{"Branching", (*suite).testBranching}, // branching.go
	// It wraps the backend in a gate of its own, on the very session it prepares: direct only.
	{"GateWithState", (*suite).testGateWithState},
}

// gatedChecks are the checks the Gated pass runs by default: each goes through code of the
// gate's own (gate/ops.go, gate/shell.go, gate/gate.go), or through the backend in a way the
// gate can break (a stream it must pass on as it comes, a context it must not detach, state
// it must not lose, a large or hostile command text it must parse without refusing).
var gatedChecks = map[string]bool{
	"ExecBasics":             true, // Exec's result and the empty command's error pass through
	"ArgvFidelity":           true, // argv is quoted for the classifier, and must reach the sandbox unchanged
	"EnvFidelity":            true, // Command.Env is classified, and must reach the sandbox unchanged
	"Stdin":                  true,
	"StatePersists":          true,
	"CallerGoneKillsCommand": true,
	"Dir":                    true, // Command.Dir is where the gate classifies
	"Timeout":                true,
	"Cancel":                 true,
	"Streaming":              true,
	"LargeScript":            true, // the classifier parses 320 KB of script
	"Lifecycle":              true, // the gated session's Close
	"Concurrency":            true, // the gated session's own state under -race
	"Persistence":            true,
	"Files":                  true, // ReadFile, WriteFile, ListDir and ResolvePath are wrapped
	"Jobs":                   true, // StartJob and the job calls are wrapped
	"SessionManager":         true, // Sessions and Remove are wrapped
	"CapabilityHonesty":      true, // a gated session answers ErrUnsupported for what the backend lacks
	"Terminal":               true, // the gated shell is the gate's own line loop
	"Branching":              true, // snapshot, restore and fork are approved and audited by the gate
}

// selectGated is the Gated pass's checks: gatedChecks, or all of them (but GateWithState,
// which makes a gate of its own), and HardlineRefused.
func selectGated(all bool) []check {
	var out []check
	for _, c := range checks {
		if c.name != "GateWithState" && (all || gatedChecks[c.name]) {
			out = append(out, c)
		}
	}
	return append(out, check{"HardlineRefused", (*suite).testHardline})
}

func run(t *testing.T, opts Options, gated bool, list []check) {
	b := opts.NewBackend(t)
	t.Cleanup(func() { b.Close() })
	s := &suite{opts: opts, b: b, gated: gated}
	for _, c := range list {
		t.Run(c.name, func(t *testing.T) {
			if opts.Parallel {
				t.Parallel()
			}
			c.fn(s, t)
		})
	}
}

var sessionSeq struct {
	sync.Mutex
	n int // guarded by the embedded Mutex
}

// newSession opens a uniquely named session and removes it when the test ends.
func (s *suite) newSession(t *testing.T) sandbox.Session {
	t.Helper()
	sessionSeq.Lock()
	sessionSeq.n++
	name := fmt.Sprintf("conf-%d-%d", time.Now().UnixNano()%1_000_000, sessionSeq.n)
	sessionSeq.Unlock()
	return s.open(t, s.b, name)
}

func (s *suite) open(t *testing.T, b sandbox.Backend, name string) sandbox.Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second*s.opts.Slow)
	defer cancel()
	sess, err := b.Open(ctx, name)
	if err != nil {
		t.Fatalf("Open(%q) = %v", name, err)
	}
	t.Cleanup(func() {
		sess.Close()
		if m, ok := b.(sandbox.SessionManager); ok {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(context.Background()), 60*time.Second)
			defer cancel()
			_ = m.Remove(ctx, name)
		}
	})
	return sess
}

func (s *suite) ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second*s.opts.Slow)
	t.Cleanup(cancel)
	return ctx
}

// sh runs a script and fails the test if the runner fails. If the test fails, the command,
// the backend and what the command printed are in its log, not only the assertion's diff.
func (s *suite) sh(t *testing.T, sess sandbox.Session, script string) *sandbox.Result {
	t.Helper()
	res, err := sess.Exec(s.ctx(t), sandbox.Command{Script: script})
	if err != nil {
		t.Fatalf("%s: Exec(%q) error = %v", s.name(), script, err)
	}
	testenv.LogOnFailure(t, s.name(), clipText(script), res)
	return res
}

// exec runs cmd on sess and logs, if the test fails, the command, the backend and what the
// command printed, as sh does, for checks that look at the error themselves.
func (s *suite) exec(t *testing.T, sess sandbox.Session, cmd sandbox.Command) (*sandbox.Result, error) {
	t.Helper()
	res, err := sess.Exec(s.ctx(t), cmd)
	text := cmd.Script
	if text == "" {
		text = fmt.Sprintf("argv %q", cmd.Argv)
	}
	if err != nil {
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("%s ran %q: error %v", s.name(), clipText(text), err)
			}
		})
	}
	testenv.LogOnFailure(t, s.name(), clipText(text), res)
	return res, err
}

// clipText bounds a command's text for a test log (a check's script can be 320 KB).
func clipText(s string) string {
	if len(s) > 500 {
		return s[:500] + fmt.Sprintf("… (%d bytes)", len(s))
	}
	return s
}

// scratch is a path under Scratch for one test's files, unique to the call: a host's /tmp is
// shared by the local and ssh suites and by other test processes running at the same time.
func (s *suite) scratch(name string) string {
	return s.opts.Scratch + "/" + name + "-" + sandbox.RandomHex(4)
}

// name is the backend under test, as failures name it.
func (s *suite) name() string {
	if s.gated {
		return s.b.Name() + " (gated)"
	}
	return s.b.Name()
}

func (s *suite) testExecBasics(t *testing.T) {
	sess := s.newSession(t)
	tests := []struct {
		script         string
		code           int
		stdout, stderr string
	}{
		{"true", 0, "", ""},
		{"false", 1, "", ""},
		{"exit 42", 42, "", ""},
		{"echo out; echo err >&2", 0, "out\n", "err\n"},
		{"printf 'a\\nb'; exit 3", 3, "a\nb", ""},
		{"echo x >&2; kill -TERM $$", 143, "", "x\n"},
		{"if then fi", 2, "", ""}, // a syntax error: the shell's code, stderr not compared
	}
	for _, tt := range tests {
		res := s.sh(t, sess, tt.script)
		if res.ExitCode != tt.code {
			t.Errorf("Exec(%q).ExitCode = %d; want %d (stderr %q)", tt.script, res.ExitCode, tt.code, res.Stderr)
		}
		if res.Stdout != tt.stdout {
			t.Errorf("Exec(%q).Stdout = %q; want %q", tt.script, res.Stdout, tt.stdout)
		}
		if tt.code != 2 && res.Stderr != tt.stderr {
			t.Errorf("Exec(%q).Stderr = %q; want %q", tt.script, res.Stderr, tt.stderr)
		}
		if res.Duration <= 0 || res.Truncated || res.OutputFile != "" {
			t.Errorf("Exec(%q) = duration %v truncated %v file %q; want positive, false, empty", tt.script, res.Duration, res.Truncated, res.OutputFile)
		}
	}
	if _, err := sess.Exec(s.ctx(t), sandbox.Command{}); !errors.Is(err, sandbox.ErrInvalidConfig) {
		t.Errorf("Exec(empty) error = %v; want ErrInvalidConfig", err)
	}
}

func (s *suite) testNotFound(t *testing.T) {
	sess := s.newSession(t)
	res := s.sh(t, sess, "no-such-command-hermes-xyz")
	if res.ExitCode != 127 {
		t.Errorf("Exec(script not found).ExitCode = %d; want 127", res.ExitCode)
	}
	res, err := s.exec(t, sess, sandbox.Command{Argv: []string{"no-such-command-hermes-xyz", "a"}})
	if err != nil {
		t.Fatalf("Exec(argv not found) error = %v", err)
	}
	if res.ExitCode != 127 || !strings.Contains(res.Stderr, "not found") {
		t.Errorf("Exec(argv not found) = %d %q; want 127 and 'not found'", res.ExitCode, res.Stderr)
	}
}

// hostile are strings that break naive quoting.
var hostile = []string{
	"plain", "", " spaced  out ", `it's`, `say "hi"`, `$(echo pwned)`, "`echo pwned`", "${HOME}",
	"a;b && c || d | e", "line1\nline2", "tab\there", "\\back\\slash", "*", "-n", "--", "ünïcödé ✓",
	"\xff\xfe invalid utf8", "#comment", "!bang", "~", "$'x'", "'\"'\"'",
}

func (s *suite) testArgv(t *testing.T) {
	sess := s.newSession(t)
	argv := append([]string{"printf", "[%s]\\n"}, hostile...)
	res, err := s.exec(t, sess, sandbox.Command{Argv: argv})
	if err != nil {
		t.Fatalf("Exec(argv) error = %v", err)
	}
	var want strings.Builder
	for _, h := range hostile {
		fmt.Fprintf(&want, "[%s]\n", h)
	}
	if res.ExitCode != 0 || res.Stdout != want.String() {
		t.Errorf("Exec(printf hostile argv) = %d %q; want 0 %q", res.ExitCode, res.Stdout, want.String())
	}
}

func (s *suite) testEnvFidelity(t *testing.T) {
	sess := s.newSession(t)
	for _, h := range hostile {
		res, err := s.exec(t, sess, sandbox.Command{Script: `printf '%s' "$HERMES_T"`, Env: map[string]string{"HERMES_T": h}})
		if err != nil {
			t.Fatalf("Exec with Env %q error = %v", h, err)
		}
		if res.Stdout != h {
			t.Errorf("Exec(Env HERMES_T=%q) printed %q", h, res.Stdout)
		}
	}
	// Per-command variables do not carry over.
	if res := s.sh(t, sess, `printf '%s' "${HERMES_T-unset}"`); res.Stdout != "unset" {
		t.Errorf("per-command Env leaked into the session: %q", res.Stdout)
	}
}

func (s *suite) testBinary(t *testing.T) {
	sess := s.newSession(t)
	res := s.sh(t, sess, `printf '\000\001\377\376abc\200'`)
	if want := "\x00\x01\xff\xfeabc\x80"; res.Stdout != want {
		t.Errorf("binary output = %q; want %q", res.Stdout, want)
	}
}

func (s *suite) testStdin(t *testing.T) {
	if !s.b.Capabilities().Stdin {
		t.Skip("backend does not pass stdin")
	}
	sess := s.newSession(t)
	in := "hello\nworld\x00\xff\n"
	res, err := s.exec(t, sess, sandbox.Command{Script: "cat; echo done", Stdin: strings.NewReader(in)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stdout != in+"done\n" {
		t.Errorf("Exec(cat) with stdin = %q; want %q", res.Stdout, in+"done\n")
	}
	// A command that does not read its input still finishes.
	res, err = s.exec(t, sess, sandbox.Command{Script: "echo skip", Stdin: strings.NewReader(strings.Repeat("x", 1<<20))})
	if err != nil || res.Stdout != "skip\n" {
		t.Errorf("Exec(ignore stdin) = %v, %v", res, err)
	}
}

func (s *suite) testState(t *testing.T) {
	sess := s.newSession(t)
	dir := s.scratch("hermes state dir")
	s.sh(t, sess, fmt.Sprintf(`mkdir -p '%s' && cd '%s' && export HERMES_A='x y' HERMES_B="it's \"q\"
line2"; HERMES_LOCAL=1`, dir, dir))
	res := s.sh(t, sess, `pwd; printf '%s|%s|%s\n' "$HERMES_A" "$HERMES_B" "${HERMES_LOCAL-unset}"`)
	want := dir + "\nx y|it's \"q\"\nline2|unset\n"
	if res.Stdout != want {
		t.Errorf("state after cd/export = %q; want %q", res.Stdout, want)
	}
	if res.Cwd != dir {
		t.Errorf("Result.Cwd = %q; want %q", res.Cwd, dir)
	}
	// exit does not lose state; unset removes a variable.
	s.sh(t, sess, "cd /; unset HERMES_A; exit 5")
	res = s.sh(t, sess, `pwd; echo "${HERMES_A-gone}"`)
	if res.Stdout != "/\ngone\n" {
		t.Errorf("state after exit 5 = %q; want %q", res.Stdout, "/\ngone\n")
	}
}

func (s *suite) testDir(t *testing.T) {
	sess := s.newSession(t)
	res, err := s.exec(t, sess, sandbox.Command{Script: "pwd", Dir: "/"})
	if err != nil || res.Stdout != "/\n" {
		t.Fatalf("Exec(pwd, Dir=/) = %v, %v", res, err)
	}
	if _, err := sess.Exec(s.ctx(t), sandbox.Command{Script: "pwd", Dir: "/no/such/dir/hermes"}); err == nil {
		t.Errorf("Exec with a missing Dir succeeded; want an error")
	}
}

// leftovers counts the processes in the session's sandbox whose command line contains
// marker. It fails the test when the count cannot be taken; that it can see processes at all
// is proved by canSeeProcesses.
func (s *suite) leftovers(t *testing.T, sess sandbox.Session, marker string) int {
	t.Helper()
	// One grep over every command line; the bracket keeps grep from matching its own, and a
	// process that ends meanwhile is an unreadable file, ignored.
	script := fmt.Sprintf(`grep -l -- '%s' /proc/[0-9]*/cmdline 2>/dev/null | wc -l`, selfless(marker))
	res := s.sh(t, sess, script)
	var n int
	if _, err := fmt.Sscan(res.Stdout, &n); err != nil || res.ExitCode != 0 {
		t.Fatalf("counting processes in the sandbox: exit %d, stdout %q, stderr %q (%v)", res.ExitCode, res.Stdout, res.Stderr, err)
	}
	return n
}

// waitLeftovers polls until exactly want processes carry marker, or fails after a deadline.
func (s *suite) waitLeftovers(t *testing.T, sess sandbox.Session, marker string, want int, what string) {
	t.Helper()
	s.waitLeftoversAfter(t, sess, marker, want, what, 0)
}

// waitLeftoversAfter is waitLeftovers for something that may take after longer to happen.
func (s *suite) waitLeftoversAfter(t *testing.T, sess sandbox.Session, marker string, want int, what string, after time.Duration) {
	t.Helper()
	deadline := time.Now().Add(10*time.Second*s.opts.Slow + after)
	for {
		n := s.leftovers(t, sess, marker)
		if n == want {
			return
		}
		if time.Now().After(deadline) {
			s.kill(t, sess, marker) // leave nothing behind, even on failure
			t.Fatalf("%d process(es) with %q %s; want %d", n, marker, what, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// canSeeProcesses proves that leftovers sees a live process in the session's sandbox, so a
// kill check that finds nothing left means the processes were killed, not that /proc or
// grep is missing: it starts a detached process, must count it, then kills it.
func (s *suite) canSeeProcesses(t *testing.T, sess sandbox.Session) {
	t.Helper()
	m := marker("visible")
	s.sh(t, sess, s.detached("9"+m, ">/dev/null 2>&1 </dev/null")+"; echo started")
	s.waitLeftovers(t, sess, m, 1, "visible while it runs (the kill checks need /proc and grep in the sandbox)")
	s.kill(t, sess, "9"+m)
	s.waitLeftovers(t, sess, "9"+m, 0, "still running after kill -9")
}

// detached is a script that starts `sleep arg` (with redirections) in a session of its own
// and ends only once the sleep is there: the end of the command kills its process group, and
// a daemon that has not yet called setsid would die with it.
func (s *suite) detached(arg, redirect string) string {
	f := s.opts.Scratch + "/hermes-detached-" + arg
	return fmt.Sprintf(`rm -f %[1]s; setsid sh -c 'echo up > %[1]s; exec sleep %[2]s' %[3]s & `+
		`i=0; while [ ! -s %[1]s ] && [ $i -lt 3000 ]; do sleep 0.01; i=$((i+1)); done; rm -f %[1]s`, f, arg, redirect)
}

// kill sends SIGKILL to every process in the sandbox whose command line contains marker.
func (s *suite) kill(t *testing.T, sess sandbox.Session, marker string) {
	t.Helper()
	s.sh(t, sess, fmt.Sprintf(`for f in $(grep -l -- '%s' /proc/[0-9]*/cmdline 2>/dev/null); do p=${f#/proc/}; kill -9 ${p%%/cmdline}; done; true`, selfless(marker)))
}

// selfless is a grep pattern for marker that does not match itself: 123 becomes [1]23.
func selfless(marker string) string { return "[" + marker[:1] + "]" + marker[1:] }

// waitNoLeftovers proves that processes are visible, then polls until no process carries
// marker, or fails after a deadline.
func (s *suite) waitNoLeftovers(t *testing.T, sess sandbox.Session, marker string) {
	t.Helper()
	s.canSeeProcesses(t, sess)
	s.waitLeftovers(t, sess, marker, 0, "still running after the command ended")
}

// marker is a number of nine random digits that tags one check's processes (its argument names
// the use, for the reader). Fixed width and random, so no marker of a check running at the same time, in
// this process or another one on the same host, contains another.
func marker(string) string {
	return fmt.Sprintf("%09d", rand.IntN(1_000_000_000))
}

func (s *suite) testTimeout(t *testing.T) {
	sess := s.newSession(t)
	m := marker("timeout")
	// A child, a grandchild, and a child already in a session of its own (out of reach of a
	// process-group kill): all must die.
	script := s.detached("3"+m, "") + fmt.Sprintf(`; sleep 1%s & sh -c 'sleep 2%s; true' & wait`, m, m)
	start := time.Now()
	res, err := s.exec(t, sess, sandbox.Command{Script: script, Timeout: 3 * time.Second})
	if err != nil {
		t.Fatalf("Exec(timeout) error = %v", err)
	}
	if res.ExitCode != sandbox.ExitTimeout || !res.TimedOut {
		t.Errorf("Exec(timeout) = exit %d timedOut %v; want 124 true", res.ExitCode, res.TimedOut)
	}
	if d := time.Since(start); d > 20*time.Second*s.opts.Slow {
		t.Errorf("Exec(timeout) took %v", d)
	}
	s.waitNoLeftovers(t, sess, m)
	if res := s.sh(t, sess, "echo alive"); res.Stdout != "alive\n" {
		t.Errorf("session after timeout printed %q", res.Stdout)
	}
}

// signalWriter calls fn once when the output contains want.
type signalWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer // guarded by mu
	want string
	once sync.Once
	fn   func()
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	w.buf.Write(p)
	hit := strings.Contains(w.buf.String(), w.want)
	w.mu.Unlock()
	if hit {
		w.once.Do(w.fn)
	}
	return len(p), nil
}

func (s *suite) testCancel(t *testing.T) {
	sess := s.newSession(t)
	m := marker("cancel")
	ctx, cancel := context.WithCancel(s.ctx(t))
	defer cancel()
	out := &signalWriter{want: "started", fn: cancel}
	script := s.detached("6"+m, "") + fmt.Sprintf(`; sleep 4%s & echo started; sleep 5%s`, m, m)
	res, err := sess.Exec(ctx, sandbox.Command{Script: script, Stdout: out})
	testenv.LogOnFailure(t, s.name(), script, res)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Exec(cancelled) error = %v; want context.Canceled", err)
	}
	if res == nil || res.ExitCode != sandbox.ExitInterrupted || !res.Interrupted {
		t.Fatalf("Exec(cancelled) = %+v; want exit 130, interrupted", res)
	}
	s.waitNoLeftovers(t, sess, m)
}

func (s *suite) testStreaming(t *testing.T) {
	sess := s.newSession(t)
	flag := fmt.Sprintf("%s/hermes-flag-%s", s.opts.Scratch, marker("stream"))
	release := make(chan error, 1)
	out := &signalWriter{want: "first", fn: func() {
		// Output arrived while the command still runs: release it from a second command.
		go func() {
			_, err := sess.Exec(s.ctx(t), sandbox.Command{Script: "touch '" + flag + "'"})
			release <- err
		}()
	}}
	script := fmt.Sprintf(`echo first; i=0; while [ ! -e '%s' ]; do sleep 0.05; i=$((i+1)); [ $i -gt 600 ] && exit 9; done; echo second; rm -f '%s'`, flag, flag)
	res, err := s.exec(t, sess, sandbox.Command{Script: script, Stdout: out})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 || res.Stdout != "first\nsecond\n" {
		t.Errorf("streamed command = %d %q; want 0 first/second (was output streamed before exit?)", res.ExitCode, res.Stdout)
	}
	if err := <-release; err != nil {
		t.Errorf("concurrent Exec error = %v", err)
	}
}

func (s *suite) testOutputBounded(t *testing.T) {
	sess := s.newSession(t)
	var live bytes.Buffer
	var mu sync.Mutex
	w := writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return live.Write(p) })
	const n = 300_000
	res, err := s.exec(t, sess, sandbox.Command{Script: fmt.Sprintf(`i=0; while [ $i -lt %d ]; do printf '%%09d\n' $i; i=$((i+1)); done; echo tail-end`, n/10), Stdout: w, OutputLimit: 10_000})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Truncated || res.OutputFile == "" {
		t.Fatalf("Exec(300 KB) truncated=%v file=%q; want true and a file", res.Truncated, res.OutputFile)
	}
	if len(res.Stdout) > 10_000+300 {
		t.Errorf("kept %d bytes; want about 10000", len(res.Stdout))
	}
	if !strings.HasPrefix(res.Stdout, "000000000\n") || !strings.HasSuffix(res.Stdout, "tail-end\n") || !strings.Contains(res.Stdout, "truncated") {
		t.Errorf("kept output lacks head, tail or marker: %q…%q", res.Stdout[:40], res.Stdout[len(res.Stdout)-40:])
	}
	if res.StdoutBytes != n+9 {
		t.Errorf("StdoutBytes = %d; want %d", res.StdoutBytes, n+9)
	}
	mu.Lock()
	if live.Len() != n+9 {
		t.Errorf("streamed %d bytes; want %d", live.Len(), n+9)
	}
	mu.Unlock()
	full, err := readHostFile(res.OutputFile)
	if err != nil || len(full) != n+9 {
		t.Errorf("spill file has %d bytes (%v); want %d", len(full), err, n+9)
	}
	// Over Command.SpillLimit (terminal.spill_limit) the spill file keeps the first and last
	// halves, with a note of the gap.
	const spillLimit = 100_000
	capped, err := sess.Exec(s.ctx(t), sandbox.Command{Script: fmt.Sprintf(`i=0; while [ $i -lt %d ]; do printf '%%09d\n' $i; i=$((i+1)); done; echo tail-end`, n/10),
		OutputLimit: 10_000, SpillLimit: spillLimit})
	if err != nil {
		t.Fatal(err)
	}
	part, err := readHostFile(capped.OutputFile)
	switch {
	case err != nil:
		t.Errorf("capped spill file: %v", err)
	case len(part) > spillLimit+300 || !bytes.HasPrefix(part, full[:spillLimit/2]) || !bytes.HasSuffix(part, full[len(full)-spillLimit/2:]) ||
		!bytes.Contains(part, []byte(fmt.Sprintf("%d bytes dropped here", n+9-spillLimit))):
		t.Errorf("spill file with SpillLimit %d = %d bytes; want its first and last halves of the output and a note of the %d bytes between", spillLimit, len(part), n+9-spillLimit)
	}
	// The spill files go with the session.
	if m, ok := s.b.(sandbox.SessionManager); ok {
		if err := m.Remove(s.ctx(t), sess.Name()); err != nil {
			t.Fatalf("Remove(%q) = %v", sess.Name(), err)
		}
		for _, f := range []string{res.OutputFile, capped.OutputFile} {
			if _, err := readHostFile(f); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("spill file %s after Remove: %v; want it removed", f, err)
			}
		}
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func (s *suite) testDaemon(t *testing.T) {
	sess := s.newSession(t)
	m := marker("daemon")
	start := time.Now()
	// The daemon escapes into its own session and keeps stdout open.
	res := s.sh(t, sess, s.detached("6"+m, "")+"; echo done")
	if res.Stdout != "done\n" || res.ExitCode != 0 {
		t.Errorf("Exec(daemon) = %d %q", res.ExitCode, res.Stdout)
	}
	if d := time.Since(start); d > 15*time.Second*s.opts.Slow {
		t.Errorf("Exec(daemon) took %v; it must return when the main process exits", d)
	}
	s.waitLeftovers(t, sess, "6"+m, 1, "running: the daemon must survive its command")
	s.kill(t, sess, "6"+m)
	s.waitNoLeftovers(t, sess, "6"+m)
}

func (s *suite) testLargeScript(t *testing.T) {
	sess := s.newSession(t)
	payload := strings.Repeat("abcdefgh", 40_000) // 320 KB: beyond one argv/env string
	res := s.sh(t, sess, "X='"+payload+"'; echo ${#X}; cd /")
	if strings.TrimSpace(res.Stdout) != fmt.Sprint(len(payload)) {
		t.Errorf("large script printed %q; want %d", res.Stdout, len(payload))
	}
	if res := s.sh(t, sess, "pwd"); res.Stdout != "/\n" {
		t.Errorf("state after large script: pwd = %q", res.Stdout)
	}
}

func (s *suite) testLifecycle(t *testing.T) {
	sess := s.newSession(t)
	s.sh(t, sess, "true")
	if err := sess.Close(); err != nil {
		t.Errorf("Close() = %v", err)
	}
	if err := sess.Close(); err != nil {
		t.Errorf("second Close() = %v; want nil", err)
	}
	if _, err := sess.Exec(s.ctx(t), sandbox.Command{Script: "true"}); !errors.Is(err, sandbox.ErrClosed) {
		t.Errorf("Exec after Close error = %v; want ErrClosed", err)
	}
}

func (s *suite) testConcurrency(t *testing.T) {
	sessions := []sandbox.Session{s.newSession(t), s.newSession(t), s.newSession(t)}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := 0; g < 12; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			sess := sessions[g%len(sessions)]
			for i := 0; i < 4; i++ {
				want := fmt.Sprintf("g%d-i%d", g, i)
				res, err := sess.Exec(s.ctx(t), sandbox.Command{Script: "echo " + want + "; echo " + want + " >&2"})
				if err != nil {
					errs <- err
					return
				}
				if res.Stdout != want+"\n" || res.Stderr != want+"\n" {
					errs <- fmt.Errorf("%s: concurrent Exec(%q) = exit %d, stdout %q, stderr %q; want %q on both", s.name(), "echo "+want+"; echo "+want+" >&2", res.ExitCode, res.Stdout, res.Stderr, want)
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func (s *suite) testIsolation(t *testing.T) {
	a, b := s.newSession(t), s.newSession(t)
	s.sh(t, a, "export HERMES_ISO=a; cd /")
	res := s.sh(t, b, `echo "${HERMES_ISO-none}"`)
	if res.Stdout != "none\n" {
		t.Errorf("session B sees A's variable: %q", res.Stdout)
	}
}

func (s *suite) testPersistence(t *testing.T) {
	if !s.b.Capabilities().Persistent {
		t.Skip("backend sessions do not persist across processes")
	}
	sess := s.newSession(t)
	dir := s.scratch("hermes-persist")
	s.sh(t, sess, "mkdir -p "+dir+" && cd "+dir+" && export HERMES_P=kept")
	sess.Close()
	b2 := s.opts.NewBackend(t)
	defer b2.Close()
	sess2, err := b2.Open(s.ctx(t), sess.Name())
	if err != nil {
		t.Fatal(err)
	}
	defer sess2.Close()
	res, err := s.exec(t, sess2, sandbox.Command{Script: `pwd; echo "$HERMES_P"`})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stdout != dir+"\nkept\n" {
		t.Errorf("after reopening = %q; want %q", res.Stdout, dir+"\nkept\n")
	}
	if res.EnvironmentRecreated {
		t.Errorf("reopened session says environment_recreated")
	}
}

func (s *suite) testFiles(t *testing.T) {
	sess := s.newSession(t)
	fsys := ability[sandbox.FileSystem](t, s.b.Capabilities().Files, sess, "file access")
	ctx := s.ctx(t)
	data := []byte("line1\n\x00\xffbinary\nline3\n")
	dir := s.scratch("hermes-files")
	p := dir + "/sub/f.bin"
	if err := fsys.WriteFile(ctx, p, data, 0o640); err != nil {
		t.Fatalf("WriteFile(%q) = %v", p, err)
	}
	got, err := fsys.ReadFile(ctx, p, 0, 0)
	if err != nil || !bytes.Equal(got, data) {
		t.Errorf("ReadFile(%q) = %q, %v; want %q", p, got, err, data)
	}
	got, err = fsys.ReadFile(ctx, p, 6, 3)
	if err != nil || string(got) != "\x00\xffb" {
		t.Errorf("ReadFile(offset 6, limit 3) = %q, %v", got, err)
	}
	// The shell sees the same file, and relative paths follow the session's directory.
	s.sh(t, sess, "cd "+dir)
	got, err = fsys.ReadFile(ctx, "sub/f.bin", 0, 0)
	if err != nil || !bytes.Equal(got, data) {
		t.Errorf("ReadFile(relative) = %q, %v", got, err)
	}
	if res := s.sh(t, sess, "wc -c < sub/f.bin"); strings.TrimSpace(res.Stdout) != fmt.Sprint(len(data)) {
		t.Errorf("shell sees %q bytes; want %d", res.Stdout, len(data))
	}
	entries, err := fsys.ListDir(ctx, dir+"/sub")
	if err != nil || len(entries) != 1 || entries[0].Name != "f.bin" || entries[0].Size != int64(len(data)) {
		t.Errorf("ListDir = %+v, %v", entries, err)
	}
	if _, err := fsys.ReadFile(ctx, s.opts.Scratch+"/hermes-no-such-file", 0, 0); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("ReadFile(missing) error = %v; want ErrNotFound", err)
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 300_000) // 4.8 MB
	if err := fsys.WriteFile(ctx, dir+"/big", big, 0o600); err != nil {
		t.Fatal(err)
	}
	got, err = fsys.ReadFile(ctx, dir+"/big", 0, 0)
	if err != nil || !bytes.Equal(got, big) {
		t.Errorf("big file round trip: %d bytes, %v", len(got), err)
	}
	if r, ok := sess.(sandbox.PathResolver); ok {
		s.checkResolve(t, sess, r, dir)
	}
	s.sh(t, sess, "rm -rf "+dir)
}

// checkResolve checks sandbox.PathResolver in dir, the session's directory (which holds
// sub/f.bin): links made by the shell are followed as the sandbox sees them, a path that does
// not exist yet keeps its tail, and "~" is the session's HOME.
func (s *suite) checkResolve(t *testing.T, sess sandbox.Session, r sandbox.PathResolver, dir string) {
	t.Helper()
	ctx := s.ctx(t)
	if _, err := r.ResolvePath(ctx, dir); errors.Is(err, sandbox.ErrUnsupported) {
		t.Logf("ResolvePath: %v (a mode without the helper)", err)
		return
	}
	res := s.sh(t, sess, "ln -s sub/f.bin link && ln -s sub linkdir && ln -s missing/target dangling && pwd -P")
	real := strings.TrimSpace(res.Stdout)
	if res.ExitCode != 0 || !strings.HasPrefix(real, "/") {
		t.Fatalf("making links in %s = %d %q %q", dir, res.ExitCode, res.Stdout, res.Stderr)
	}
	for _, c := range []struct{ in, want string }{
		{"link", real + "/sub/f.bin"},
		{dir + "/link", real + "/sub/f.bin"},
		{"linkdir/f.bin", real + "/sub/f.bin"},
		{"./linkdir/new/file", real + "/sub/new/file"},
		{"dangling", real + "/missing/target"},
		{"sub/../f-new", real + "/f-new"},
	} {
		if got, err := r.ResolvePath(ctx, c.in); err != nil || got != c.want {
			t.Errorf("ResolvePath(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	if res := s.sh(t, sess, `cd -P ~ 2>/dev/null && pwd -P`); res.ExitCode == 0 {
		home := strings.TrimSpace(res.Stdout)
		if got, err := r.ResolvePath(ctx, "~/.hermes-no-such"); err != nil || got != home+"/.hermes-no-such" {
			t.Errorf("ResolvePath(~/.hermes-no-such) = %q, %v; want %q", got, err, home+"/.hermes-no-such")
		}
		s.sh(t, sess, "cd "+dir)
	}
}

func (s *suite) testJobs(t *testing.T) {
	sess := s.newSession(t)
	jr := ability[sandbox.JobRunner](t, s.b.Capabilities().Jobs, sess, "background jobs")
	ctx := s.ctx(t)
	s.sh(t, sess, "cd / && export HERMES_JOBVAR=fromsession")
	job, err := jr.StartJob(ctx, sandbox.Command{Script: `echo "start $HERMES_JOBVAR $(pwd)"; echo oops >&2; i=0; while [ $i -lt 3 ]; do i=$((i+1)); sleep 0.05; done; echo end; exit 7`})
	if err != nil {
		t.Fatalf("StartJob = %v", err)
	}
	if job.ID == "" || !job.Running {
		t.Errorf("StartJob = %+v; want an id, running", job)
	}
	out, err := jr.WaitJob(ctx, job.ID)
	if err != nil {
		t.Fatalf("WaitJob = %v", err)
	}
	if out.Running || out.ExitCode == nil || *out.ExitCode != 7 {
		t.Errorf("WaitJob = %+v; want ended with 7", out)
	}
	if out.Stdout != "start fromsession /\nend\n" || out.Stderr != "oops\n" {
		t.Errorf("WaitJob output = %q / %q", out.Stdout, out.Stderr)
	}
	// A second poll returns only new output: none.
	again, err := jr.PollJob(ctx, job.ID)
	if err != nil || again.Stdout != "" {
		t.Errorf("PollJob after wait = %q, %v; want no new output", again.Stdout, err)
	}
	m := marker("job")
	long, err := jr.StartJob(ctx, sandbox.Command{Script: s.detached("6"+m, "") + fmt.Sprintf("; echo ready; sleep 7%s & sleep 8%s", m, m)})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second * s.opts.Slow)
	for {
		p, err := jr.PollJob(ctx, long.ID)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(p.Stdout, "ready") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job never printed ready")
		}
		time.Sleep(20 * time.Millisecond)
	}
	list, err := jr.Jobs(ctx)
	if err != nil || len(list) != 2 {
		t.Errorf("Jobs() = %+v, %v; want 2", list, err)
	}
	st, err := jr.KillJob(ctx, long.ID)
	if err != nil || st.Running {
		t.Errorf("KillJob = %+v, %v; want stopped", st, err)
	}
	s.waitNoLeftovers(t, sess, m)
	if _, err := jr.PollJob(ctx, "job-nope"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("PollJob(unknown) error = %v; want ErrNotFound", err)
	}
}

func (s *suite) testSessionManager(t *testing.T) {
	m, ok := s.b.(sandbox.SessionManager)
	if !ok {
		t.Skip("backend cannot list sessions")
	}
	sess := s.newSession(t)
	s.sh(t, sess, "true")
	list, err := m.Sessions(s.ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, info := range list {
		found = found || info.Name == sess.Name()
	}
	if !found {
		t.Errorf("Sessions() = %+v; want it to include %q", list, sess.Name())
	}
	sess.Close()
	if err := m.Remove(s.ctx(t), sess.Name()); err != nil {
		t.Errorf("Remove(%q) = %v", sess.Name(), err)
	}
	list, _ = m.Sessions(s.ctx(t))
	for _, info := range list {
		if info.Name == sess.Name() {
			t.Errorf("session %q still listed after Remove", sess.Name())
		}
	}
	if err := m.Remove(s.ctx(t), sess.Name()); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Remove(removed) = %v; want ErrNotFound", err)
	}
}

func (s *suite) testCapabilities(t *testing.T) {
	caps := s.b.Capabilities()
	sess := s.newSession(t)
	ctx := s.ctx(t)
	// A gated session implements every interface and answers ErrUnsupported for what the
	// backend lacks, so an ability is the interface plus an answer that is not ErrUnsupported.
	files := false
	if fsys, ok := sess.(sandbox.FileSystem); ok {
		_, err := fsys.ListDir(ctx, "/")
		files = !errors.Is(err, sandbox.ErrUnsupported)
	}
	jobs := false
	if jr, ok := sess.(sandbox.JobRunner); ok {
		_, err := jr.Jobs(ctx)
		jobs = !errors.Is(err, sandbox.ErrUnsupported)
	}
	_, terminal := sess.(sandbox.Terminal)
	if caps.Files != files {
		t.Errorf("Capabilities().Files = %v but the session's FileSystem works = %v", caps.Files, files)
	}
	if caps.Jobs != jobs {
		t.Errorf("Capabilities().Jobs = %v but the session's JobRunner works = %v", caps.Jobs, jobs)
	}
	if caps.Terminal && !terminal {
		t.Errorf("Capabilities().Terminal = true but the session does not implement Terminal")
	}
	if caps.Isolation == "" {
		t.Errorf("Capabilities().Isolation is empty")
	}
	if s.b.Name() == "" {
		t.Errorf("Name() is empty")
	}
}

// ability returns the session as T when the backend claims the ability, skips the test
// when it does not, and fails it when the claim is false.
func ability[T any](t *testing.T, claimed bool, sess sandbox.Session, what string) T {
	t.Helper()
	if !claimed {
		t.Skip("backend has no " + what)
	}
	v, ok := sess.(T)
	if !ok {
		t.Fatalf("Capabilities() claims %s but the session does not implement %T", what, (*T)(nil))
	}
	return v
}

// testTerminal runs an interactive shell on a pseudo-terminal: what is typed runs, the
// terminal has the size asked for, stdin is a terminal, and the shell's exit code comes back.
// A backend without the capability must refuse with ErrUnsupported.
func (s *suite) testTerminal(t *testing.T) {
	sess := s.newSession(t)
	term, ok := sess.(sandbox.Terminal)
	if !s.b.Capabilities().Terminal {
		if ok {
			if _, err := term.Shell(s.ctx(t), sandbox.TerminalOptions{Stdin: strings.NewReader("exit\n"), Stdout: io.Discard}); !errors.Is(err, sandbox.ErrUnsupported) {
				t.Errorf("Shell() on a backend without Terminal = %v; want ErrUnsupported", err)
			}
		}
		t.Skip("backend has no terminal")
	}
	s.sh(t, sess, "cd "+s.opts.Scratch)
	in, typed := io.Pipe()
	defer typed.Close()
	var out SyncBuffer
	done := make(chan error, 1)
	var code int
	go func() {
		var err error
		code, err = term.Shell(s.ctx(t), sandbox.TerminalOptions{Stdin: in, Stdout: &out, Size: sandbox.WinSize{Rows: 33, Cols: 101}})
		done <- err
	}()
	// Typed text is echoed by the terminal; only its results prove it ran. Behind the gate the
	// shell is a gated door: each line is classified and runs as a session command, without a
	// pseudo-terminal, and a line of its own `exit N` ends it.
	wants := []string{"pty-42", "33 101", "stdin-is-tty", s.opts.Scratch}
	if s.gated {
		wants = []string{"pty-42", s.opts.Scratch}
		go typed.Write([]byte("echo pty-$((6*7))\npwd\nexit 3\n"))
	} else {
		go typed.Write([]byte("echo pty-$((6*7)); stty size; [ -t 0 ] && echo stdin-is-tty; pwd; exit 3\n"))
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Shell() = %v", err)
		}
	case <-time.After(60 * time.Second * s.opts.Slow):
		t.Fatalf("Shell() did not end; output so far: %q", out.String())
	}
	got := out.String()
	for _, want := range wants {
		if !strings.Contains(got, want) {
			t.Errorf("terminal output lacks %q: %q", want, got)
		}
	}
	if code != 3 {
		t.Errorf("Shell() exit code = %d; want 3", code)
	}
}

// testNetwork checks the Network capability from inside: a backend that says it has no
// network must show no network interface but loopback.
func (s *suite) testNetwork(t *testing.T) {
	if s.b.Capabilities().Network {
		t.Skip("backend has network; nothing here can prove more without leaving this machine")
	}
	sess := s.newSession(t)
	res := s.sh(t, sess, `tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '`)
	if res.ExitCode != 0 || strings.TrimSpace(res.Stdout) == "" {
		t.Fatalf("listing network interfaces: exit %d %q %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	for _, ifc := range strings.Fields(res.Stdout) {
		if ifc != "lo" {
			t.Errorf("Capabilities().Network = false but the sandbox has network interface %q", ifc)
		}
	}
}

// testHardline checks, behind the gate, that hardline commands are refused before they reach
// the sandbox even with approvals off, and that the session still works afterwards.
func (s *suite) testHardline(t *testing.T) {
	sess := s.newSession(t)
	witness := s.scratch("hermes-gate-witness")
	s.sh(t, sess, "touch "+witness)
	// Hardline commands that would do no harm if the gate ever let them through: the
	// classifier's own tests cover the destructive ones, which must never be tried here.
	for _, cmd := range []string{"export HERMES_SANDBOX_APPROVALS_MODE=off", "sudo -S true < /dev/null",
		"HERMES_SANDBOX_TOOLS_SHELL_EXECUTE=true true"} {
		_, err := sess.Exec(s.ctx(t), sandbox.Command{Script: cmd})
		var re *gate.RefusedError
		if !errors.As(err, &re) || re.Reason != "hardline" {
			t.Errorf("Exec(%q) error = %v; want a hardline refusal", cmd, err)
		}
	}
	if res := s.sh(t, sess, "ls "+witness+" && rm "+witness); res.ExitCode != 0 {
		t.Errorf("the sandbox was harmed: %s is gone", witness)
	}
}

// SyncBuffer is a bytes.Buffer safe for writers and a reader in different goroutines.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer // guarded by mu
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written so far.
func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
