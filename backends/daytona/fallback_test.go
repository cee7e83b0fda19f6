package daytona

import (
	"errors"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox/sandboxtest"
)

// newLoggedBackend is newBackend with the backend's log kept in logs.
func newLoggedBackend(t *testing.T, f *fakeDaytona, mut func(*config.Config), opts func(*Options), logs *sandboxtest.SyncBuffer) *Backend {
	t.Helper()
	cfg := config.NewConfig()
	cfg.Daytona.APIURL = f.apiURL()
	cfg.Daytona.APIKey = config.Secret(f.key)
	if mut != nil {
		mut(cfg)
	}
	fo := sandbox.FactoryOptions{StateDir: t.TempDir(), Environ: []string{"HOME=" + os.Getenv("HOME")},
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))}
	o := Options{PollInterval: 25 * time.Millisecond, StateTimeout: time.Minute}
	if opts != nil {
		opts(&o)
	}
	b, err := NewWith(cfg.Daytona, cfg.BackendOptions(fo), o)
	if err != nil {
		t.Fatalf("NewWith() = %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// TestAutoFallback: where the helper cannot run — it cannot execute (here a binary for no
// machine, as one built for another architecture or a noexec home would be), or the toolbox
// refuses its upload — daytona.channel auto says why in the log, runs each command as a
// toolbox process session, and reports it in Capabilities, Warnings, doctor's line and the
// sessions list. With daytona.channel helper the same sandbox is an error naming the key.
func TestAutoFallback(t *testing.T) {
	f := newFake(t, testImage(t), time.Minute)
	cases := []struct {
		name, reason string
		prep         func(o *Options)
	}{
		{"helper cannot execute", "did not start", func(o *Options) { o.HelperBinary = []byte("\x7fELF not for this machine\n") }},
		{"upload refused", "uploading it failed", func(*Options) { f.injectStatus("UploadFile", http.StatusForbidden) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var logs sandboxtest.SyncBuffer
			b := newLoggedBackend(t, f, nil, tc.prep, &logs)
			if c := b.Capabilities(); !c.Terminal || !c.Jobs || strings.Contains(c.Isolation, "process sessions") {
				t.Fatalf("Capabilities() before any session = %+v; want the helper's", c)
			}
			ptys, sessions := f.count("CreatePtySession"), f.count("SessionExecuteCommand")
			sess := open(t, b, "auto")
			t.Cleanup(func() { b.Remove(ctxT(t, time.Minute), "auto") })
			res := run(t, sess, "echo hi; echo err >&2; cd /tmp; export FB=1; exit 3")
			if res.ExitCode != 3 || res.Stdout != "hi\n" || res.Stderr != "err\n" || res.Cwd != "/tmp" {
				t.Fatalf("Exec = %+v; want 3, hi, err, /tmp", res)
			}
			if res = run(t, sess, `pwd; echo "$FB"`); res.Stdout != "/tmp\n1\n" {
				t.Errorf("state across commands = %q; want /tmp, 1", res.Stdout)
			}
			if n := f.count("SessionExecuteCommand") - sessions; n != 2 {
				t.Errorf("%d toolbox session commands; want 2", n)
			}
			if tc.reason == "did not start" && f.count("CreatePtySession") == ptys {
				t.Errorf("the helper was never started")
			}
			if l := logs.String(); !strings.Contains(l, "the sandbox helper cannot run") || !strings.Contains(l, tc.reason) {
				t.Errorf("log = %q; want the fallback and %q", l, tc.reason)
			}
			c := b.Capabilities()
			if c.Terminal || c.Jobs || !c.Files || !strings.Contains(c.Isolation, "toolbox process sessions") {
				t.Errorf("Capabilities() after the fallback = %+v; want no terminal or jobs, files, and the mode in Isolation", c)
			}
			warned := false
			for _, w := range b.Warnings() {
				warned = warned || strings.Contains(w, "helper cannot run")
			}
			if !warned {
				t.Errorf("Warnings() = %q; want the fallback", b.Warnings())
			}
			if d := b.Describe(); !strings.Contains(d, "toolbox process sessions") {
				t.Errorf("Describe() = %q; want the channel in use", d)
			}
			infos, err := b.Sessions(ctxT(t, time.Minute))
			if err != nil || len(infos) != 1 || infos[0].Mode != modeSession {
				t.Errorf("Sessions() = %+v, %v; want one, mode %q", infos, err, modeSession)
			}
			if _, err := sess.(sandbox.JobRunner).Jobs(ctxT(t, time.Minute)); !errors.Is(err, sandbox.ErrUnsupported) {
				t.Errorf("Jobs() over the fallback = %v; want ErrUnsupported", err)
			}
		})
	}
	t.Run("channel helper", func(t *testing.T) {
		var logs sandboxtest.SyncBuffer
		b := newLoggedBackend(t, f, func(c *config.Config) { c.Daytona.Channel = config.DaytonaChannelHelper },
			cases[0].prep, &logs)
		sess := open(t, b, "helper-only")
		t.Cleanup(func() { b.Remove(ctxT(t, time.Minute), "helper-only") })
		sessions := f.count("SessionExecuteCommand")
		_, err := sess.Exec(ctxT(t, 2*time.Minute), sandbox.Command{Script: "true"})
		if !errors.Is(err, sandbox.ErrUnavailable) || !strings.Contains(err.Error(), "daytona.channel") {
			t.Errorf("Exec with daytona.channel helper = %v; want ErrUnavailable naming daytona.channel", err)
		}
		if n := f.count("SessionExecuteCommand") - sessions; n != 0 {
			t.Errorf("%d toolbox session commands with daytona.channel helper; want 0", n)
		}
	})
}

// TestSessionsReportMode: a session over the helper is listed as such.
func TestSessionsReportMode(t *testing.T) {
	f := newFake(t, testImage(t), time.Minute)
	b := newBackend(t, f, t.TempDir(), nil)
	sess := open(t, b, "modes")
	t.Cleanup(func() { b.Remove(ctxT(t, time.Minute), "modes") })
	run(t, sess, "true")
	infos, err := b.Sessions(ctxT(t, time.Minute))
	if err != nil || len(infos) != 1 || infos[0].Mode != modeHelper {
		t.Errorf("Sessions() = %+v, %v; want one, mode %q", infos, err, modeHelper)
	}
	if c := b.Capabilities(); !c.Terminal || strings.Contains(c.Isolation, "process sessions") {
		t.Errorf("Capabilities() over the helper = %+v", c)
	}
}

// TestSessionLogCut: a followed log that ends before the command (a proxy cut it) is followed
// again from where it was, so output is neither lost nor repeated.
func TestSessionLogCut(t *testing.T) {
	f := newFake(t, testImage(t), time.Minute)
	b := newBackend(t, f, t.TempDir(), sessionChannel)
	sess := open(t, b, "cut")
	t.Cleanup(func() { b.Remove(ctxT(t, time.Minute), "cut") })
	run(t, sess, "true")
	f.mu.Lock()
	f.logCuts = 2
	f.mu.Unlock()
	follows := f.count("GetSessionCommandLogs")
	res := run(t, sess, "echo a; sleep 0.3; echo b >&2; sleep 0.3; echo c; exit 4")
	if res.ExitCode != 4 || res.Stdout != "a\nc\n" || res.Stderr != "b\n" {
		t.Errorf("Exec over a cut log = %d %q %q; want 4, a c, b", res.ExitCode, res.Stdout, res.Stderr)
	}
	if n := f.count("GetSessionCommandLogs") - follows; n < 3 {
		t.Errorf("the log was followed %d times; want at least 3 (two cuts)", n)
	}
}

// TestSessionHeartbeatKeepsCommand: over toolbox sessions, a command that runs longer than
// the heartbeat's silence window lives on while its caller does: the caller writes its
// heartbeat file, and the watchdog in the sandbox leaves it alone.
func TestSessionHeartbeatKeepsCommand(t *testing.T) {
	f := newFake(t, testImage(t), time.Minute)
	b := newBackend(t, f, t.TempDir(), sessionChannel) // a 5 s silence window, a beat every second
	sess := open(t, b, "beat")
	t.Cleanup(func() { b.Remove(ctxT(t, time.Minute), "beat") })
	uploads := f.count("UploadFile")
	res := run(t, sess, "sleep 8; echo survived")
	if res.ExitCode != 0 || res.Stdout != "survived\n" {
		t.Errorf("an 8 s command with a live caller = %d %q %q; want it to finish", res.ExitCode, res.Stdout, res.Stderr)
	}
	if n := f.count("UploadFile") - uploads; n < 4 {
		t.Errorf("%d heartbeats in 8 s; want about one a second", n)
	}
}
