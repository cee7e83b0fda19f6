//go:build unix

package ssh

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/agentbin"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox/sandboxtest"
)

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer = sandboxtest.SyncBuffer

// modes runs fn for the helper and for the plain-shell protocol.
func modes(t *testing.T, fn func(t *testing.T, o Options)) {
	t.Run("helper", func(t *testing.T) { fn(t, Options{}) })
	t.Run("shell", func(t *testing.T) { fn(t, Options{ForceShell: true}) })
}

func TestServerKilledMidCommand(t *testing.T) {
	modes(t, func(t *testing.T, o Options) {
		d := newTestSSHD(t)
		b := d.backend(t, o)
		sess, err := b.Open(testCtx(t, 30*time.Second), "crash")
		if err != nil {
			t.Fatal(err)
		}
		defer sess.Close()
		mustExec(t, sess, "cd /tmp && export HERMES_K=kept")
		started := make(chan struct{})
		var once sync.Once
		w := writerFunc(func(p []byte) (int, error) {
			if bytes.Contains(p, []byte("started")) {
				once.Do(func() { close(started) })
			}
			return len(p), nil
		})
		errc := make(chan error, 1)
		go func() {
			_, err := sess.Exec(testCtx(t, 60*time.Second), sandbox.Command{Script: "echo started; sleep 30", Stdout: w})
			errc <- err
		}()
		select {
		case <-started:
		case <-time.After(30 * time.Second):
			t.Fatal("command did not start")
		}
		begin := time.Now()
		d.restart(false)
		if err := <-errc; err == nil {
			t.Errorf("Exec during a server crash returned no error")
		}
		if el := time.Since(begin); el > 15*time.Second {
			t.Errorf("Exec took %v to notice the crash", el)
		}
		res := mustExec(t, sess, `pwd; echo "$HERMES_K"`)
		if res.Stdout != "/tmp\nkept\n" || res.EnvironmentRecreated {
			t.Errorf("after reconnect = %q recreated=%v; want /tmp, kept, not recreated", res.Stdout, res.EnvironmentRecreated)
		}
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func TestEnvironmentRecreatedWhenStateLost(t *testing.T) {
	modes(t, func(t *testing.T, o Options) {
		d := newTestSSHD(t)
		b := d.backend(t, o)
		sess, err := b.Open(testCtx(t, 30*time.Second), "lost")
		if err != nil {
			t.Fatal(err)
		}
		defer sess.Close()
		mustExec(t, sess, "cd /tmp && export HERMES_K=kept")
		d.restart(false)
		if err := os.RemoveAll(filepath.Join(d.home, remoteSessions, "lost")); err != nil {
			t.Fatal(err)
		}
		res, err := sess.Exec(testCtx(t, 30*time.Second), sandbox.Command{Script: `echo "${HERMES_K-gone}"`})
		if err != nil {
			// The first command may only discover the broken stream.
			res, err = sess.Exec(testCtx(t, 30*time.Second), sandbox.Command{Script: `echo "${HERMES_K-gone}"`})
		}
		if err != nil || !res.EnvironmentRecreated || res.Stdout != "gone\n" {
			t.Fatalf("Exec after losing the state = %+v, %v; want environment_recreated and a fresh shell", res, err)
		}
		if res := mustExec(t, sess, "true"); res.EnvironmentRecreated {
			t.Errorf("environment_recreated reported twice")
		}
	})
}

func TestSharedConnection(t *testing.T) {
	modes(t, func(t *testing.T, o Options) {
		d := newTestSSHD(t)
		b := d.backend(t, o)
		ctx := testCtx(t, 60*time.Second)
		s1, err := b.Open(ctx, "one")
		if err != nil {
			t.Fatal(err)
		}
		s2, err := b.Open(ctx, "two")
		if err != nil {
			t.Fatal(err)
		}
		defer s2.Close()
		mustExec(t, s1, "true")
		mustExec(t, s2, "true")
		h := b.h
		h.mu.Lock()
		n := len(h.lives)
		first := h.lives[0].client
		h.mu.Unlock()
		if n != 1 {
			t.Fatalf("two sessions use %d connections; want 1", n)
		}
		if err := s1.Close(); err != nil {
			t.Fatal(err)
		}
		if res := mustExec(t, s2, "echo still"); res.Stdout != "still\n" {
			t.Errorf("after closing the other session: %q", res.Stdout)
		}
		h.mu.Lock()
		same := len(h.lives) == 1 && h.lives[0].client == first
		h.mu.Unlock()
		if !same {
			t.Errorf("closing one session replaced the shared connection")
		}
	})
}

func TestSixteenConcurrentSessions(t *testing.T) {
	modes(t, func(t *testing.T, o Options) {
		d := newTestSSHD(t) // sshd's MaxSessions is 10: more sessions need a second connection
		b := d.backend(t, o)
		ctx := testCtx(t, 120*time.Second)
		sessions := make([]sandbox.Session, 16)
		var wg sync.WaitGroup
		errs := make(chan error, 32)
		for i := range sessions {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				sess, err := b.Open(ctx, fmt.Sprintf("c%d", i))
				if err != nil {
					errs <- err
					return
				}
				sessions[i] = sess
			}(i)
		}
		wg.Wait()
		for _, s := range sessions {
			if s != nil {
				defer s.Close()
			}
		}
		for i, sess := range sessions {
			if sess == nil {
				continue
			}
			wg.Add(1)
			go func(i int, sess sandbox.Session) {
				defer wg.Done()
				for j := 0; j < 5; j++ {
					want := fmt.Sprintf("%d-%d", i, j)
					res, err := sess.Exec(ctx, sandbox.Command{Script: "echo " + want})
					if err != nil {
						errs <- err
						return
					}
					if res.Stdout != want+"\n" {
						errs <- fmt.Errorf("session %d printed %q; want %q", i, res.Stdout, want)
						return
					}
				}
			}(i, sess)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		b.h.mu.Lock()
		n := len(b.h.lives)
		b.h.mu.Unlock()
		if n < 2 {
			t.Errorf("16 sessions share %d connection(s); want an extra one beyond MaxSessions", n)
		}
	})
}

func TestRCFileBanner(t *testing.T) {
	modes(t, func(t *testing.T, o Options) {
		d := newTestSSHD(t)
		rc := "echo BANNER-ON-STDOUT; echo BANNER-ON-STDERR >&2; printf 'no newline \\000 \\377'\n"
		if err := os.WriteFile(filepath.Join(d.home, ".bashrc"), []byte(rc), 0o644); err != nil {
			t.Fatal(err)
		}
		b := d.backend(t, o)
		if err := b.Check(testCtx(t, 30*time.Second)); err != nil {
			t.Fatalf("Check() with a noisy rc file = %v", err)
		}
		sess, err := b.Open(testCtx(t, 30*time.Second), "noisy")
		if err != nil {
			t.Fatalf("Open with a noisy rc file = %v", err)
		}
		defer sess.Close()
		for i := 0; i < 3; i++ {
			res := mustExec(t, sess, "echo out; echo err >&2")
			if res.Stdout != "out\n" || res.Stderr != "err\n" {
				t.Errorf("Exec with a noisy rc file = %q / %q; want clean output", res.Stdout, res.Stderr)
			}
		}
	})
}

func TestStdinForeverTimesOut(t *testing.T) {
	modes(t, func(t *testing.T, o Options) {
		d := newTestSSHD(t)
		b := d.backend(t, o)
		sess, err := b.Open(testCtx(t, 30*time.Second), "stdin")
		if err != nil {
			t.Fatal(err)
		}
		defer sess.Close()
		pr, pw := io.Pipe()
		defer pw.Close()
		go pw.Write([]byte("first line\n"))
		start := time.Now()
		res, err := sess.Exec(testCtx(t, 60*time.Second), sandbox.Command{Script: "cat", Stdin: pr, Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if res.ExitCode != sandbox.ExitTimeout || !res.TimedOut || res.Stdout != "first line\n" {
			t.Errorf("Exec(cat, endless stdin, 1s) = %d %v %q; want 124, timed out, the line", res.ExitCode, res.TimedOut, res.Stdout)
		}
		if el := time.Since(start); el > 10*time.Second {
			t.Errorf("timeout took %v", el)
		}
		if res := mustExec(t, sess, "echo alive"); res.Stdout != "alive\n" {
			t.Errorf("after timeout: %q", res.Stdout)
		}
	})
}

func TestUnreachable(t *testing.T) {
	d := newTestSSHD(t)
	t.Run("refused", func(t *testing.T) {
		cfg := d.config()
		cfg.SSH.Port = freePort(t)
		b := d.backendWith(t, cfg, nil, Options{})
		start := time.Now()
		err := b.Check(testCtx(t, 30*time.Second))
		if !errors.Is(err, sandbox.ErrUnavailable) || !strings.Contains(err.Error(), "connection refused") {
			t.Errorf("Check(closed port) = %v; want connection refused, ErrUnavailable", err)
		}
		if el := time.Since(start); el > 3*time.Second {
			t.Errorf("refused connection took %v", el)
		}
		if !strings.Contains(Diagnose(err), "ssh.port") {
			t.Errorf("Diagnose() = %q; want a hint about ssh.port", Diagnose(err))
		}
	})
	t.Run("silent", func(t *testing.T) {
		// Accepts TCP but never speaks SSH: the handshake times out.
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		var conns []net.Conn
		var mu sync.Mutex
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
			}
		}()
		defer func() {
			mu.Lock()
			for _, c := range conns {
				c.Close()
			}
			mu.Unlock()
		}()
		cfg := d.config()
		cfg.SSH.Port = l.Addr().(*net.TCPAddr).Port
		cfg.SSH.ConnectTimeout = 500 * time.Millisecond
		b := d.backendWith(t, cfg, nil, Options{})
		start := time.Now()
		_, err = b.Open(testCtx(t, 30*time.Second), "x")
		if !errors.Is(err, sandbox.ErrUnavailable) || !strings.Contains(err.Error(), "within 500ms") {
			t.Errorf("Open(silent host) = %v; want a timeout that names ssh.connect_timeout", err)
		}
		if el := time.Since(start); el > 3*time.Second {
			t.Errorf("silent host took %v; want about 500ms", el)
		}
	})
}

func TestProxyJump(t *testing.T) {
	d := newTestSSHD(t)
	sshConfig := fmt.Sprintf(`# the target is reached through the bastion
Host target
    HostName 127.0.0.1
    Port %d
    User %s
    IdentityFile %s
    ProxyJump bastion

Host bastion
    HostName=127.0.0.1
    Port %d
    User %s
    IdentityFile %s
`, d.port, d.user, d.userKey, d.port, d.user, d.userKey)
	p := filepath.Join(d.localHome, ".ssh", "config")
	if err := os.WriteFile(p, []byte(sshConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := config.NewConfig()
	cfg.SSH.Host = "target"
	cfg.SSH.KnownHosts = d.knownHosts
	b := d.backendWith(t, cfg, nil, Options{SSHConfig: p})
	sess, err := b.Open(testCtx(t, 30*time.Second), "jump")
	if err != nil {
		t.Fatalf("Open through ProxyJump = %v", err)
	}
	defer sess.Close()
	if res := mustExec(t, sess, "echo via-jump"); res.Stdout != "via-jump\n" {
		t.Errorf("Exec through ProxyJump = %q", res.Stdout)
	}
	h := b.h
	h.mu.Lock()
	jumps := len(h.lives[0].jumps)
	h.mu.Unlock()
	if jumps != 1 {
		t.Errorf("connection has %d jump hosts; want 1", jumps)
	}
}

func TestKeepaliveDetectsDeadPeer(t *testing.T) {
	d := newTestSSHD(t)
	// The helper is uploaded first on a direct connection: with a keepalive this short, a
	// busy machine can hold a reply back behind megabytes of upload for longer than three
	// intervals, which is not what this test is about.
	direct := d.backendWith(t, d.config(), nil, Options{})
	warm, err := direct.Open(testCtx(t, 30*time.Second), "ka-warm")
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, warm, "true")
	warm.Close()
	px := newFreezingProxy(t, fmt.Sprintf("127.0.0.1:%d", d.port))
	cfg := d.config()
	cfg.SSH.Port = px.port
	cfg.SSH.Keepalive = 200 * time.Millisecond
	b := d.backendWith(t, cfg, nil, Options{})
	sess, err := b.Open(testCtx(t, 30*time.Second), "ka")
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	mustExec(t, sess, "cd /tmp")
	px.freeze()
	start := time.Now()
	if _, err := sess.Exec(testCtx(t, 60*time.Second), sandbox.Command{Script: "echo lost"}); err == nil {
		t.Fatalf("Exec over a frozen connection succeeded")
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("dead peer noticed after %v; want about 3 keepalive intervals", el)
	}
	res := mustExec(t, sess, "pwd")
	if res.Stdout != "/tmp\n" {
		t.Errorf("after reconnecting: pwd = %q", res.Stdout)
	}
}

// freezingProxy forwards TCP connections; freeze stops forwarding on the existing ones
// without closing them, like a peer that vanished from the network.
type freezingProxy struct {
	port   int
	mu     sync.Mutex
	frozen []net.Conn
	conns  []net.Conn
	stop   chan struct{}
}

func newFreezingProxy(t *testing.T, target string) *freezingProxy {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &freezingProxy{port: l.Addr().(*net.TCPAddr).Port, stop: make(chan struct{})}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			gate := make(chan struct{})
			p.mu.Lock()
			p.conns = append(p.conns, c, u)
			p.mu.Unlock()
			pipe := func(dst, src net.Conn) {
				defer wg.Done()
				buf := make([]byte, 32<<10)
				for {
					n, err := src.Read(buf)
					if p.isFrozen(c) {
						<-gate
						return
					}
					if n > 0 {
						if _, err := dst.Write(buf[:n]); err != nil {
							return
						}
					}
					if err != nil {
						dst.Close()
						return
					}
				}
			}
			wg.Add(2)
			go pipe(u, c)
			go pipe(c, u)
			go func() { <-p.stop; close(gate) }()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		close(p.stop)
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		wg.Wait()
	})
	return p
}

func (p *freezingProxy) freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.frozen = append(p.frozen, p.conns...)
}

func (p *freezingProxy) isFrozen(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, f := range p.frozen {
		if f == c {
			return true
		}
	}
	return false
}

func TestRemoveKillsJobs(t *testing.T) {
	modes(t, func(t *testing.T, o Options) {
		d := newTestSSHD(t)
		b := d.backend(t, o)
		sess, err := b.Open(testCtx(t, 30*time.Second), "jobs")
		if err != nil {
			t.Fatal(err)
		}
		marker := fmt.Sprintf("7%d", time.Now().UnixNano()%1_000_000)
		jr := sess.(sandbox.JobRunner)
		if _, err := jr.StartJob(testCtx(t, 30*time.Second), sandbox.Command{Script: "sleep " + marker}); err != nil {
			t.Fatal(err)
		}
		sess.Close()
		deadline := time.Now().Add(10 * time.Second)
		for countProcs(marker) == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("job not running before Remove")
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err := b.Remove(testCtx(t, 30*time.Second), "jobs"); err != nil {
			t.Fatalf("Remove() = %v", err)
		}
		deadline = time.Now().Add(5 * time.Second)
		for countProcs(marker) != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%d job process(es) left after Remove", countProcs(marker))
			}
			time.Sleep(10 * time.Millisecond)
		}
		if _, err := os.Stat(filepath.Join(d.home, remoteSessions, "jobs")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("session state left after Remove: %v", err)
		}
	})
}

// countProcs counts processes on this machine (the "remote" host) whose command line
// contains marker.
func countProcs(marker string) int {
	n := 0
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && bytes.Contains(b, []byte(marker)) {
			n++
		}
	}
	return n
}

// mountTmpfs mounts a tmpfs at dir with opts, or skips when this machine cannot.
func mountTmpfs(t *testing.T, dir, opts string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", opts, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
}

func TestNoexecHomeUsesRuntimeDir(t *testing.T) {
	d := newTestSSHD(t)
	mountTmpfs(t, filepath.Join(d.home, ".cache"), "noexec,size=64m,mode=0700")
	var progress syncBuffer
	b := d.backendWith(t, d.config(), &progress, Options{})
	sess, err := b.Open(testCtx(t, 60*time.Second), "noexec")
	if err != nil {
		t.Fatalf("Open with a noexec home = %v", err)
	}
	defer sess.Close()
	if res := mustExec(t, sess, "echo ok"); res.Stdout != "ok\n" {
		t.Errorf("Exec = %q", res.Stdout)
	}
	if _, ok := sess.(*shellSession); ok {
		t.Errorf("fell back to the plain shell; want the helper from XDG_RUNTIME_DIR")
	}
	if !strings.Contains(progress.String(), d.runtimeDir) {
		t.Errorf("progress = %q; want it to say the helper runs from %s", progress.String(), d.runtimeDir)
	}
}

func TestUploadDiskFull(t *testing.T) {
	for _, precheck := range []bool{true, false} {
		t.Run(fmt.Sprintf("precheck=%v", precheck), func(t *testing.T) {
			d := newTestSSHD(t)
			cache := filepath.Join(d.home, ".cache")
			mountTmpfs(t, cache, "size=1m,mode=0700")
			skipSpaceCheck = !precheck
			defer func() { skipSpaceCheck = false }()
			b := d.backend(t, Options{})
			_, err := b.Open(testCtx(t, 60*time.Second), "full")
			var ue *UploadError
			if !errors.As(err, &ue) || !ue.DiskFull || !strings.Contains(err.Error(), "disk is full") {
				t.Fatalf("Open with a full remote disk = %v; want a disk-full UploadError", err)
			}
			if !strings.Contains(Diagnose(err), "disk is full") {
				t.Errorf("Diagnose() = %q", Diagnose(err))
			}
			filepath.Walk(cache, func(p string, fi os.FileInfo, err error) error {
				if err == nil && !fi.IsDir() && (strings.Contains(fi.Name(), "sandbox-agent") || strings.HasPrefix(fi.Name(), ".up-")) {
					t.Errorf("partial file left behind: %s (%d bytes)", p, fi.Size())
				}
				return nil
			})
		})
	}
}

func TestTimeoutLeavesNothingRunning(t *testing.T) {
	modes(t, func(t *testing.T, o Options) {
		d := newTestSSHD(t)
		sess, err := d.backend(t, o).Open(testCtx(t, 30*time.Second), "to")
		if err != nil {
			t.Fatal(err)
		}
		defer sess.Close()
		m := fmt.Sprintf("9%d", time.Now().UnixNano()%1_000_000)
		res, err := sess.Exec(testCtx(t, 30*time.Second), sandbox.Command{Script: "sleep 1" + m + " & setsid sh -c 'sleep 2" + m + "' & sleep 3" + m, Timeout: 300 * time.Millisecond})
		if err != nil || res.ExitCode != 124 {
			t.Fatalf("Exec(timeout) = %+v, %v", res, err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for countProcs(m) > 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%d process(es) still running after the timeout", countProcs(m))
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

func TestNoHelperForArchitectureFallsBack(t *testing.T) {
	d := newTestSSHD(t)
	lookupHelper = func(arch, _ string) (*agentbin.Binary, error) {
		return nil, fmt.Errorf("no sandbox helper is built for %s", arch)
	}
	defer func() { lookupHelper = agentbin.Load }()
	var progress syncBuffer
	b := d.backendWith(t, d.config(), &progress, Options{})
	sess, err := b.Open(testCtx(t, 30*time.Second), "nohelper")
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	if _, ok := sess.(*shellSession); !ok {
		t.Fatalf("Open = %T; want the plain-shell session", sess)
	}
	if res := mustExec(t, sess, "cd /tmp; echo ok"); res.Stdout != "ok\n" || res.Cwd != "/tmp" {
		t.Errorf("Exec = %+v", res)
	}
	if !strings.Contains(progress.String(), "plain-shell") {
		t.Errorf("progress = %q; want the fallback announced", progress.String())
	}
}
