package daytona

import (
	"testing"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/agent"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox/sandboxtest"
)

// TestConformance runs the whole suite through the backend against the fake Daytona: real
// HTTP validated against the OpenAPI documents, sandboxes as containers, the helper
// uploaded through the toolbox and spoken to over the PTY WebSocket.
func TestConformance(t *testing.T) {
	f := newFake(t, testImage(t), time.Minute)
	state := t.TempDir()
	sandboxtest.Run(t, sandboxtest.Options{
		NewBackend: func(t testing.TB) sandbox.Backend { return newBackend(t, f, state, nil) },
		// Each new session creates a sandbox and uploads the helper: seconds, as on Daytona.
		Slow: 2,
		// The helper's PTY session outlives the client: a gone caller is noticed when its
		// heartbeat stops.
		CallerGoneAfter: agent.BeatTimeout,
	})
}

func TestSmoke(t *testing.T) {
	f := newFake(t, testImage(t), time.Minute)
	b := newBackend(t, f, t.TempDir(), nil)
	sess := open(t, b, "smoke")
	t.Cleanup(func() { b.Remove(ctxT(t, time.Minute), "smoke") })
	res := run(t, sess, "echo hi; echo err >&2; cd /tmp; exit 3")
	if res.ExitCode != 3 || res.Stdout != "hi\n" || res.Stderr != "err\n" || res.Cwd != "/tmp" {
		t.Fatalf("Exec = %+v", res)
	}
}

// sessionChannel forces the toolbox-session fallback.
func sessionChannel(c *config.Config) { c.Daytona.Channel = config.DaytonaChannelSession }

// TestConformanceSessions runs the whole suite with every command in a toolbox process
// session of its own (daytona.channel: session): the fallback for sandboxes where the helper
// cannot run.
func TestConformanceSessions(t *testing.T) {
	f := newFake(t, testImage(t), time.Minute)
	state := t.TempDir()
	sandboxtest.Run(t, sandboxtest.Options{
		NewBackend:      func(t testing.TB) sandbox.Backend { return newBackend(t, f, state, sessionChannel) },
		Slow:            3,
		StateSavedWhole: "the toolbox-session fallback saves a session's state whole after each command (internal/shellwrap), so overlapping commands can overwrite each other's cd and export",
		CallerGoneAfter: 10 * time.Second, // the heartbeat's silence in newBackend, and a margin
	})
}

func TestSmokeSessions(t *testing.T) {
	f := newFake(t, testImage(t), time.Minute)
	b := newBackend(t, f, t.TempDir(), sessionChannel)
	sess := open(t, b, "smoke")
	t.Cleanup(func() { b.Remove(ctxT(t, time.Minute), "smoke") })
	res := run(t, sess, "echo hi; echo err >&2; cd /tmp; exit 3")
	if res.ExitCode != 3 || res.Stdout != "hi\n" || res.Stderr != "err\n" || res.Cwd != "/tmp" {
		t.Fatalf("Exec = %+v", res)
	}
	if f.count("CreatePtySession") != 0 || f.count("SessionExecuteCommand") != 1 {
		t.Errorf("PTYs %d, session commands %d; want 0 and 1", f.count("CreatePtySession"), f.count("SessionExecuteCommand"))
	}
}
