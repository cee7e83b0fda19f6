//go:build unix

package modal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	modalsdk "github.com/modal-labs/modal-client/go"
	pb "github.com/modal-labs/modal-client/go/proto/modal_proto"
	"google.golang.org/grpc/codes"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestReuseAcrossProcesses: a second backend on the same state directory (a later CLI run)
// finds the session's sandbox by name, or by its tags when the name lookup fails, and the
// shell state carries over; nothing is created twice.
func TestReuseAcrossProcesses(t *testing.T) {
	f := newFake(t)
	state := t.TempDir()
	b1 := newBackend(t, f, state, nil)
	s1 := open(t, b1, "reuse")
	run(t, s1, "echo $$ > /tmp/first-pid; mkdir -p /tmp/r && cd /tmp/r && export HERMES_R=kept")
	s1.Close()
	b1.Close()

	b2 := newBackend(t, f, state, nil)
	s2 := open(t, b2, "reuse")
	res := run(t, s2, `cat /tmp/first-pid >/dev/null && pwd && echo "$HERMES_R"`)
	if res.Stdout != "/tmp/r\nkept\n" || res.EnvironmentRecreated {
		t.Errorf("second process: stdout %q, recreated %v; want /tmp/r, kept, false", res.Stdout, res.EnvironmentRecreated)
	}
	s2.Close()
	b2.Close()

	// The name lookup fails (as for a sandbox an older version named differently): the tags find it.
	f.failNext("SandboxGetFromName", codes.NotFound)
	b3 := newBackend(t, f, state, nil)
	s3 := open(t, b3, "reuse")
	if res := run(t, s3, "cat /tmp/first-pid >/dev/null && echo same"); res.Stdout != "same\n" || res.EnvironmentRecreated {
		t.Errorf("after the tag lookup: %q recreated=%v; want the same sandbox", res.Stdout, res.EnvironmentRecreated)
	}
	if n := f.count("SandboxCreate"); n != 1 {
		t.Errorf("SandboxCreate called %d times; want 1", n)
	}
	if n := f.count("SandboxList"); n == 0 {
		t.Errorf("the tag lookup (SandboxList) was not used")
	}
	// The sandbox is named and tagged as documented, with both timeouts set.
	f.mu.Lock()
	req := f.creates[0]
	f.mu.Unlock()
	def := req.GetDefinition()
	if want := b3.sandboxName("reuse"); def.GetName() != want {
		t.Errorf("sandbox name = %q; want %q", def.GetName(), want)
	}
	if def.GetTimeoutSecs() != 600 || !def.HasIdleTimeoutSecs() || def.GetIdleTimeoutSecs() != 300 {
		t.Errorf("timeouts = %d s, idle %d s (set %v); want 600 and 300", def.GetTimeoutSecs(), def.GetIdleTimeoutSecs(), def.HasIdleTimeoutSecs())
	}
	if def.GetNetworkAccess().GetNetworkAccessType() != pb.NetworkAccess_BLOCKED {
		t.Errorf("network access = %v; want BLOCKED by default", def.GetNetworkAccess().GetNetworkAccessType())
	}
	tags := map[string]string{}
	for _, tg := range req.GetTags() {
		tags[tg.GetTagName()] = tg.GetTagValue()
	}
	if tags[tagOurs] != "1" || tags[tagSession] != "reuse" || tags[tagOwner] != b3.owner {
		t.Errorf("tags = %v; want %s=1, %s=reuse, %s=%s", tags, tagOurs, tagSession, tagOwner, b3.owner)
	}
}

// TestNameTakenOnce: like Modal, the fake lets one running sandbox hold a name within an App
// even when the creates arrive at the same moment: one succeeds and the others are refused
// with ALREADY_EXISTS (the SDK's AlreadyExistsError). A backend whose create is refused uses
// the holder instead of making a second sandbox.
func TestNameTakenOnce(t *testing.T) {
	f := newFake(t)
	b := newBackend(t, f, t.TempDir(), nil)
	ctx := ctxT(t, 2*time.Minute)
	c, app, err := b.appOnly(ctx)
	if err != nil {
		t.Fatal(err)
	}
	img, err := b.image(ctx, c, app)
	if err != nil {
		t.Fatal(err)
	}
	// The holder carries the name but not the session's tags, so only the name can find it.
	params := b.createParams("taken")
	params.Tags = map[string]string{"other": "1"}
	const n = 5
	var wg sync.WaitGroup
	made := make(chan string, n)
	refused := make(chan modalsdk.AlreadyExistsError, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sb, err := c.Sandboxes.Create(ctx, app, img, params)
			var exists modalsdk.AlreadyExistsError
			switch {
			case err == nil:
				made <- sb.SandboxID
			case errors.As(err, &exists):
				refused <- exists
			default:
				t.Errorf("Create(%q) = %v; want a sandbox or AlreadyExistsError", params.Name, err)
			}
		}()
	}
	wg.Wait()
	close(made)
	close(refused)
	if len(made) != 1 || len(refused) != n-1 {
		t.Fatalf("%d simultaneous creates of one name: %d made, %d refused; want 1 and %d", n, len(made), len(refused), n-1)
	}
	holder := <-made
	if e := <-refused; e.Exception != "Sandbox with this name already exists" {
		t.Errorf("refusal = %q; want %q", e.Exception, "Sandbox with this name already exists")
	}

	// The name lookup misses once and the tags find nothing, so the backend creates, is
	// refused, and looks the holder up by name.
	creates := f.count("SandboxCreate")
	f.failNext("SandboxGetFromName", codes.NotFound)
	s := open(t, b, "taken")
	if res := run(t, s, "echo in-holder"); res.Stdout != "in-holder\n" || res.EnvironmentRecreated {
		t.Errorf("after the refused create: %q recreated=%v; want in-holder, false", res.Stdout, res.EnvironmentRecreated)
	}
	if got := f.count("SandboxCreate") - creates; got != 1 {
		t.Errorf("SandboxCreate called %d more times; want 1 (refused)", got)
	}
	var named []string
	for _, sb := range f.running() {
		if sb.name == params.Name {
			named = append(named, sb.id)
		}
	}
	if len(named) != 1 || named[0] != holder {
		t.Errorf("running sandboxes named %q = %v; want only the holder %s", params.Name, named, holder)
	}
	if rec, _, _ := b.records.Read("taken"); rec.SandboxID != holder {
		t.Errorf("session record names %q; want the holder %s", rec.SandboxID, holder)
	}
}

// TestSandboxNames: names stay within Modal's rules for every valid session name.
func TestSandboxNames(t *testing.T) {
	b, err := NewWith(config.NewConfig().Modal, sandbox.FactoryOptions{StateDir: t.TempDir()}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", 63)
	seen := map[string]bool{}
	for _, s := range []string{"default", "a.b_c-d", long, long[:62] + "y"} {
		n := b.sandboxName(s)
		if len(n) > 64 || !objectName.MatchString(n) || seen[n] {
			t.Errorf("sandboxName(%q) = %q: longer than 64, bad characters or not unique", s, n)
		}
		seen[n] = true
	}
}

// TestTimeoutRecreates: when the sandbox's lifetime (modal.timeout) ends, the next command
// makes a new one and says so; the old files are gone. The fake ends the sandbox the way its
// lifetime timer does (status TIMEOUT) when the test says so, so a slow first command on a
// loaded machine cannot outlive a short lifetime.
func TestTimeoutRecreates(t *testing.T) {
	f := newFake(t)
	b := newBackend(t, f, t.TempDir(), func(c *config.Config) { c.Modal.Timeout = 7 * time.Minute })
	sess := open(t, b, "ttl")
	if res := run(t, sess, "touch /tmp/mark && echo ok"); res.Stdout != "ok\n" || res.EnvironmentRecreated {
		t.Fatalf("first command = %+v", res)
	}
	first := f.sandboxByName(b.sandboxName("ttl"))
	if first == nil {
		t.Fatal("no running sandbox after the first command")
	}
	if got := first.def.GetTimeoutSecs(); got != 420 {
		t.Errorf("sandbox created with timeout %ds; want modal.timeout's 420", got)
	}
	f.terminate(first, pb.GenericResult_GENERIC_STATUS_TIMEOUT)
	res := run(t, sess, "ls /tmp/mark 2>/dev/null; echo after")
	if !res.EnvironmentRecreated || res.Stdout != "after\n" {
		t.Errorf("after the timeout: stdout %q, recreated %v; want a fresh sandbox (no /tmp/mark) and recreated=true", res.Stdout, res.EnvironmentRecreated)
	}
	if res := run(t, sess, "true"); res.EnvironmentRecreated {
		t.Errorf("recreated is reported more than once")
	}
	// A later process sees the same: its record names a sandbox that is gone.
	second := f.sandboxByName(b.sandboxName("ttl"))
	if second == nil || second == first {
		t.Fatal("no new sandbox after the timeout")
	}
	f.terminate(second, pb.GenericResult_GENERIC_STATUS_TIMEOUT)
	b2 := newBackend(t, f, b.opts.StateDir, nil)
	if res := run(t, open(t, b2, "ttl"), "true"); !res.EnvironmentRecreated {
		t.Errorf("a new process after the timeout did not report environment_recreated")
	}
}

// TestIdleTimeout: a session nobody uses is ended by Modal after modal.idle_timeout once its
// helper has gone (closing the session ends it).
func TestIdleTimeout(t *testing.T) {
	f := newFake(t)
	b := newBackend(t, f, t.TempDir(), func(c *config.Config) { c.Modal.IdleTimeout = 2 * time.Second })
	sess := open(t, b, "idle")
	run(t, sess, "true")
	sb := f.sandboxByName(b.sandboxName("idle"))
	time.Sleep(3 * time.Second) // longer than the idle timeout, with the helper attached
	if !sb.running() {
		t.Fatal("the sandbox ended while its session's helper was attached")
	}
	sess.Close()
	waitFor(t, 30*time.Second, "the idle sandbox to end", func() bool { return !sb.running() })
}

// TestCancelKeepsSandbox: cancelling a command kills its process tree inside the sandbox and
// leaves the sandbox (and its files) alone.
func TestCancelKeepsSandbox(t *testing.T) {
	f := newFake(t)
	b := newBackend(t, f, t.TempDir(), nil)
	sess := open(t, b, "cancel")
	run(t, sess, "echo keep > /tmp/keep")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan struct{})
	var once sync.Once
	out := writerFunc(func(p []byte) (int, error) {
		if bytes.Contains(p, []byte("started")) {
			once.Do(func() { close(started) })
		}
		return len(p), nil
	})
	done := make(chan error, 1)
	var res *sandbox.Result
	go func() {
		var err error
		res, err = sess.Exec(ctx, sandbox.Command{Script: "sleep 617 & echo started; wait", Stdout: out})
		done <- err
	}()
	select {
	case <-started:
	case <-time.After(time.Minute):
		t.Fatal("the command did not start")
	}
	// Prove the check can see the process before asserting it is gone ("started" may come
	// before the background shell has become sleep, so look until it has).
	for deadline := time.Now().Add(30 * time.Second); ; {
		r := run(t, sess, "ps -o args | grep -c '^sleep 617'")
		if strings.TrimSpace(r.Stdout) == "1" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ps sees %q sleeps before the cancel; want 1", r.Stdout)
		}
	}
	cancel()
	err := <-done
	if !errors.Is(err, context.Canceled) || res == nil || res.ExitCode != sandbox.ExitInterrupted {
		t.Fatalf("cancelled Exec = %+v, %v; want exit 130 and context.Canceled", res, err)
	}
	r := run(t, sess, "ps -o args | grep -c '^sleep 617'; cat /tmp/keep")
	if r.Stdout != "0\nkeep\n" || r.EnvironmentRecreated {
		t.Errorf("after the cancel: %q recreated=%v; want no sleep left and the file kept", r.Stdout, r.EnvironmentRecreated)
	}
	if n := len(f.running()); n != 1 {
		t.Errorf("%d sandboxes run; want the one, untouched", n)
	}
}

type writerFunc func([]byte) (int, error)

func (w writerFunc) Write(p []byte) (int, error) { return w(p) }

// TestGPU: GPU strings are checked as the SDK reads them, before anything is created; an
// unschedulable GPU says so.
func TestGPU(t *testing.T) {
	for _, tc := range []struct {
		in    string
		typ   string
		count int
		ok    bool
	}{
		{"", "", 0, true}, {"T4", "T4", 1, true}, {"a100:2", "A100", 2, true}, {"A100-80GB:4", "A100-80GB", 4, true},
		{"A100:0", "", 0, false}, {"A100:x", "", 0, false}, {"A100:-1", "", 0, false}, {":2", "", 0, false}, {"T4 ", "", 0, false},
	} {
		typ, n, err := ParseGPU(tc.in)
		if (err == nil) != tc.ok || typ != tc.typ || n != tc.count {
			t.Errorf("ParseGPU(%q) = %q, %d, %v; want %q, %d, ok=%v", tc.in, typ, n, err, tc.typ, tc.count, tc.ok)
		}
		if err != nil && (!errors.Is(err, sandbox.ErrInvalidConfig) || !strings.Contains(err.Error(), "A100:2")) {
			t.Errorf("ParseGPU(%q) error %q does not show the form to use", tc.in, err)
		}
	}
	f := newFake(t)
	bad := newBackend(t, f, t.TempDir(), func(c *config.Config) { c.Modal.GPU = "A100:0" })
	if _, err := bad.Open(t.Context(), "gpu"); !errors.Is(err, sandbox.ErrInvalidConfig) {
		t.Errorf("Open with modal.gpu A100:0 = %v; want ErrInvalidConfig", err)
	}
	if f.count("SandboxCreate") != 0 {
		t.Errorf("a bad GPU string reached Modal")
	}
	// H100: the fake has none free.
	b := newBackend(t, f, t.TempDir(), func(c *config.Config) { c.Modal.GPU = "H100" })
	sess := open(t, b, "gpu")
	_, err := sess.Exec(ctxT(t, time.Minute), sandbox.Command{Script: "true"})
	if !errors.Is(err, sandbox.ErrUnavailable) || !strings.Contains(err.Error(), `GPU "H100"`) {
		t.Errorf("Exec with an unschedulable GPU = %v; want ErrUnavailable naming the GPU", err)
	}
	// T4: one is free; the request carries it.
	b = newBackend(t, f, t.TempDir(), func(c *config.Config) { c.Modal.GPU = "t4" })
	run(t, open(t, b, "gpu"), "true")
	f.mu.Lock()
	g := f.creates[len(f.creates)-1].GetDefinition().GetResources().GetGpuConfig()
	f.mu.Unlock()
	if g.GetGpuType() != "T4" || g.GetCount() != 1 {
		t.Errorf("GPU in the create request = %q × %d; want T4 × 1", g.GetGpuType(), g.GetCount())
	}
}

// TestArgvSize: the helper channel carries command lines far over Modal's 64 KiB exec limit.
func TestArgvSize(t *testing.T) {
	f := newFake(t)
	b := newBackend(t, f, t.TempDir(), nil)
	sess := open(t, b, "argv")
	big := strings.Repeat("a", 100_000)
	res, err := sess.Exec(ctxT(t, time.Minute), sandbox.Command{Argv: []string{"sh", "-c", `printf %s "$1" | wc -c`, "sh", big}})
	if err != nil || strings.TrimSpace(res.Stdout) != "100000" {
		t.Errorf("100 KB argv over the helper = %+v, %v; want 100000", res, err)
	}
}

// TestCredentials: missing and rejected tokens give errors that say what to do; the profile in
// ~/.modal.toml is used when nothing else is set, and the configuration beats it.
func TestCredentials(t *testing.T) {
	f := newFake(t)
	home := t.TempDir()
	mk := func(cfg *config.Config, env ...string) *Backend {
		b, err := NewWith(cfg.Modal, cfg.BackendOptions(sandbox.FactoryOptions{StateDir: t.TempDir(), Environ: append([]string{"HOME=" + home}, env...)}), Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	// None anywhere.
	cfg := config.NewConfig()
	cfg.Modal.ServerURL = f.url()
	_, err := mk(cfg).Open(t.Context(), "c")
	if !errors.Is(err, ErrNoCredentials) || !errors.Is(err, sandbox.ErrInvalidConfig) || !strings.Contains(err.Error(), "setup modal") {
		t.Errorf("Open without credentials = %v; want ErrNoCredentials naming `setup modal`", err)
	}
	// Rejected by Modal.
	cfg = fakeConfig(f)
	cfg.Modal.TokenSecret = "as-wrong"
	sess := open(t, mk(cfg), "c")
	_, err = sess.Exec(ctxT(t, time.Minute), sandbox.Command{Script: "true"})
	if !errors.Is(err, sandbox.ErrInvalidConfig) || !strings.Contains(err.Error(), "rejected the token") || strings.Contains(err.Error(), "as-wrong") {
		t.Errorf("Exec with a wrong secret = %v; want ErrInvalidConfig saying the token was rejected, without the secret", err)
	}
	// ~/.modal.toml, active profile.
	toml := fmt.Sprintf("[other]\ntoken_id = \"ak-no\"\ntoken_secret = \"as-no\"\n\n[work]\nactive = true\nserver_url = %q\ntoken_id = %q\ntoken_secret = %q\n", f.url(), f.tokenID, f.tokenSecret)
	if err := os.WriteFile(filepath.Join(home, ".modal.toml"), []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	b := mk(config.NewConfig())
	if !strings.Contains(b.creds.Source, `profile "work"`) {
		t.Errorf("credentials source = %q; want the work profile", b.creds.Source)
	}
	if res := run(t, open(t, b, "toml"), "echo via-profile"); res.Stdout != "via-profile\n" {
		t.Errorf("Exec with the profile = %q", res.Stdout)
	}
	// MODAL_PROFILE picks another profile: its (wrong) token is used and rejected.
	b = mk(config.NewConfig(), "MODAL_PROFILE=other")
	if b.creds.TokenID != "ak-no" {
		t.Errorf("MODAL_PROFILE=other used token %q", b.creds.TokenID)
	}
	// The configuration's token beats the profile.
	cfg = fakeConfig(f)
	cfg.Modal.ServerURL = ""
	b = mk(cfg, "MODAL_PROFILE=work")
	if b.creds.TokenID != f.tokenID || b.creds.ServerURL != f.url() || strings.Contains(b.creds.Source, "profile") {
		t.Errorf("config token with a profile present: %+v", b.creds)
	}
}

// TestLostReplyRunsOnce: when the reply to starting an exec is lost, the SDK retries with the
// same exec id and the command still runs once; idempotent lookups are retried through
// network errors.
func TestLostReplyRunsOnce(t *testing.T) {
	f := newFake(t)
	b := newBackend(t, f, t.TempDir(), nil)
	sess := open(t, b, "net")
	f.failNext("AppGetOrCreate", codes.Unavailable, codes.Unavailable)
	f.loseReplies("TaskExecStart", 1)
	res := run(t, sess, "ps -o args | grep -c '[.]hermes-sandbox/agent-.* serve'")
	if strings.TrimSpace(res.Stdout) != "1" {
		t.Errorf("helpers running after a lost start reply = %q; want 1", res.Stdout)
	}
	if f.count("TaskExecStart") < 2 {
		t.Errorf("the lost reply was not retried")
	}
}

// TestSnapshotRestore: a snapshot taken with `sessions snapshot` is where a recreated sandbox
// starts when modal.restore_from_snapshot is on.
func TestSnapshotRestore(t *testing.T) {
	f := newFake(t)
	state := t.TempDir()
	b := newBackend(t, f, state, func(c *config.Config) { c.Modal.RestoreFromSnapshot = true })
	sess := open(t, b, "snap")
	run(t, sess, "mkdir -p /srv && echo kept > /srv/data")
	ref, err := b.Snapshot(ctxT(t, 2*time.Minute), "snap")
	if err != nil || !strings.HasPrefix(ref.ID, "im-") {
		t.Fatalf("Snapshot = %+v, %v", ref, err)
	}
	f.terminate(f.sandboxByName(b.sandboxName("snap")), pb.GenericResult_GENERIC_STATUS_TERMINATED)
	res := run(t, sess, "cat /srv/data")
	if res.Stdout != "kept\n" || !res.EnvironmentRecreated {
		t.Errorf("after restore: %q recreated=%v; want the snapshot's file and recreated=true", res.Stdout, res.EnvironmentRecreated)
	}
	if _, err := b.Snapshot(ctxT(t, time.Minute), "none"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Snapshot of a session without a sandbox = %v; want ErrNotFound", err)
	}
}

// TestGC: gc terminates only sandboxes this tool tagged: idle ones and those whose owner no
// longer has them; another state directory's sandboxes and untagged ones stay.
func TestGC(t *testing.T) {
	f := newFake(t)
	b := newBackend(t, f, t.TempDir(), nil)
	other := newBackend(t, f, t.TempDir(), nil)
	run(t, open(t, b, "live"), "true")
	run(t, open(t, b, "orphan"), "true")
	run(t, open(t, other, "theirs"), "true")
	b.records.Drop("orphan") // its owner forgot it (state directory wiped)
	rep, err := b.Collect(ctxT(t, time.Minute), sandbox.GCOptions{IdleTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Removed) != 1 || !strings.Contains(rep.Removed[0].Name, "(session orphan)") {
		t.Errorf("GC removed %+v; want only the orphan", rep.Removed)
	}
	for _, n := range []string{b.sandboxName("live"), other.sandboxName("theirs")} {
		if f.sandboxByName(n) == nil {
			t.Errorf("GC terminated %s", n)
		}
	}
	time.Sleep(10 * time.Millisecond)
	rep, err = b.Collect(ctxT(t, time.Minute), sandbox.GCOptions{IdleTimeout: time.Millisecond, DryRun: true})
	if err != nil || len(rep.Removed) != 1 || f.sandboxByName(b.sandboxName("live")) == nil {
		t.Errorf("GC --dry-run reported %+v, %v and must terminate nothing", rep.Removed, err)
	}
	rep, err = b.Collect(ctxT(t, time.Minute), sandbox.GCOptions{IdleTimeout: time.Millisecond})
	if err != nil || len(rep.Removed) != 1 || !strings.Contains(rep.Removed[0].Name, "(session live)") {
		t.Errorf("GC with a tiny idle timeout removed %+v, %v; want live", rep.Removed, err)
	}
	if f.sandboxByName(other.sandboxName("theirs")) == nil {
		t.Errorf("GC terminated another state directory's sandbox")
	}
	if res := run(t, open(t, b, "live"), "true"); !res.EnvironmentRecreated {
		t.Errorf("the first command after GC did not report environment_recreated")
	}
}

// TestSessionsAndRemove: sessions lists the running sandboxes; rm terminates one.
func TestSessionsAndRemove(t *testing.T) {
	f := newFake(t)
	b := newBackend(t, f, t.TempDir(), nil)
	sess := open(t, b, "listed")
	run(t, sess, "true")
	list, err := b.Sessions(ctxT(t, time.Minute))
	if err != nil || len(list) != 1 || list[0].Name != "listed" || !strings.HasPrefix(list[0].ID, "sb-") {
		t.Fatalf("Sessions() = %+v, %v", list, err)
	}
	sess.Close()
	if err := b.Remove(ctxT(t, time.Minute), "listed"); err != nil {
		t.Fatal(err)
	}
	if f.sandboxByName(b.sandboxName("listed")) != nil {
		t.Errorf("the sandbox still runs after Remove")
	}
	if err := b.Remove(ctxT(t, time.Minute), "listed"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("second Remove = %v; want ErrNotFound", err)
	}
}

// TestCheck: doctor's check proves the token with a real call without creating anything, and
// says what to do when Modal rejects it or cannot be reached.
func TestCheck(t *testing.T) {
	f := newFake(t)
	if err := newBackend(t, f, t.TempDir(), nil).Check(ctxT(t, time.Minute)); err != nil {
		t.Errorf("Check() = %v", err)
	}
	f.mu.Lock()
	apps := len(f.apps)
	f.mu.Unlock()
	if apps != 0 || f.count("AppGetOrCreate") != 1 {
		t.Errorf("Check created %d apps with %d calls; want a lookup only", apps, f.count("AppGetOrCreate"))
	}
	bad := newBackend(t, f, t.TempDir(), func(c *config.Config) { c.Modal.TokenID = "ak-wrong" })
	if err := bad.Check(ctxT(t, time.Minute)); !errors.Is(err, sandbox.ErrInvalidConfig) || !strings.Contains(err.Error(), "modal token new") {
		t.Errorf("Check with a wrong token = %v; want advice to make a new token", err)
	}
	down := newBackend(t, f, t.TempDir(), func(c *config.Config) { c.Modal.ServerURL = "http://127.0.0.1:1" })
	if err := down.Check(ctxT(t, time.Minute)); !errors.Is(err, sandbox.ErrUnavailable) || !strings.Contains(err.Error(), "cannot reach Modal at http://127.0.0.1:1") {
		t.Errorf("Check with nothing listening = %v; want ErrUnavailable naming the server", err)
	}
}
