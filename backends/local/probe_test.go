//go:build !windows

package local_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/backends/local"
	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/nsbox"
	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// The probe suite: an attacker's commands, straight on the backend with no gate in front,
// try to read a planted private key (and this tool's secrets file, and the caller's
// environment) and to reach listeners on the host's loopback. With local.confine strict none
// may succeed; with local.confine off every one must, so the suite shows it can fail. It runs
// as this user and, when that is root, again as an unprivileged user (probeUser).

// probeUser is the unprivileged account the suite runs as when the tests run as root
// (scripts/test-deps.sh creates it).
const probeUser = "hermes-sandbox-test"

// childEnv marks the re-executed test binary that runs the suite as probeUser.
const childEnv = "HERMES_SANDBOX_PROBE_CHILD"

// probe is one attempt. A read probe succeeds when the secret shows in its output; a net
// probe when the listener it names heard from it.
type probe struct {
	name   string
	script string
	net    string // "", "tcp", "udp" or "unix": the listener it tries to reach
	// caller: it looks for the token in the calling process's environment (callerEnv), not
	// the key.
	caller bool
}

// callerEnv holds, in the environment the suite's process was started with, a token the way
// a CLI process holds the caller's credentials: never passed to a command, so only /proc could
// show it.
const callerEnv = "HERMES_PROBE_CALLER_TOKEN"

// probes are the attempts, with placeholders: SECRET (the key's path), TOOLSECRETS (this
// tool's secrets file), TCPPORT, UDPPORT, UNIXSOCK, TAG (the probe's own tag, which a net probe
// sends).
var probes = []probe{
	{name: "cat", script: `cat SECRET`},
	{name: "tar | od", script: `cd ~ && tar cf - .s* 2>/dev/null | od -c | head -400`},
	{name: "tar to stdout", script: `(cd ~ && tar cf - .ssh) | tar xOf -`},
	{name: "find -exec cat", script: `find ~ -name 'id_*' -exec cat {} \;`},
	{name: "python split path", script: `python3 -c "import os;print(open(os.path.expanduser('~')+'/.ss'+'h/id_ed25519').read())"`},
	{name: "cp then cat", script: `cp SECRET ./copied && cat ./copied`},
	{name: "glob", script: `cat ~/.ss?/id_*`},
	{name: "symlink", script: `ln -sf SECRET ./link && cat ./link`},
	{name: "hard link", script: `ln SECRET ./hard 2>/dev/null; cat ./hard`},
	{name: "/proc/self/root", script: `cat /proc/self/root$HOME/.ssh/id_ed25519`},
	{name: "/proc/self/cwd", script: `cd ~ && cat /proc/self/cwd/.ssh/id_ed25519`},
	{name: "dd", script: `dd if=SECRET status=none`},
	{name: "base64 round trip", script: `base64 SECRET | base64 -d`},
	{name: "read builtin", script: `while IFS= read -r l; do echo "$l"; done < SECRET`},
	{name: "python listdir", script: `python3 -c "import os;d=os.path.expanduser('~/.ssh');[print(open(os.path.join(d,f)).read()) for f in os.listdir(d)]"`},
	{name: "head on a glob", script: `head -c 200 ~/.ssh/*`},
	{name: "unmount the placeholder", script: `umount ~/.ssh 2>/dev/null; cat SECRET`},
	{name: "user namespace then unmount", script: `unshare -Urm sh -c 'umount "$HOME/.ssh"; cat "$HOME/.ssh/id_ed25519"'`},
	{name: "this tool's secrets file", script: `cat TOOLSECRETS`},
	{name: "the caller's environment in /proc", caller: true, script: `cat /proc/[0-9]*/environ 2>/dev/null | tr '\0' '\n'`},
	{name: "environ of every process, one by one", caller: true, script: `for p in /proc/[0-9]*; do cat $p/environ 2>/dev/null; done | tr '\0' '\n'`},
	{name: "bash /dev/tcp", net: "tcp", script: `exec 3<>/dev/tcp/127.0.0.1/TCPPORT && echo TAG >&3`},
	{name: "python tcp socket", net: "tcp", script: `python3 -c "import socket;s=socket.create_connection(('127.0.0.1',TCPPORT),3);s.sendall(b'TAG')"`},
	{name: "python http", net: "tcp", script: `python3 -c "import urllib.request;urllib.request.urlopen('http://127.0.0.1:TCPPORT/TAG',timeout=3)"`},
	{name: "python tcp over ipv6-mapped loopback", net: "tcp", script: `python3 -c "import socket;s=socket.create_connection(('localhost',TCPPORT),3);s.sendall(b'TAG')"`},
	{name: "udp datagram", net: "udp", script: `python3 -c "import socket;socket.socket(socket.AF_INET,socket.SOCK_DGRAM).sendto(b'TAG',('127.0.0.1',UDPPORT))"`},
	{name: "dns query to a resolver on the host", net: "udp", script: `python3 -c "import socket,struct;q=struct.pack('>HHHHHH',1,256,1,0,0,0)+b''.join(bytes([len(p)])+p for p in b'TAG.example'.split(b'.'))+b'\0\0\1\0\1';socket.socket(socket.AF_INET,socket.SOCK_DGRAM).sendto(q,('127.0.0.1',UDPPORT))"`},
	{name: "unix socket of the host", net: "unix", script: `python3 -c "import socket;s=socket.socket(socket.AF_UNIX);s.connect('UNIXSOCK');s.sendall(b'TAG')"`},
}

// listeners are the host's: what each heard, by tag.
type listeners struct {
	mu    sync.Mutex
	heard map[string]string // tag -> the listener that heard it
	tcp   net.Listener
	udp   net.PacketConn
	unix  net.Listener
}

func startListeners(t *testing.T, dir string) *listeners {
	t.Helper()
	l := &listeners{heard: map[string]string{}}
	var err error
	if l.tcp, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	if l.udp, err = net.ListenPacket("udp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	if l.unix, err = net.Listen("unix", filepath.Join(dir, "host.sock")); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Join(dir, "host.sock"), 0o777)
	tagRE := regexp.MustCompile(`probe[0-9a-f]{8}`)
	note := func(kind string, b []byte) {
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, tag := range tagRE.FindAll(b, -1) {
			l.heard[string(tag)] = kind
		}
		if len(tagRE.FindAll(b, -1)) == 0 {
			l.heard["untagged"] = kind
		}
	}
	serve := func(kind string, ln net.Listener) {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				b, _ := io.ReadAll(io.LimitReader(c, 4096))
				if kind == "tcp" && bytes.HasPrefix(b, []byte("GET ")) {
					fmt.Fprint(c, "HTTP/1.0 200 OK\r\n\r\n")
				}
				note(kind, b)
			}()
		}
	}
	go serve("tcp", l.tcp)
	go serve("unix", l.unix)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, _, err := l.udp.ReadFrom(buf)
			if err != nil {
				return
			}
			note("udp", buf[:n])
		}
	}()
	t.Cleanup(func() { l.tcp.Close(); l.udp.Close(); l.unix.Close() })
	return l
}

// heardFrom waits a little for a tag (a connection's bytes arrive after the command ends).
func (l *listeners) heardFrom(tag string, wait time.Duration) bool {
	for deadline := time.Now().Add(wait); ; time.Sleep(20 * time.Millisecond) {
		l.mu.Lock()
		_, ok := l.heard[tag]
		l.mu.Unlock()
		if ok || time.Now().After(deadline) {
			return ok
		}
	}
}

// probeEnv is a user's home with a planted key, their config (with a secrets file), a state
// directory and a working directory, and a local backend over them.
type probeEnv struct {
	home, work, state, cfgDir string
	secret                    string // the key's contents, also in secrets.yaml and the environment
	b                         sandbox.Backend
	sess                      sandbox.Session
}

func newProbeEnv(t *testing.T, mode config.Confine) *probeEnv {
	t.Helper()
	root, err := os.MkdirTemp("/var/tmp", "hermes-probe-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	e := &probeEnv{home: filepath.Join(root, "home"), secret: "probekey" + randomHex(4)}
	e.work, e.cfgDir = filepath.Join(e.home, "project"), filepath.Join(e.home, ".config", "hermes-sandbox")
	e.state = filepath.Join(e.home, ".local", "state", "hermes-sandbox")
	for _, d := range []string{filepath.Join(e.home, ".ssh"), e.work, e.cfgDir, e.state} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// 16 bytes or fewer, so od -c prints it on one line.
	must(t, os.WriteFile(filepath.Join(e.home, ".ssh", "id_ed25519"), []byte(e.secret+"\n"), 0o600))
	must(t, os.WriteFile(filepath.Join(e.cfgDir, "secrets.yaml"), []byte("modal:\n  token_secret: "+e.secret+"\n"), 0o600))
	cfgFile := filepath.Join(e.cfgDir, "config.yaml")
	must(t, os.WriteFile(cfgFile, []byte("# probes\n"), 0o600))
	cfg, err := config.LoadWith(config.Options{Path: cfgFile})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Terminal.Cwd = e.work
	cfg.Audit.LogDestination = filepath.Join(e.state, "audit.log")
	cfg.Local.Confine = mode
	opts := cfg.BackendOptions(sandbox.FactoryOptions{StateDir: e.state,
		Environ: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + e.home}})
	e.b, err = local.NewWith(local.SectionOf(cfg), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.b.Close() })
	e.sess, err = e.b.Open(context.Background(), "probes")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.sess.Close()
		e.b.(sandbox.SessionManager).Remove(context.Background(), "probes")
	})
	return e
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// TestProbes runs the probes in a process started with a token in its environment (as a
// CLI holds the caller's): as this user, and as root also as probeUser.
func TestProbes(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("namespaces are Linux-only")
	}
	if _, err := exec.LookPath("python3"); err != nil {
		testenv.Missing(t, "python3", "several probes are python one-liners: "+err.Error())
	}
	if err := nsbox.Probe(nsbox.NetworkNone); err != nil {
		testenv.Missing(t, "nsbox", err.Error())
	}
	if os.Getenv(childEnv) != "" {
		if os.Getenv(callerEnv) == "" {
			t.Fatalf("%s is not set", callerEnv)
		}
		t.Run("as uid "+strconv.Itoa(os.Getuid()), runProbes)
		return
	}
	t.Run("as uid "+strconv.Itoa(os.Getuid()), func(t *testing.T) { runChild(t, nil) })
	if os.Getuid() != 0 {
		return
	}
	t.Run("as "+probeUser, func(t *testing.T) {
		u, err := user.Lookup(probeUser)
		if err != nil {
			testenv.Missing(t, "probe-user", fmt.Sprintf("no user %s (scripts/test-deps.sh creates it: useradd --system --create-home %s): %v", probeUser, probeUser, err))
		}
		runChild(t, u)
	})
}

func runProbes(t *testing.T) {
	t.Run("strict holds", func(t *testing.T) { probeAll(t, config.ConfineStrict, false) })
	t.Run("off leaks (the probes can fail)", func(t *testing.T) { probeAll(t, config.ConfineOff, true) })
}

// probeAll runs every probe in a session of mode; leak says whether each must succeed.
func probeAll(t *testing.T, mode config.Confine, leak bool) {
	e := newProbeEnv(t, mode)
	sockDir, err := os.MkdirTemp("/var/tmp", "hermes-probe-sock-")
	must(t, err)
	os.Chmod(sockDir, 0o755)
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	l := startListeners(t, sockDir)
	for _, p := range probes {
		t.Run(p.name, func(t *testing.T) {
			tag := "probe" + randomHex(4)
			script := strings.NewReplacer("SECRET", filepath.Join(e.home, ".ssh", "id_ed25519"),
				"TOOLSECRETS", filepath.Join(e.cfgDir, "secrets.yaml"),
				"TCPPORT", strconv.Itoa(l.tcp.Addr().(*net.TCPAddr).Port),
				"UDPPORT", strconv.Itoa(l.udp.LocalAddr().(*net.UDPAddr).Port),
				"UNIXSOCK", l.unix.Addr().String(), "TAG", tag).Replace(p.script)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			res, err := e.sess.Exec(ctx, sandbox.Command{Script: script})
			if err != nil {
				t.Fatalf("Exec: %v", err)
			}
			out := res.Stdout + res.Stderr
			flat := strings.Join(strings.Fields(out), "")
			want := e.secret
			if p.caller {
				want = os.Getenv(callerEnv)
			}
			read := strings.Contains(flat, want)
			switch {
			case p.net == "" && leak && !read:
				t.Errorf("unconfined, the probe did not read the secret (exit %d): %q", res.ExitCode, out)
			case p.net == "" && !leak && read:
				t.Errorf("CONFINED PROBE READ THE SECRET (exit %d): %q", res.ExitCode, out)
			case p.net != "":
				heard := l.heardFrom(tag, map[bool]time.Duration{true: 5 * time.Second, false: 500 * time.Millisecond}[leak])
				if leak && !heard {
					t.Errorf("unconfined, the probe did not reach the host's %s listener (exit %d): %q", p.net, res.ExitCode, out)
				}
				if !leak && heard {
					t.Errorf("CONFINED PROBE REACHED THE HOST'S %s LISTENER (exit %d): %q", strings.ToUpper(p.net), res.ExitCode, out)
				}
				if !leak && read {
					t.Errorf("confined probe printed the secret: %q", out)
				}
			}
		})
	}
	if !leak {
		l.mu.Lock()
		defer l.mu.Unlock()
		if len(l.heard) > 0 {
			t.Errorf("the host's listeners heard from confined commands: %v", l.heard)
		}
	}
}

// runChild runs this test binary again, with a token in its environment, as u (nil: this
// user), from a copy u can execute, with u's home.
func runChild(t *testing.T, u *user.User) {
	bin, err := os.Executable()
	must(t, err)
	dir := filepath.Dir(bin)
	env := []string{childEnv + "=1", callerEnv + "=probecaller" + randomHex(4), "PATH=/usr/local/bin:/usr/bin:/bin",
		"HERMES_SANDBOX_TEST_REQUIRE=" + os.Getenv("HERMES_SANDBOX_TEST_REQUIRE")}
	var attr *syscall.SysProcAttr
	uid := strconv.Itoa(os.Getuid())
	if u == nil {
		env = append(env, "HOME="+os.Getenv("HOME"))
	} else {
		uid = u.Uid
		n, _ := strconv.Atoi(u.Uid)
		g, _ := strconv.Atoi(u.Gid)
		attr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(n), Gid: uint32(g)}}
		env = append(env, "HOME="+u.HomeDir, "USER="+u.Username)
		dir, err = os.MkdirTemp("/var/tmp", "hermes-probe-bin-")
		must(t, err)
		t.Cleanup(func() { os.RemoveAll(dir) })
		must(t, os.Chmod(dir, 0o755))
		data, err := os.ReadFile(bin)
		must(t, err)
		bin = filepath.Join(dir, "local.test")
		must(t, os.WriteFile(bin, data, 0o755))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-test.run", "^TestProbes$", "-test.v", "-test.count=1")
	cmd.Dir, cmd.Env, cmd.SysProcAttr = dir, env, attr
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("--- PASS: TestProbes/as_uid_"+uid)) {
		t.Fatalf("the probes as uid %s: %v\n%s", uid, err, out)
	}
	t.Logf("as uid %s: every probe held under strict and leaked with confine off", uid)
}
