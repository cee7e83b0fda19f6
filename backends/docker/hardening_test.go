//go:build unix

package docker

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// cgroupValue reads the first of several cgroup files (v2, then v1) inside the sandbox.
func cgroupValue(t *testing.T, sess sandbox.Session, paths ...string) string {
	t.Helper()
	for _, p := range paths {
		res := run(t, sess, "cat "+p+" 2>/dev/null")
		if res.ExitCode == 0 {
			return strings.TrimSpace(res.Stdout)
		}
	}
	t.Fatalf("none of %v is readable in the sandbox", paths)
	return ""
}

// hostCgroup reads a cgroup file of the container's on this host (v1: under the controller's
// hierarchy; v2: the unified one), from the cgroup of its main process. Under gVisor that is
// where the limits are: its kernel has no cgroup files of its own here, and the host's
// cgroup holds the whole sandbox.
func hostCgroup(t *testing.T, b *Backend, container, controller, v1file, v2file string) string {
	t.Helper()
	info, err := b.inspect(ctxT(t, 10*time.Second), container)
	if err != nil || info.State.Pid == 0 {
		t.Fatalf("inspect %s: pid %v, %v", container, info.State, err)
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", info.State.Pid))
	if err != nil {
		t.Fatal(err)
	}
	v2 := ""
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		if f[1] == "" {
			v2 = f[2]
		}
		if slices.Contains(strings.Split(f[1], ","), controller) {
			v, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", controller, f[2], v1file))
			if err != nil {
				t.Fatal(err)
			}
			return strings.TrimSpace(string(v))
		}
	}
	v, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", v2, v2file))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(v))
}

// TestHardeningDefaults proves every default from inside the container. Under gVisor
// (docker.runtime runsc) some checks take another, equally strict form, each said where it is:
// gVisor is a kernel of its own, with no cgroup files inside, no NoNewPrivs line in
// /proc/self/status, no nosuid shown in /proc/mounts, and a permission check that comes
// before the read-only one.
func TestHardeningDefaults(t *testing.T) {
	b := newBackend(t, nil)
	sess := open(t, b, "hardening")
	run(t, sess, "true")
	gvisor := b.engine().gvisor
	ctr := b.containerName("hardening")

	t.Run("NetworkNone", func(t *testing.T) {
		res := run(t, sess, "ls /sys/class/net")
		if got := strings.Fields(res.Stdout); !slices.Equal(got, []string{"lo"}) {
			t.Errorf("interfaces in /sys/class/net = %q; want only lo", got)
		}
		res = run(t, sess, `sed -n '3,$p' /proc/net/dev | cut -d: -f1 | tr -d ' '`)
		if got := strings.Fields(res.Stdout); !slices.Equal(got, []string{"lo"}) {
			t.Errorf("interfaces in /proc/net/dev = %q; want only lo", got)
		}
	})
	t.Run("MemoryLimit", func(t *testing.T) {
		// Under gVisor the host's cgroup holds gVisor and everything it runs.
		if v := hostCgroup(t, b, ctr, "memory", "memory.limit_in_bytes", "memory.max"); v != "536870912" {
			t.Errorf("the host's memory limit on the container = %s; want 536870912 (512m)", v)
		}
		if gvisor {
			return
		}
		v := cgroupValue(t, sess, "/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")
		if v != "536870912" {
			t.Errorf("memory limit = %s; want 536870912 (512m)", v)
		}
	})
	t.Run("CPUQuota", func(t *testing.T) {
		quota := hostCgroup(t, b, ctr, "cpu", "cpu.cfs_quota_us", "cpu.max")
		if f := strings.Fields(quota); len(f) == 2 { // v2: "QUOTA PERIOD"
			quota = f[0] + " " + f[1]
		} else {
			quota += " " + hostCgroup(t, b, ctr, "cpu", "cpu.cfs_period_us", "cpu.max")
		}
		if f := strings.Fields(quota); len(f) != 2 || f[0] != f[1] || f[0] == "max" || f[0] == "-1" {
			t.Errorf("the host's cpu quota/period on the container = %q; want equal (1.0 CPU)", quota)
		}
		if gvisor {
			return
		}
		res := run(t, sess, "cat /sys/fs/cgroup/cpu.max 2>/dev/null || echo $(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us) $(cat /sys/fs/cgroup/cpu/cpu.cfs_period_us)")
		f := strings.Fields(res.Stdout)
		if len(f) != 2 || f[0] != f[1] || f[0] == "max" || f[0] == "-1" {
			t.Errorf("cpu quota/period = %q; want equal (1.0 CPU)", res.Stdout)
		}
	})
	t.Run("PidsLimit", func(t *testing.T) {
		host := hostCgroup(t, b, ctr, "pids", "pids.max", "pids.max")
		if gvisor {
			// gVisor's kernel bounds the processes (nproc), the host its threads (engine.go).
			if want := fmt.Sprint(gvisorHostPids(256)); host != want {
				t.Errorf("the host's pids.max on the gVisor sandbox = %s; want %s", host, want)
			}
			if res := run(t, sess, "ulimit -u"); strings.TrimSpace(res.Stdout) != "256" {
				t.Errorf("ulimit -u under gVisor = %q; want 256", res.Stdout)
			}
			return
		}
		if host != "256" {
			t.Errorf("the host's pids.max on the container = %s; want 256", host)
		}
		if v := cgroupValue(t, sess, "/sys/fs/cgroup/pids.max", "/sys/fs/cgroup/pids/pids.max"); v != "256" {
			t.Errorf("pids.max = %s; want 256", v)
		}
	})
	t.Run("ReadOnlyRoot", func(t *testing.T) {
		paths := []string{"/etc/hermes-probe", "/bin/hermes-probe", "/hermes-probe", "/.hermes/probe"}
		for _, p := range paths {
			res := run(t, sess, "touch "+p)
			// gVisor checks the sandbox user's permission before the mount's read-only flag
			// (Linux the other way round): EACCES there, proven read-only by root below.
			if res.ExitCode == 0 || !strings.Contains(strings.ToLower(res.Stderr), "read-only") &&
				!(gvisor && strings.Contains(res.Stderr, "Permission denied")) {
				t.Errorf("touch %s = %d %q; want a read-only file system error", p, res.ExitCode, res.Stderr)
			}
		}
		// Root in the container (no capabilities, but the owner of these directories, so
		// past the permission check) meets the read-only file system under either runtime.
		out := rootExec(t, b, ctr, "for p in "+strings.Join(paths, " ")+"; do touch $p; done; echo x > "+agentInCtr+"; grep -c ' / [^ ]* ro[, ]' /proc/mounts")
		if n := strings.Count(strings.ToLower(out), "read-only file system"); n != len(paths)+1 || !strings.HasSuffix(out, "\n1\n") {
			t.Errorf("writes as root = %q; want %d read-only file system errors and / mounted ro", out, len(paths)+1)
		}
		res := run(t, sess, "echo x > /.hermes/sandbox-agent")
		if res.ExitCode == 0 {
			t.Errorf("the helper binary is writable from inside")
		}
	})
	t.Run("WritableWorkspace", func(t *testing.T) {
		res := run(t, sess, "pwd; echo $HOME; stat -c '%u:%g' /workspace; mkdir -p /workspace/d && echo hi > /workspace/d/f && cat /workspace/d/f")
		if res.Stdout != "/workspace\n/workspace\n1000:1000\nhi\n" {
			t.Errorf("workspace check = %q (stderr %q); want cwd and HOME /workspace, owned 1000:1000, writable", res.Stdout, res.Stderr)
		}
	})
	t.Run("TmpIsExecTmpfs", func(t *testing.T) {
		res := run(t, sess, `grep ' /tmp ' /proc/mounts`)
		opts := strings.Fields(res.Stdout)
		// gVisor does not list nosuid in /proc/mounts (nor honour setuid bits at all: a
		// setuid-root program runs as its caller there); what it was asked for is checked.
		nosuid := len(opts) >= 4 && strings.Contains(opts[3], "nosuid")
		if gvisor {
			info, err := b.inspect(ctxT(t, 10*time.Second), ctr)
			nosuid = err == nil && strings.Contains(info.HostConfig.Tmpfs["/tmp"], "nosuid")
		}
		if len(opts) < 4 || opts[2] != "tmpfs" || !strings.HasPrefix(opts[3], "rw") || !nosuid || strings.Contains(opts[3], "noexec") || !strings.Contains(opts[3], "size=") {
			t.Errorf("/tmp mount = %q (nosuid %v); want tmpfs rw,nosuid,exec,size=…", res.Stdout, nosuid)
		}
		res = run(t, sess, `printf '#!/bin/sh\necho ran\n' > /tmp/x.sh && chmod +x /tmp/x.sh && /tmp/x.sh`)
		if res.Stdout != "ran\n" {
			t.Errorf("running a script from /tmp = %d %q %q; want ran", res.ExitCode, res.Stdout, res.Stderr)
		}
	})
	t.Run("NoCapabilities", func(t *testing.T) {
		res := run(t, sess, "grep -E '^(CapEff|CapPrm|CapBnd|NoNewPrivs)' /proc/self/status")
		want := map[string]string{"CapEff": "0000000000000000", "CapPrm": "0000000000000000", "CapBnd": "0000000000000000", "NoNewPrivs": "1"}
		for _, line := range strings.Split(strings.TrimSpace(res.Stdout), "\n") {
			k, v, _ := strings.Cut(line, ":")
			if w, ok := want[k]; ok && strings.TrimSpace(v) != w {
				t.Errorf("%s = %s; want %s", k, strings.TrimSpace(v), w)
			}
			delete(want, k)
		}
		if _, ok := want["NoNewPrivs"]; ok && gvisor {
			// gVisor's /proc/self/status has no NoNewPrivs line; prctl answers.
			if res := run(t, sess, "setpriv --dump | grep no_new_privs"); strings.TrimSpace(res.Stdout) == "no_new_privs: 1" {
				delete(want, "NoNewPrivs")
			}
		}
		if len(want) > 0 {
			t.Errorf("/proc/self/status lacks %v", want)
		}
	})
	t.Run("NonRootUser", func(t *testing.T) {
		if res := run(t, sess, "id -u; id -g"); res.Stdout != "1000\n1000\n" {
			t.Errorf("id = %q; want 1000 1000", res.Stdout)
		}
	})
	t.Run("InitIsPID1", func(t *testing.T) {
		res := run(t, sess, `tr '\0' ' ' < /proc/1/cmdline`)
		want := "init" // docker-init, or Podman's catatonit at /run/podman-init
		if !b.engine().init {
			want = agentInCtr + " idle" // Podman without catatonit: the helper reaps as PID 1
		}
		if !strings.Contains(res.Stdout, want) {
			t.Errorf("PID 1 = %q; want %q (%s)", res.Stdout, want, b.engine().initNote)
		}
	})
	t.Run("OrphansReaped", func(t *testing.T) {
		// Background processes whose parent ended are adopted by PID 1; left unreaped, each
		// stays a zombie holding a slot of the pids limit. The sleeps end at once.
		run(t, sess, `sh -c 'for i in 1 2 3 4 5 6 7 8; do sleep 0 & done'`)
		zombies := `for f in /proc/[0-9]*/stat; do cut -d' ' -f3 "$f"; done 2>/dev/null | grep -c Z; true`
		deadline := time.Now().Add(15 * time.Second)
		for {
			res := run(t, sess, zombies)
			if strings.TrimSpace(res.Stdout) == "0" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("zombies left in the sandbox: %q (PID 1: %s)", res.Stdout, b.engine().initNote)
			}
		}
	})
	t.Run("HostFilesystemInvisible", func(t *testing.T) {
		res := run(t, sess, `cut -d' ' -f2 /proc/mounts`)
		allowed := func(m string) bool {
			switch m {
			case "/", "/tmp", "/workspace", agentInCtr, "/sbin/docker-init", "/etc/hosts", "/etc/hostname", "/etc/resolv.conf",
				"/run/.containerenv", "/run/podman-init": // Podman's marker file and init
				return true
			case "/run", "/var/tmp":
				// Podman gives a read-only container tmpfs here (read_only_tmpfs), no host files.
				return b.engine().podman
			}
			return m == "/proc" || strings.HasPrefix(m, "/proc/") || m == "/dev" || strings.HasPrefix(m, "/dev/") || m == "/sys" || strings.HasPrefix(m, "/sys/")
		}
		for _, m := range strings.Fields(res.Stdout) {
			if !allowed(m) {
				t.Errorf("unexpected mount %s inside the sandbox", m)
			}
		}
		host, _ := os.Hostname()
		if res := run(t, sess, "ls "+filepath.Dir(os.TempDir())+"/"+host+" "+os.Getenv("HOME")+"/.ssh 2>&1; true"); !strings.Contains(res.Stdout, "No such file") {
			t.Errorf("host paths visible: %q", res.Stdout)
		}
	})
	t.Run("Labels", func(t *testing.T) {
		info, err := b.inspect(ctxT(t, 10e9), b.containerName("hardening"))
		if err != nil {
			t.Fatal(err)
		}
		l := info.Config.Labels
		if l[labelOurs] != "1" || l[labelSession] != "hardening" || l[labelCreated] == "" || l[labelScope] != b.scope {
			t.Errorf("labels = %v; want hermes-sandbox=1, session, created, scope", l)
		}
		init := info.HostConfig.Init != nil && *info.HostConfig.Init
		if info.HostConfig.Privileged || init != b.engine().init || info.HostConfig.NetworkMode != "none" {
			t.Errorf("host config = privileged %v init %v network %q; want false, %v, none", info.HostConfig.Privileged, init, info.HostConfig.NetworkMode, b.engine().init)
		}
	})
	if w := b.Warnings(); len(w) != 0 {
		t.Errorf("Warnings() with defaults = %q; want none", w)
	}
}

// rootExec runs script as root (uid 0, with the container's capabilities: none) through the
// Engine API and returns its output, stderr after stdout.
func rootExec(t *testing.T, b *Backend, container, script string) string {
	t.Helper()
	ctx := ctxT(t, time.Minute)
	ex, err := b.cli.ExecCreate(ctx, container, client.ExecCreateOptions{User: "0:0", Cmd: []string{"/bin/sh", "-c", script},
		AttachStdout: true, AttachStderr: true})
	if err != nil {
		t.Fatal(err)
	}
	hr, err := b.cli.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer hr.Close()
	var out, errOut strings.Builder
	if _, err := stdcopy.StdCopy(&out, &errOut, hr.Reader); err != nil {
		t.Fatal(err)
	}
	return errOut.String() + out.String()
}

// TestWarnings checks that each weakened default is reported.
func TestWarnings(t *testing.T) {
	cfg := config.NewConfig()
	cfg.Docker.Privileged = true
	cfg.Docker.NetworkEnabled = true
	cfg.Docker.ReadOnlyRootfs = false
	cfg.Docker.PidsLimit = 0
	cfg.Docker.SecurityOpt = nil
	cfg.Docker.User = "root"
	cfg.Docker.Volumes = []string{"/var/run/docker.sock:/var/run/docker.sock"}
	cfg.Docker.EnvPassthrough = []string{"GITHUB_TOKEN"}
	b, err := NewWith(cfg.Docker, cfg.BackendOptions(sandbox.FactoryOptions{StateDir: t.TempDir()}), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	w := strings.Join(b.Warnings(), "\n")
	for _, want := range []string{"docker.privileged", "docker.network_enabled", "read_only_rootfs", "pids_limit", "no-new-privileges", "root", "docker.sock", "GITHUB_TOKEN"} {
		if !strings.Contains(w, want) {
			t.Errorf("Warnings() lacks %q:\n%s", want, w)
		}
	}
	if caps := b.Capabilities(); !caps.Network || !strings.Contains(caps.Isolation, "PRIVILEGED") {
		t.Errorf("Capabilities() = %+v; want network and PRIVILEGED", caps)
	}
}

// TestConfiguredOptions checks docker.env, env_passthrough, volumes, extra_hosts and a named
// user from inside.
func TestConfiguredOptions(t *testing.T) {
	host := t.TempDir()
	if err := os.WriteFile(filepath.Join(host, "in.txt"), []byte("from host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rw := t.TempDir()
	os.Chmod(rw, 0o777)
	options := func(c *config.Config) {
		c.Docker.Image = testImage(t)
		c.Docker.Env = map[string]string{"HERMES_LITERAL": "lit value $(x)"}
		c.Docker.EnvPassthrough = []string{"HERMES_PASS"}
		c.Docker.Volumes = []string{host + ":/data:ro", rw + ":/out"}
		c.Docker.ExtraHosts = []string{"hermes-extra:10.11.12.13"}
		c.Docker.User = "sandbox"
	}
	b := newBackendWith(t, t.TempDir(), options)
	b.opts.Environ = append(b.opts.Environ, "HERMES_PASS=passed-secret-value", "HERMES_NOT=hidden")
	b.passEnv = passthroughEnv(b.cfg, b.opts)
	sess := open(t, b, "options")
	res := run(t, sess, `echo "$HERMES_LITERAL|$HERMES_PASS|${HERMES_NOT-unset}"`)
	if res.Stdout != "lit value $(x)|passed-secret-value|unset\n" {
		t.Errorf("env = %q", res.Stdout)
	}
	res = run(t, sess, `for p in /proc/[0-9]*; do tr '\0' ' ' < $p/cmdline 2>/dev/null; echo; done | grep -c "passed-secret-valu[e]"; true`)
	if strings.TrimSpace(res.Stdout) != "0" {
		t.Errorf("a passthrough value appears on a command line (%s processes)", res.Stdout)
	}
	res = run(t, sess, "cat /data/in.txt; touch /data/new 2>&1 | grep -c Read-only; echo made > /out/f")
	if res.Stdout != "from host\n1\n" {
		t.Errorf("volumes = %q %q; want the ro file readable and unwritable", res.Stdout, res.Stderr)
	}
	info, err := b.inspect(ctxT(t, 10*time.Second), b.containerName("options"))
	if err != nil || slices.ContainsFunc(info.Config.Env, func(kv string) bool { return strings.Contains(kv, "passed-secret-value") }) {
		t.Errorf("a passthrough value is stored in the container's configuration (%v)", err)
	}
	// A name passed through later reaches the existing session without a new container, and
	// a passed-through variable takes the calling process's current value (a rotated token).
	b2 := newBackendWith(t, b.opts.StateDir, func(c *config.Config) {
		options(c)
		c.Docker.EnvPassthrough = []string{"HERMES_PASS", "HERMES_LATER"}
	})
	b2.opts.Environ = append(b2.opts.Environ, "HERMES_PASS=rotated", "HERMES_LATER=later")
	b2.passEnv = passthroughEnv(b2.cfg, b2.opts)
	res = run(t, open(t, b2, "options"), `echo "$HERMES_PASS|$HERMES_LATER"`)
	if res.Stdout != "rotated|later\n" || res.EnvironmentRecreated {
		t.Errorf("second process env = %q recreated %v; want the caller's current value and the new name added, in the same container", res.Stdout, res.EnvironmentRecreated)
	}
	if b, err := os.ReadFile(filepath.Join(rw, "f")); err != nil || string(b) != "made\n" {
		t.Errorf("rw volume: host sees %q, %v", b, err)
	}
	if res := run(t, sess, "grep hermes-extra /etc/hosts"); !strings.Contains(res.Stdout, "10.11.12.13") {
		t.Errorf("/etc/hosts = %q; want hermes-extra", res.Stdout)
	}
	if res := run(t, sess, "id -u; touch /workspace/ok && echo ok"); res.Stdout != "1000\nok\n" {
		t.Errorf("named user sandbox = %q %q; want uid 1000 and a writable workspace", res.Stdout, res.Stderr)
	}
}

func TestGPURequests(t *testing.T) {
	tests := []struct {
		in      string
		count   int
		devices []string
		bad     bool
	}{
		{"", 0, nil, false},
		{"all", -1, nil, false},
		{"2", 2, nil, false},
		{"device=0,1", 0, []string{"0", "1"}, false},
		{"count=all,driver=nvidia", -1, nil, false},
		{"zero", 0, nil, true},
		{"bogus=1", 0, nil, true},
	}
	for _, tt := range tests {
		reqs, err := gpuRequests(tt.in)
		if (err != nil) != tt.bad {
			t.Errorf("gpuRequests(%q) error = %v; want error %v", tt.in, err, tt.bad)
			continue
		}
		if tt.bad || tt.in == "" {
			continue
		}
		if len(reqs) != 1 || reqs[0].Count != tt.count || !slices.Equal(reqs[0].DeviceIDs, tt.devices) {
			t.Errorf("gpuRequests(%q) = %+v; want count %d devices %v", tt.in, reqs, tt.count, tt.devices)
		}
	}
}

// TestRuntimeRunsc runs a session under gVisor when the engine has runsc registered
// (Debian: apt-get install runsc, then register it in /etc/docker/daemon.json with
// runtimeArgs ["--network=none"]).
func TestRuntimeRunsc(t *testing.T) {
	cli := needEngine(t)
	info, err := cli.Info(ctxT(t, 10*time.Second), client.InfoOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := info.Info.Runtimes["runsc"]; !ok {
		t.Skip("runsc (gVisor) is not registered with the engine; optional")
	}
	b := newBackend(t, func(c *config.Config) { c.Docker.Runtime = "runsc" })
	if err := b.Check(ctxT(t, 30*time.Second)); err != nil {
		t.Fatalf("Check() = %v", err)
	}
	sess := open(t, b, "gvisor")
	res := run(t, sess, "dmesg 2>/dev/null | head -1; id -u; pwd; touch /workspace/x && echo ok")
	if !strings.HasSuffix(res.Stdout, "1000\n/workspace\nok\n") {
		t.Errorf("under runsc = %q %q", res.Stdout, res.Stderr)
	}
	t.Logf("runsc: %q", res.Stdout)
	res, err = sess.Exec(ctxT(t, time.Minute), sandbox.Command{Script: "sleep 100", Timeout: time.Second})
	if err != nil || res.ExitCode != sandbox.ExitTimeout {
		t.Errorf("timeout under runsc = %v, %v", res, err)
	}
}
