package mcpserver_test

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/hermes-sandbox/hermes-sandbox/internal/mcpserver"
)

// restart replaces e's server with a new one on the same backend, serving sessionName, as a
// restarted `hermes-sandbox mcp --session NAME` would.
func (e *env) restart(sessionName string) {
	e.t.Helper()
	e.srv.Close()
	srv, err := mcpserver.New(mcpserver.Options{Backend: e.backend, Config: e.cfg, SessionName: sessionName, Version: "test"})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { srv.Close() })
	e.srv = srv
}

// TestNamedSessionReattach is issue #36 item 5: a client of `mcp --session NAME` that
// disconnects, or comes back to a restarted server, finds its cwd, exports and running
// background job; a server with another name gets a sandbox session of its own.
func TestNamedSessionReattach(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.restart("agent1")
	cs, wait := e.connect(nil, nil)
	var out mcpserver.TerminalResult
	ok(t, cs, "terminal", map[string]any{"command": "mkdir -p sub && cd sub && export HS_R=7"}, &out)
	var job mcpserver.TerminalResult
	ok(t, cs, "terminal", map[string]any{"command": "sleep 6002", "background": true}, &job)
	if job.JobID == "" {
		t.Fatalf("background start = %+v; want a job id", job)
	}
	var info mcpserver.InfoResult
	ok(t, cs, "sandbox_info", nil, &info)
	if info.Session != mcpserver.SessionPrefix+"agent1" || !info.KeepSession {
		t.Errorf("sandbox_info session %q keep %v; want mcp-agent1, kept", info.Session, info.KeepSession)
	}
	wait()

	running := func(p mcpserver.ProcessResult) bool {
		return slices.ContainsFunc(p.Jobs, func(j mcpserver.Job) bool { return j.ID == job.JobID && j.Running })
	}
	check := func(when string) {
		t.Helper()
		cs, wait := e.connect(nil, nil)
		defer wait()
		ok(t, cs, "terminal", map[string]any{"command": "pwd; echo ${HS_R:-unset}"}, &out)
		if want := filepath.Join(e.work, "sub") + "\n7\n"; out.Stdout != want {
			t.Errorf("%s: the session has %q; want %q", when, out.Stdout, want)
		}
		var p mcpserver.ProcessResult
		ok(t, cs, "process", map[string]any{"action": "list"}, &p)
		if !running(p) {
			t.Errorf("%s: jobs = %+v; want %s running", when, p.Jobs, job.JobID)
		}
	}
	check("after a reconnect")
	e.restart("agent1")
	check("after a server restart")

	// Another name: a sandbox session of its own, which sees none of agent1's state.
	e.restart("agent2")
	other, _ := e.connect(nil, nil)
	ok(t, other, "terminal", map[string]any{"command": "pwd; echo ${HS_R:-unset}"}, &out)
	if out.Stdout != e.work+"\nunset\n" {
		t.Errorf("session agent2 sees %q; want its own cwd and no HS_R", out.Stdout)
	}
	var p mcpserver.ProcessResult
	ok(t, other, "process", map[string]any{"action": "list"}, &p)
	if running(p) {
		t.Errorf("session agent2 lists agent1's job: %+v", p.Jobs)
	}
	// Kill the job so nothing outlives the test.
	e.restart("agent1")
	cs, _ = e.connect(nil, nil)
	ok(t, cs, "process", map[string]any{"action": "kill", "id": job.JobID}, &p)
}

func TestNamedSessionBadName(t *testing.T) {
	e := newEnv(t, envOptions{})
	if _, err := mcpserver.New(mcpserver.Options{Backend: e.backend, SessionName: "../x"}); err == nil {
		t.Error("New with session name ../x succeeded; want an error")
	}
}
