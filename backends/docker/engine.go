package docker

// The engine behind the Docker API: Docker's own, or Podman's Docker-compatible service
// (`podman system service`, rootful at unix:///run/podman/podman.sock, rootless at
// $XDG_RUNTIME_DIR/podman/podman.sock). The backend learns which on its first contact
// (GET /version: Podman lists a "Podman Engine" component) and adapts where they differ:
//
//   - the init process: Docker ships docker-init with the engine, so Init: true always works.
//     Podman runs catatonit for it, which Debian packages separately; without it Podman refuses
//     the container ("container-init binary not found"). There the helper's idle entrypoint is
//     PID 1 itself: it reaps orphaned processes and ends on the stop signal (agent idle).
//   - tmpfs options: Podman refuses uid= and gid= on /tmp's tmpfs; its option U does that.
//   - open files and processes: Podman asks for more than some hosts allow (engineInfo.ulimits).
//   - rootless Podman on cgroup v1 sets no memory, CPU or pids limits and says nothing; the
//     backend asks Podman's own /libpod/info and refuses such limits there (limitsUnenforced).
//
// And the runtime behind docker.runtime: gVisor's runsc (found by the runtime's path) counts
// processes differently (gvisorHostPids).
//
//   - volume labels: Podman 4.3 drops those of a volume that a container's mount creates, so
//     the backend makes the workspace volume first (podmanVolume).
//   - everything else the backend uses (labels and label filters, tmpfs options, network mode
//     none, hijacked exec attach, archive upload into a created container, image import)
//     Podman 4.3 serves as Docker does; the conformance and hardening tests run against it
//     (HERMES_SANDBOX_TEST_PODMAN_SOCKET, HERMES_SANDBOX_TEST_PODMAN_ROOTLESS_SOCKET).

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"
)

// engineInfo is what the backend learned about the engine on first contact.
type engineInfo struct {
	podman  bool
	product string // "Docker Engine 20.10.24", "Podman Engine 4.3.1"
	arch    string
	// init is whether the engine can give the container an init process (Init: true);
	// initNote says which (or why not, and what to install).
	init     bool
	initNote string
	// ulimits are the limits to ask Podman for. Podman asks for 1048576 open files and
	// millions of processes unless told, which runc cannot set where the host's hard limits
	// are lower ("error setting rlimit type 7"). A sandbox needs far fewer (docker.pids_limit
	// bounds its processes anyway), so Podman gets podmanUlimits, lowered to this process's
	// own hard limits.
	ulimits []container.Ulimit
	// gvisor is whether docker.runtime is gVisor's runsc (the engine's runtime of that name
	// runs a binary called runsc).
	gvisor bool
	// rootless is a local Podman service run by an unprivileged user; noLimits says it
	// cannot bound memory, CPU or processes: rootless Podman on cgroup v1 has no cgroup of
	// its own to set them in, and drops them without an error (podmanHost).
	rootless, noLimits bool
}

// gVisor's process limit. Under runsc the host kernel does not see the sandbox's processes:
// the host's pids cgroup counts gVisor's own threads, and on the ptrace platform each process
// in the sandbox costs the host about ten of them (a stub process with a thread for each
// thread of gVisor's that ran it: 256 sleeping processes took 2,699 host tasks here). With
// docker.pids_limit as the host's pids.max, a few dozen processes exhaust it, gVisor cannot
// start its next stub, and its kernel panics: the container exits with status 2 and every
// command in it is lost. So under gVisor:
//   - the sandbox's own kernel bounds its processes: RLIMIT_NPROC (nproc) at docker.pids_limit,
//     which gVisor enforces per user (a fork past it fails with EAGAIN, "can't fork", and the
//     sandbox lives on); as under Linux, it does not bind root (docker.user 0);
//   - the host's pids cgroup still bounds gVisor's threads, at gvisorTasksPerProcess per
//     allowed process plus gvisorBaseTasks, out of the sandbox's reach in normal use.
//
// No host bound holds a sustained fork bomb on the ptrace platform, though. Each stub process
// gets a thread for every thread of gVisor's that ever ran it, and in a storm of processes
// gVisor's threads multiply (476 of them, and stubs of up to 239 threads, 20 s into a bomb
// under nproc 256 here): the host's task count grew by about 400 a second, past 4,352 within
// 5 s in 2 of 9 runs and past 8,448 within 20 s, with no sign of levelling off. Lifting the
// host bound would let one sandbox take all the host's pids (pid_max is 32,768 on the test
// machine), so it stays: the host is protected, and a bomb that outlasts it ends in gVisor's
// kernel stopping (the container exits with gvisorPanicExit; the session's next command
// restarts it, its workspace kept) with an error that says why (explainLost). The KVM
// platform has no stubs but did not start here (nested virtualisation); gVisor's newer
// systrap platform is not in Debian 12's runsc.
const (
	gvisorTasksPerProcess = 16
	gvisorBaseTasks       = 256
	gvisorPanicExit       = 2 // runsc's exit status when gVisor's kernel stops
)

// gvisorHostPids is the host's pids.max for a gVisor sandbox allowed n processes.
func gvisorHostPids(n int64) int64 { return n*gvisorTasksPerProcess + gvisorBaseTasks }

// podmanInitPaths are where Podman looks for catatonit when containers.conf names none
// (Podman 4's default is the first; distributions also install the others).
var podmanInitPaths = []string{"/usr/libexec/podman/catatonit", "/usr/libexec/catatonit/catatonit", "/usr/bin/catatonit"}

// detectEngine asks the engine what it is. Only a local engine's init can be checked (its
// files are on this host); a remote Podman gets the helper as PID 1, which works everywhere.
func detectEngine(ctx context.Context, cli *client.Client, local bool, runtimeName string, getenv func(string) (string, bool)) (engineInfo, error) {
	v, err := cli.ServerVersion(ctx, client.ServerVersionOptions{})
	if err != nil {
		return engineInfo{}, err
	}
	e := engineInfo{arch: v.Arch, product: "Docker Engine " + v.Version, init: true, initNote: "docker-init (the engine's own)"}
	if runtimeName != "" {
		path := runtimeName
		if info, err := cli.Info(ctx, client.InfoOptions{}); err == nil {
			if rt, ok := info.Info.Runtimes[runtimeName]; ok && rt.Path != "" {
				path = rt.Path
			}
		}
		e.gvisor = filepath.Base(path) == "runsc"
	}
	for _, c := range v.Components {
		if strings.HasPrefix(c.Name, "Podman") {
			e.podman = true
			e.product = "Podman Engine " + c.Version
		}
	}
	if e.arch == "" {
		e.arch = runtime.GOARCH
	}
	if !e.podman {
		return e, nil
	}
	e.init = false
	e.initNote = "the sandbox helper is PID 1 and reaps orphans (Podman's init, catatonit, is not installed: apt-get install catatonit to use it)"
	if !local {
		e.initNote = "the sandbox helper is PID 1 and reaps orphans (a remote Podman's catatonit cannot be checked from here)"
		return e, nil
	}
	e.ulimits = podmanUlimits()
	if h, err := podmanHost(ctx, cli); err == nil {
		e.rootless = h.Security.Rootless
		e.noLimits = e.rootless && h.CgroupVersion == "v1"
	}
	if p := podmanInitPath(getenv); p != "" {
		e.init = true
		e.initNote = "catatonit (Podman's init, " + p + ")"
	}
	return e, nil
}

// podmanHostInfo is the part of Podman's own GET /libpod/info that the backend reads. Its
// Docker-compatible /info says neither whether the service is rootless nor that limits are
// ignored (it answers MemoryLimit true either way).
type podmanHostInfo struct {
	Security struct {
		Rootless bool `json:"rootless"`
	} `json:"security"`
	CgroupVersion string `json:"cgroupVersion"` // "v1", "v2"
}

// podmanHost asks a Podman service about its host, through the engine client's own dialer.
func podmanHost(ctx context.Context, cli *client.Client) (podmanHostInfo, error) {
	dial := cli.Dialer()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx) }}}
	defer hc.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://podman/v4.0.0/libpod/info", nil)
	if err != nil {
		return podmanHostInfo{}, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return podmanHostInfo{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return podmanHostInfo{}, fmt.Errorf("GET /libpod/info: %s", resp.Status)
	}
	var info struct {
		Host podmanHostInfo `json:"host"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&info); err != nil {
		return podmanHostInfo{}, fmt.Errorf("GET /libpod/info: %w", err)
	}
	return info.Host, nil
}

// limitsUnenforced says why docker.memory_limit, docker.cpu_quota and docker.pids_limit cannot be
// enforced on this engine, or nil when they can (or are all 0).
func (b *Backend) limitsUnenforced(e engineInfo) error {
	if !e.noLimits {
		return nil
	}
	var set []string
	if b.cfg.MemoryLimit.Bytes() > 0 {
		set = append(set, fmt.Sprintf("docker.memory_limit %s", b.cfg.MemoryLimit))
	}
	if b.cfg.CPUQuota > 0 {
		set = append(set, fmt.Sprintf("docker.cpu_quota %g", b.cfg.CPUQuota))
	}
	if b.cfg.PidsLimit > 0 {
		set = append(set, fmt.Sprintf("docker.pids_limit %d", b.cfg.PidsLimit))
	}
	if len(set) == 0 {
		return nil
	}
	return fmt.Errorf("%s cannot be enforced: rootless Podman on cgroup v1 sets no resource limits (it drops them silently); "+
		"run Podman rootful, or boot the host with cgroup v2 (systemd.unified_cgroup_hierarchy=1) and delegate the memory, cpu and pids "+
		"controllers to the user (systemd's user@.service Delegate=), or set each of them to 0 to run without limits", strings.Join(set, ", "))
}

// podmanVolume makes the workspace volume of spec before its container, with its labels and
// driver options. Podman 4.3 drops the labels of a volume that a container's mount creates
// (Docker keeps them), and without them gc and the session's clean-up, which find volumes by
// label, never see it. A volume that exists already, or that a concurrent first use of the
// session makes meanwhile, is left as it is.
func (b *Backend) podmanVolume(ctx context.Context, spec containerSpec) error {
	for _, m := range spec.host.Mounts {
		if m.Type != mount.TypeVolume || m.Source != spec.workspace || m.VolumeOptions == nil {
			continue
		}
		if _, err := b.cli.VolumeInspect(ctx, m.Source, client.VolumeInspectOptions{}); err == nil {
			return nil
		} else if !cerrdefs.IsNotFound(err) {
			return b.engineErr("inspect volume", m.Source, err)
		}
		opts := client.VolumeCreateOptions{Name: m.Source, Labels: m.VolumeOptions.Labels}
		if d := m.VolumeOptions.DriverConfig; d != nil {
			opts.Driver, opts.DriverOpts = d.Name, d.Options
		}
		if _, err := b.cli.VolumeCreate(ctx, opts); err != nil {
			// Another first use of the session made it between the look and the create
			// (Podman refuses a name in use, where Docker hands back the volume): theirs is
			// made the same way, so it does.
			if _, ierr := b.cli.VolumeInspect(ctx, m.Source, client.VolumeInspectOptions{}); ierr == nil {
				return nil
			}
			return b.engineErr("create volume", m.Source, err)
		}
		return nil
	}
	return nil
}

// podmanInitPath returns the catatonit Podman would run for Init: true (containers.conf's
// init_path, else the default places), or "" when there is none.
func podmanInitPath(getenv func(string) (string, bool)) string {
	confs := []string{"/usr/share/containers/containers.conf", "/etc/containers/containers.conf"}
	if home, _ := getenv("HOME"); home != "" {
		confs = append(confs, filepath.Join(home, ".config", "containers", "containers.conf"))
	}
	if c, _ := getenv("CONTAINERS_CONF"); c != "" {
		confs = append(confs, c)
	}
	configured := ""
	for _, c := range confs { // later files override earlier ones
		if p := confInitPath(c); p != "" {
			configured = p
		}
	}
	candidates := podmanInitPaths
	if configured != "" {
		candidates = []string{configured}
	}
	for _, p := range candidates {
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// confInitPath reads init_path from a containers.conf (TOML; only this one key matters).
func confInitPath(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.TrimSpace(k) != "init_path" {
			continue
		}
		return strings.Trim(strings.TrimSpace(v), `"'`)
	}
	return ""
}

// engine returns what prepare learned about the engine (the zero value before it ran).
func (b *Backend) engine() engineInfo {
	b.prepMu.Lock()
	defer b.prepMu.Unlock()
	return b.eng
}

// Describe names the engine and how its sessions are isolated (hermes-sandbox doctor).
func (b *Backend) Describe() string {
	e := b.engine()
	if e.product == "" {
		return fmt.Sprintf("engine %s (%s)", b.host, b.source)
	}
	rt := b.cfg.Runtime
	if rt == "" {
		rt = "the engine's default runtime"
	}
	if e.gvisor {
		rt += " (gVisor: its own kernel serves the system calls"
		if n := b.cfg.PidsLimit; n > 0 {
			rt += fmt.Sprintf("; processes bounded by nproc %d inside it, its threads by the host's pids.max %d", n, gvisorHostPids(n))
		}
		rt += ")"
	}
	product := e.product
	if e.rootless {
		product += " (rootless"
		if e.noLimits {
			product += "; cgroup v1: no memory, CPU or process limits"
		}
		product += ")"
	}
	return fmt.Sprintf("engine %s (%s): %s; init: %s; runtime: %s", b.host, b.source, product, e.initNote, rt)
}
