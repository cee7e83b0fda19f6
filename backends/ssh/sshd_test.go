//go:build unix

package ssh

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/proctree"
	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

const sshdPath = "/usr/sbin/sshd"

// testSSHD is a real OpenSSH server on a random loopback port, with its own host key, an
// authorized ed25519 key, and a remote HOME (set with SetEnv) inside the test's temporary
// directory, so nothing outside it is touched.
type testSSHD struct {
	t          testing.TB
	dir        string
	port       int
	hostKey    string
	userKey    string
	home       string // the remote HOME
	runtimeDir string
	knownHosts string
	localHome  string // HOME of the client side (holds .ssh/config)
	user       string
	extra      []string

	mu   sync.Mutex
	cmd  *exec.Cmd
	log  *bytes.Buffer
	done chan struct{}
}

// noSFTP, given to newTestSSHD, leaves the sftp subsystem out of the server's config.
const noSFTP = "# no sftp subsystem"

// newTestSSHD starts sshd, or skips (fails when HERMES_SANDBOX_TEST_REQUIRE=ssh) when there
// is none.
func newTestSSHD(t testing.TB, extra ...string) *testSSHD {
	t.Helper()
	if _, err := os.Stat(sshdPath); err != nil {
		testenv.Missing(t, "ssh", "no "+sshdPath+": install openssh-server (apt-get install -y openssh-server)")
	}
	testenv.AgentBinaryForProcess(t)
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	if shell := loginShell(u.Username); shell != "" && refusesLogins(shell) {
		testenv.Missing(t, "ssh", fmt.Sprintf("the test server logs in as the current user, %s, whose login shell %s refuses logins: run the ssh tests as a user with a shell", u.Username, shell))
	}
	dir := t.TempDir()
	d := &testSSHD{t: t, dir: dir, user: u.Username, extra: extra,
		hostKey: filepath.Join(dir, "host_key"), userKey: filepath.Join(dir, "id_ed25519"),
		home: filepath.Join(dir, "home"), runtimeDir: filepath.Join(dir, "run"),
		knownHosts: filepath.Join(dir, "known_hosts"), localHome: filepath.Join(dir, "localhome")}
	for _, p := range []string{d.home, d.runtimeDir, filepath.Join(d.localHome, ".ssh")} {
		if err := os.MkdirAll(p, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// sshd needs its privilege separation directory.
	if os.Geteuid() == 0 {
		_ = os.MkdirAll("/run/sshd", 0o755)
	}
	writeKey(t, d.hostKey, "")
	pub := writeKey(t, d.userKey, "")
	if err := os.WriteFile(filepath.Join(dir, "authorized_keys"), gossh.MarshalAuthorizedKey(pub), 0o600); err != nil {
		t.Fatal(err)
	}
	d.start()
	t.Cleanup(d.stop)
	return d
}

// writeKey writes a new ed25519 private key (encrypted when passphrase is set) and its .pub.
func writeKey(t testing.TB, path, passphrase string) gossh.PublicKey {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	var block *pem.Block
	if passphrase != "" {
		block, err = gossh.MarshalPrivateKeyWithPassphrase(priv, "", []byte(passphrase))
	} else {
		block, err = gossh.MarshalPrivateKey(priv, "")
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	signer, err := gossh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+".pub", gossh.MarshalAuthorizedKey(signer.PublicKey()), 0o644); err != nil {
		t.Fatal(err)
	}
	return signer.PublicKey()
}

func (d *testSSHD) writeConfig() string {
	lines := []string{
		"Port " + strconv.Itoa(d.port),
		"ListenAddress 127.0.0.1",
		"HostKey " + d.hostKey,
		"AuthorizedKeysFile " + filepath.Join(d.dir, "authorized_keys"),
		"PermitRootLogin prohibit-password",
		"StrictModes no",
		"UsePAM no",
		"PidFile none",
		"PasswordAuthentication no",
		"KbdInteractiveAuthentication no",
		"Subsystem sftp internal-sftp",
		"SetEnv HOME=" + d.home + " XDG_RUNTIME_DIR=" + d.runtimeDir,
		"MaxStartups 64",
		"LogLevel VERBOSE",
	}
	for _, x := range d.extra {
		if x == noSFTP { // a hardened server: no sftp subsystem at all
			lines = slices.DeleteFunc(lines, func(l string) bool { return strings.HasPrefix(l, "Subsystem sftp") })
			continue
		}
		lines = append(lines, x)
	}
	p := filepath.Join(d.dir, "sshd_config")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		d.t.Fatal(err)
	}
	return p
}

// start runs sshd and waits until it says it listens (a deadline, no sleeps).
func (d *testSSHD) start() {
	d.t.Helper()
	for attempt := 0; attempt < 5; attempt++ {
		if d.port == 0 || attempt > 0 {
			d.port = freePort(d.t)
		}
		if d.tryStart() {
			return
		}
	}
	d.t.Fatalf("sshd did not start:\n%s", d.logText())
}

func (d *testSSHD) tryStart() bool {
	cfg := d.writeConfig()
	cmd := exec.Command(sshdPath, "-D", "-e", "-f", cfg)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		d.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		d.t.Fatalf("start sshd: %v", err)
	}
	log := &bytes.Buffer{}
	ready := make(chan bool, 1)
	done := make(chan struct{})
	var logMu sync.Mutex
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stderr)
		said := false
		for sc.Scan() {
			logMu.Lock()
			log.WriteString(sc.Text() + "\n")
			logMu.Unlock()
			if !said && strings.Contains(sc.Text(), "Server listening on") {
				said = true
				ready <- true
			}
		}
		if !said {
			ready <- false
		}
		cmd.Wait()
	}()
	d.mu.Lock()
	d.cmd, d.log, d.done = cmd, log, done
	d.mu.Unlock()
	select {
	case ok := <-ready:
		if ok {
			return true
		}
	case <-time.After(15 * time.Second):
	}
	d.killAll()
	return false
}

func (d *testSSHD) logText() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.log == nil {
		return ""
	}
	return d.log.String()
}

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// killAll kills sshd and every process below it (connection handlers, remote shells,
// helpers), like a crash of the whole server.
func (d *testSSHD) killAll() {
	d.mu.Lock()
	cmd, done := d.cmd, d.done
	d.cmd = nil
	d.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	pids := append(proctree.Descendants(cmd.Process.Pid), cmd.Process.Pid)
	for _, p := range pids {
		syscall.Kill(p, syscall.SIGKILL)
	}
	<-done
}

func (d *testSSHD) stop() { d.killAll() }

// restart kills the server and starts it again on the same port, with a new host key if
// asked.
func (d *testSSHD) restart(newHostKey bool) {
	d.t.Helper()
	d.killAll()
	if newHostKey {
		writeKey(d.t, d.hostKey, "")
	}
	for attempt := 0; attempt < 50; attempt++ {
		if d.tryStart() {
			return
		}
	}
	d.t.Fatalf("sshd did not restart on port %d:\n%s", d.port, d.logText())
}

// config returns a configuration that reaches this server.
func (d *testSSHD) config() *config.Config {
	cfg := config.NewConfig()
	cfg.SSH.Host = "127.0.0.1"
	cfg.SSH.Port = d.port
	cfg.SSH.User = d.user
	cfg.SSH.Key = d.userKey
	cfg.SSH.KnownHosts = d.knownHosts
	cfg.SSH.ConnectTimeout = 10 * time.Second
	return cfg
}

// factory returns FactoryOptions for a backend that talks to this server.
func (d *testSSHD) factory(t testing.TB, cfg *config.Config, progress io.Writer) sandbox.FactoryOptions {
	return cfg.BackendOptions(sandbox.FactoryOptions{StateDir: filepath.Join(d.dir, "state"), Progress: progress,
		Environ: []string{"HOME=" + d.localHome, "USER=" + d.user, "PATH=/usr/local/bin:/usr/bin:/bin"}})
}

// backend builds a backend for this server; it is closed when the test ends.
func (d *testSSHD) backend(t testing.TB, o Options) *Backend {
	t.Helper()
	return d.backendWith(t, d.config(), nil, o)
}

func (d *testSSHD) backendWith(t testing.TB, cfg *config.Config, progress io.Writer, o Options) *Backend {
	t.Helper()
	if o.SSHConfig == "" {
		o.SSHConfig = "none"
	}
	b, err := NewWithOptions(cfg.SSH, d.factory(t, cfg, progress), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// ctx returns a context bounded for one test step.
func testCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// mustExec runs a script and fails the test on a runner error.
func mustExec(t testing.TB, s sandbox.Session, script string) *sandbox.Result {
	t.Helper()
	res, err := s.Exec(testCtx(t, 60*time.Second), sandbox.Command{Script: script})
	if err != nil {
		t.Fatalf("Exec(%q) error = %v", script, err)
	}
	return res
}

func (d *testSSHD) String() string { return fmt.Sprintf("sshd on 127.0.0.1:%d", d.port) }

// loginShell is user's login shell from /etc/passwd ("" when it cannot be read there: a
// directory service, another system).
func loginShell(user string) string {
	data, err := os.ReadFile("/etc/passwd")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Split(line, ":")
		if len(f) == 7 && f[0] == user {
			return f[6]
		}
	}
	return ""
}

// refusesLogins says a login shell only turns sessions away (nologin, false).
func refusesLogins(shell string) bool {
	base := filepath.Base(shell)
	return base == "nologin" || base == "false"
}
