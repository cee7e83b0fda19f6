//go:build unix

package vercel

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

func jwt(claims string) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"RS256"}`)) + "." + enc([]byte(claims)) + "." + enc([]byte("sig"))
}

func TestCredentials(t *testing.T) {
	tests := []struct {
		name    string
		mut     func(*config.Config)
		environ []string
		team    string
		project string
		errHas  string
	}{
		{"none", nil, nil, "", "", "VERCEL_TOKEN"},
		{"token without team", func(c *config.Config) { c.Vercel.Token = "t"; c.Vercel.ProjectID = "p" }, nil, "", "", "vercel.team_id"},
		{"token without project", func(c *config.Config) { c.Vercel.Token = "t"; c.Vercel.TeamID = "tm" }, nil, "", "", "vercel.project_id"},
		{"token", func(c *config.Config) { c.Vercel.Token = "t"; c.Vercel.TeamID = "tm"; c.Vercel.ProjectID = "p" }, nil, "tm", "p", ""},
		{"VERCEL_TOKEN env", func(c *config.Config) { c.Vercel.TeamID = "tm"; c.Vercel.ProjectID = "p" }, []string{"VERCEL_TOKEN=t"}, "tm", "p", ""},
		{"oidc claims", nil, []string{"VERCEL_OIDC_TOKEN=" + jwt(`{"owner_id":"team_o","project_id":"prj_o"}`)}, "team_o", "prj_o", ""},
		{"oidc without project claim", func(c *config.Config) { c.Vercel.ProjectID = "p" },
			[]string{"VERCEL_OIDC_TOKEN=" + jwt(`{"owner_id":"team_o"}`)}, "team_o", "p", ""},
		{"oidc not a jwt", nil, []string{"VERCEL_OIDC_TOKEN=abc"}, "", "", "not a JWT"},
		{"oidc without owner", nil, []string{"VERCEL_OIDC_TOKEN=" + jwt(`{"project_id":"p"}`)}, "", "", "owner_id"},
		{"bad api url", func(c *config.Config) {
			c.Vercel.Token = "t"
			c.Vercel.TeamID = "tm"
			c.Vercel.ProjectID = "p"
			c.Vercel.APIURL = "vercel.com"
		}, nil, "", "", "vercel.api_url"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := config.NewConfig()
			if tt.mut != nil {
				tt.mut(cfg)
			}
			b, err := NewWith(cfg.Vercel, cfg.BackendOptions(sandbox.FactoryOptions{StateDir: t.TempDir(), Environ: tt.environ}), Options{})
			if tt.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), tt.errHas) || !errors.Is(err, sandbox.ErrInvalidConfig) {
					t.Fatalf("NewWith() error = %v; want ErrInvalidConfig mentioning %q", err, tt.errHas)
				}
				return
			}
			if err != nil {
				t.Fatalf("NewWith() = %v", err)
			}
			if b.creds.teamID != tt.team || b.creds.project != tt.project {
				t.Errorf("team, project = %q, %q; want %q, %q", b.creds.teamID, b.creds.project, tt.team, tt.project)
			}
		})
	}
}

// TestCredentialsRefused: a wrong token or team is refused by the API, and the error says
// which setting to check.
func TestCredentialsRefused(t *testing.T) {
	testenv.AgentBinary(t)
	f := newFake(t, nil, "")
	for _, tt := range []struct {
		name string
		mut  func(*config.Config)
	}{
		{"wrong token", func(c *config.Config) { c.Vercel.Token = "nope" }},
		{"wrong team", func(c *config.Config) { c.Vercel.TeamID = "team_other" }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := &setup{f: f, state: t.TempDir()}
			b := s.backend(t, tt.mut)
			err := b.Check(ctxT(t, 30*time.Second))
			if !errors.Is(err, sandbox.ErrDenied) || !strings.Contains(err.Error(), "vercel.team_id") {
				t.Errorf("Check() = %v; want ErrDenied naming the settings to check", err)
			}
		})
	}
	s := &setup{f: f, state: t.TempDir()}
	if err := s.backend(t, nil).Check(ctxT(t, 30*time.Second)); err != nil {
		t.Errorf("Check() with the right credentials = %v", err)
	}
	if n := f.count(func(r string) bool { return strings.HasPrefix(r, "GET /v2/sandboxes") }); n != 1 {
		t.Errorf("authorised list requests = %d; want 1 (refused ones are not served)", n)
	}
}

// TestCommandStreamReconnects cuts a command's NDJSON stream, and then its first logs
// stream: the client picks the output up from the logs, delivers each byte once, learns
// the exit code, and never starts the command again.
func TestCommandStreamReconnects(t *testing.T) {
	s := newSetup(t)
	b := s.backend(t, nil)
	ctx := ctxT(t, 2*time.Minute)
	vm, _, _, err := b.ensure(ctx, "reconnect")
	if err != nil {
		t.Fatal(err)
	}
	s.f.mu.Lock()
	s.f.cutWaitAfter, s.f.cutLogsTimes = 2, 1
	s.f.mu.Unlock()
	script := `i=1; while [ $i -le 6 ]; do echo out$i; echo err$i >&2; sleep 0.05; i=$((i+1)); done; exit 3`
	var out, errOut bytes.Buffer
	cmd, err := b.api.RunCommand(ctx, vm.ID, RunCommandRequest{Command: "sh", Args: []string{"-c", script}}, &out, &errOut, nil)
	if err != nil {
		t.Fatalf("RunCommand() = %v", err)
	}
	var wantOut, wantErr strings.Builder
	for i := 1; i <= 6; i++ {
		fmt.Fprintf(&wantOut, "out%d\n", i)
		fmt.Fprintf(&wantErr, "err%d\n", i)
	}
	if cmd.ExitCode == nil || *cmd.ExitCode != 3 || out.String() != wantOut.String() || errOut.String() != wantErr.String() {
		t.Errorf("RunCommand() = exit %v, %q, %q; want 3, %q, %q", cmd.ExitCode, out.String(), errOut.String(), wantOut.String(), wantErr.String())
	}
	s.f.mu.Lock()
	starts := s.f.cmdStarts
	s.f.mu.Unlock()
	if starts != 1 {
		t.Errorf("the command was started %d times; want 1", starts)
	}
	if n := s.f.count(func(r string) bool {
		return strings.HasPrefix(r, "GET /v2/sandboxes/sessions/"+vm.ID+"/cmd/"+cmd.ID+"/logs")
	}); n < 2 {
		t.Errorf("logs requests = %d; want at least 2 (one cut, one complete)", n)
	}
}

// TestLifetimeExtendedWhileInUse: a command that runs past vercel.timeout still finishes,
// because the session extends the VM's lifetime while it is in use.
func TestLifetimeExtendedWhileInUse(t *testing.T) {
	s := newSetup(t)
	b := s.backend(t, func(c *config.Config) { c.Vercel.Timeout = 6 * time.Second })
	sess, err := b.Open(ctxT(t, time.Minute), "extend")
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	run(t, sess, "true")
	start := time.Now()
	res := run(t, sess, "sleep 10; echo done")
	if res.ExitCode != 0 || res.Stdout != "done\n" || res.EnvironmentRecreated {
		t.Fatalf("long command = %d %q recreated %v; want 0, done, false", res.ExitCode, res.Stdout, res.EnvironmentRecreated)
	}
	if time.Since(start) < 10*time.Second {
		t.Fatalf("the command did not run its 10 s")
	}
	s.f.mu.Lock()
	n := s.f.extends
	s.f.mu.Unlock()
	if n == 0 {
		t.Errorf("no extend-timeout request; the VM outlived its 6 s timeout some other way")
	}
}

// TestResumeAndRecreate: a stopped sandbox is resumed with its files (not recreated); a
// deleted one is made anew and the result says so.
func TestResumeAndRecreate(t *testing.T) {
	s := newSetup(t)
	ctx := ctxT(t, 3*time.Minute)
	b := s.backend(t, nil)
	sess, _ := b.Open(ctx, "resume")
	run(t, sess, "echo kept > /vercel/sandbox/f; cd /tmp")
	sess.Close()
	cur := s.f.current("resume")
	s.f.stop(cur)

	b2 := s.backend(t, nil)
	sess2, _ := b2.Open(ctx, "resume")
	res := run(t, sess2, "cat /vercel/sandbox/f; pwd")
	if res.Stdout != "kept\n/tmp\n" || res.EnvironmentRecreated {
		t.Errorf("after resume = %q recreated %v; want kept, /tmp, false", res.Stdout, res.EnvironmentRecreated)
	}
	if s.f.current("resume") == cur {
		t.Errorf("the sandbox was not resumed in a new VM session")
	}
	sess2.Close()

	if err := b2.api.DeleteSandbox(ctx, b2.sandboxName("resume")); err != nil {
		t.Fatal(err)
	}
	b3 := s.backend(t, nil)
	sess3, _ := b3.Open(ctx, "resume")
	defer sess3.Close()
	res = run(t, sess3, "cat /vercel/sandbox/f 2>/dev/null || echo gone")
	if res.Stdout != "gone\n" || !res.EnvironmentRecreated {
		t.Errorf("after deletion = %q recreated %v; want gone, true", res.Stdout, res.EnvironmentRecreated)
	}
}

// TestSnapshotRestore: a snapshot is restored when the sandbox is lost, with or without a
// runtime set; a restore that fails starts a fresh sandbox and keeps the snapshot and its
// record (Hermes #74753 lost both).
func TestSnapshotRestore(t *testing.T) {
	for _, runtime := range []string{"node22", ""} {
		t.Run("runtime="+runtime, func(t *testing.T) {
			s := newSetup(t)
			ctx := ctxT(t, 3*time.Minute)
			mut := func(c *config.Config) { c.Vercel.Runtime = runtime }
			b := s.backend(t, mut)
			sess, _ := b.Open(ctx, "snap")
			run(t, sess, "echo saved > /vercel/sandbox/f")
			ref, err := b.Snapshot(ctx, "snap")
			if err != nil {
				t.Fatalf("Snapshot() = %v", err)
			}
			snapID := ref.ID
			sess.Close()
			lose := func() {
				t.Helper()
				if err := b.api.DeleteSandbox(ctx, b.sandboxName("snap")); err != nil {
					t.Fatal(err)
				}
			}
			lose()
			s.f.mu.Lock()
			s.f.failSnapshots = true
			s.f.mu.Unlock()
			sess2, _ := s.backend(t, mut).Open(ctx, "snap")
			res := run(t, sess2, "cat /vercel/sandbox/f 2>/dev/null || echo fresh")
			sess2.Close()
			if res.Stdout != "fresh\n" || !res.EnvironmentRecreated {
				t.Errorf("after a failed restore = %q recreated %v; want fresh, true", res.Stdout, res.EnvironmentRecreated)
			}
			if rec, _, _ := b.records.Read("snap"); len(rec.Snapshots) != 1 || rec.Snapshots[0] != snapID {
				t.Fatalf("record after a failed restore = %+v; want snapshot %s kept", rec, snapID)
			}
			if got, err := b.api.GetSnapshot(ctx, snapID); err != nil || got.Status != "created" {
				t.Fatalf("snapshot after a failed restore = %+v, %v; want it still created", got, err)
			}
			lose()
			s.f.mu.Lock()
			s.f.failSnapshots = false
			s.f.mu.Unlock()
			writes := s.f.count(func(r string) bool { return strings.HasSuffix(r, "/fs/write") })
			sess3, _ := s.backend(t, mut).Open(ctx, "snap")
			defer sess3.Close()
			res = run(t, sess3, "cat /vercel/sandbox/f")
			if res.Stdout != "saved\n" || !res.EnvironmentRecreated {
				t.Errorf("after restoring = %q recreated %v; want saved, true", res.Stdout, res.EnvironmentRecreated)
			}
			if n := s.f.count(func(r string) bool { return strings.HasSuffix(r, "/fs/write") }) - writes; n != 0 {
				t.Errorf("restoring uploaded the helper again (%d fs/write); the snapshot holds it", n)
			}
		})
	}
}

// TestNetworkPolicyAndTags: a new sandbox is deny-all unless vercel.network_allow lists
// domains, persistent, and tagged for gc; gc touches only tagged sandboxes of this owner.
func TestNetworkPolicyAndTags(t *testing.T) {
	s := newSetup(t)
	ctx := ctxT(t, 2*time.Minute)
	for _, tt := range []struct {
		session string
		allow   []string
		want    string
	}{{"deny", nil, "deny-all"}, {"allow", []string{"api.github.com"}, "custom"}} {
		b := s.backend(t, func(c *config.Config) { c.Vercel.NetworkAllow = tt.allow })
		if _, _, _, err := b.ensure(ctx, tt.session); err != nil {
			t.Fatal(err)
		}
		sb := s.f.sandboxByTag(tt.session)
		s.f.mu.Lock()
		mode, persistent, tags := sb.policy["mode"], sb.persistent, sb.tags
		s.f.mu.Unlock()
		if mode != tt.want || !persistent || tags[tagMarker] != "1" || tags[tagOwner] == "" {
			t.Errorf("sandbox %s: policy %v persistent %v tags %v; want %s, true, tagged", tt.session, mode, persistent, tags, tt.want)
		}
		if tt.allow != nil && !b.Capabilities().Network {
			t.Errorf("Capabilities().Network = false with network_allow set")
		}
	}
	b := s.backend(t, nil)
	// A sandbox that is not ours (no tags) is never collected.
	if _, err := b.api.CreateSandbox(ctx, CreateSandboxRequest{Name: "someone-else", Runtime: "node22", Persistent: true}); err != nil {
		t.Fatal(err)
	}
	s.f.stop(s.f.current("deny"))
	// Without --idle there is no idle timeout: a stopped sandbox stays.
	if rep, err := b.Collect(ctx, sandbox.GCOptions{}); err != nil || len(rep.Removed) != 0 ||
		!slices.ContainsFunc(rep.Kept, func(it sandbox.GCItem) bool {
			return strings.HasPrefix(it.Name, "deny ") && strings.Contains(it.Reason, "--idle")
		}) {
		t.Errorf("GC without --idle = %+v, %v; want the stopped session deny kept, saying --idle", rep, err)
	}
	rep, err := b.Collect(ctx, sandbox.GCOptions{IdleTimeout: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Removed) != 1 || !strings.HasPrefix(rep.Removed[0].Name, "deny ") {
		t.Errorf("GC removed %+v; want only the stopped session deny", rep.Removed)
	}
	if _, err := b.api.GetSandbox(ctx, "someone-else", false); err != nil {
		t.Errorf("GC touched an untagged sandbox: %v", err)
	}
}

// TestConcurrentCreateJoins: processes that create the same new session's sandbox at the
// same moment all end up in the one that won. The others are refused with 409 while it is
// still being made, find it by name, pending, and wait for it to run: none fails, none
// makes a second sandbox or VM session.
func TestConcurrentCreateJoins(t *testing.T) {
	s := newSetup(t)
	ctx := ctxT(t, 2*time.Minute)
	const n = 5
	arrived, gate, boot := make(chan struct{}, n), make(chan struct{}), make(chan struct{})
	s.f.mu.Lock()
	s.f.createArrived, s.f.createGate, s.f.bootGate, s.f.conflicts = arrived, gate, boot, make(chan string, n)
	s.f.mu.Unlock()
	// Closed once each, here or when the test stops early, so no handler is left waiting.
	openGate, openBoot := sync.OnceFunc(func() { close(gate) }), sync.OnceFunc(func() { close(boot) })
	defer openBoot()
	defer openGate()

	type result struct {
		vm    *VMSession
		fresh bool
		err   error
	}
	results := make(chan result, n)
	b := s.backend(t, nil) // for the test's own lookup
	for range n {
		b := s.backend(t, nil) // each like a new process
		go func() {
			vm, _, fresh, err := b.ensure(ctx, "join")
			results <- result{vm, fresh, err}
		}()
	}
	wait := func(what string, ch <-chan struct{}) {
		t.Helper()
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		}
	}
	// Every process found no sandbox and sent its create; let them all through at once.
	for range n {
		wait("the creates", arrived)
	}
	openGate()
	for range n - 1 {
		select {
		case <-s.f.conflicts:
		case <-ctx.Done():
			t.Fatalf("waiting for %d creates refused as duplicates: %v", n-1, ctx.Err())
		}
	}
	// The winner's sandbox is still being made: the API shows it pending, with its session.
	got, err := b.api.GetSandbox(ctx, b.sandboxName("join"), true)
	if err != nil || got.Session.Status != StatusPending || got.Session.ID == "" || got.Sandbox.CurrentSessionID != got.Session.ID {
		t.Errorf("GetSandbox() while it is created = %+v, %v; want its session, pending", got, err)
	}
	openBoot()

	var ids []string
	fresh := 0
	for range n {
		var r result
		select {
		case r = <-results:
		case <-ctx.Done():
			t.Fatalf("waiting for ensure: %v", ctx.Err())
		}
		if r.err != nil {
			t.Errorf("ensure() = %v; want the sandbox another process created", r.err)
			continue
		}
		if r.vm.Status != StatusRunning {
			t.Errorf("ensure() = VM session %s %s; want running", r.vm.ID, r.vm.Status)
		}
		if r.fresh {
			fresh++
		}
		ids = append(ids, r.vm.ID)
	}
	if t.Failed() {
		return
	}
	for _, id := range ids {
		if id != ids[0] {
			t.Errorf("ensure() VM sessions = %q; want one, shared", ids)
			break
		}
	}
	if fresh != 1 {
		t.Errorf("ensure() fresh in %d processes; want 1 (only the creator uploads the helper first)", fresh)
	}
	s.f.mu.Lock()
	sandboxes, sessions := len(s.f.sandboxes), len(s.f.sessions)
	s.f.mu.Unlock()
	if sandboxes != 1 || sessions != 1 {
		t.Errorf("the fake holds %d sandboxes and %d VM sessions; want 1 and 1", sandboxes, sessions)
	}
}
