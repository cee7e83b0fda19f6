//go:build unix

package cli_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/hermes-sandbox/hermes-sandbox/internal/agentbin"
	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv"
	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv/dockerimage"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// dockerPoolEnv is an isolated user whose execs run in docker with a warm pool of poolSize
// containers, and the engine and this user's scope (the label value its containers carry).
// When the test ends, after its session owners have been stopped, nothing of the scope may
// be left: not a container, not a volume.
func dockerPoolEnv(t *testing.T, poolSize int) (*env, *client.Client, string) {
	t.Helper()
	img := dockerimage.Busybox(t, "ephemeral runs from the owner's warm pool", testenv.DefaultRootfs)
	cli := testenv.Docker(t)
	e := newEnv(t)
	e.environ = append(e.environ, "HERMES_SANDBOX_TERMINAL_BACKEND=docker", "HERMES_SANDBOX_DOCKER_IMAGE="+img,
		"HERMES_SANDBOX_DOCKER_USER=", "HERMES_SANDBOX_DOCKER_CWD=/workspace",
		fmt.Sprintf("HERMES_SANDBOX_DOCKER_POOL_SIZE=%d", poolSize), agentbin.EnvVar+"="+os.Getenv(agentbin.EnvVar))
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		e.environ = append(e.environ, "DOCKER_HOST="+h)
	}
	sc, err := sandbox.NewScope(filepath.Join(e.dir, "state", "hermes-sandbox"))
	if err != nil {
		t.Fatal(err)
	}
	scope := sc.ID()
	// Registered before the owners' stop (which the first command registers), so it runs after.
	t.Cleanup(func() {
		deadline := time.Now().Add(time.Minute)
		for {
			ctrs, vols := scopeObjects(t, cli, scope)
			if len(ctrs)+len(vols) == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("left behind after the owner exited: containers %v, volumes %v", ctrs, vols)
				e.logOwners(t)
				testenv.RemoveLabelled("hermes-sandbox.scope", scope)
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	return e, cli, scope
}

// logOwners shows the owners' logs (why a member was not reused, what was not removed).
func (e *env) logOwners(t *testing.T) {
	logs, _ := filepath.Glob(filepath.Join(e.ownersDir(), "*.log"))
	for _, l := range logs {
		data, _ := os.ReadFile(l)
		t.Logf("owner log %s:\n%s", l, data)
	}
}

// scopeObjects lists the names of the containers and volumes of scope.
func scopeObjects(t *testing.T, cli *client.Client, scope string) (ctrs, vols []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f := client.Filters{}.Add("label", "hermes-sandbox.scope="+scope)
	list, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		t.Fatalf("list containers: %v", err)
	}
	for _, c := range list.Items {
		ctrs = append(ctrs, strings.TrimPrefix(c.Names[0], "/"))
	}
	vl, err := cli.VolumeList(ctx, client.VolumeListOptions{Filters: f})
	if err != nil {
		t.Fatalf("list volumes: %v", err)
	}
	for _, v := range vl.Items {
		vols = append(vols, v.Name)
	}
	return ctrs, vols
}

// waitOwnedEphemeralsGone waits until the scope has no container but unclaimed pool members
// (a claimed one is renamed to its session's name) and no volume but theirs.
func waitOwnedEphemeralsGone(t *testing.T, e *env, cli *client.Client, scope string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var left []string
		ctrs, vols := scopeObjects(t, cli, scope)
		for _, n := range append(ctrs, vols...) {
			if !strings.HasPrefix(n, "hermes-pool-") {
				left = append(left, n)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			e.logOwners(t)
			t.Fatalf("ephemeral sandboxes left 2 minutes after their runs: %v", left)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// warmPoolOwner runs two ephemeral execs, which start the environment's owner (an owner
// starts at the second exec), and checks that one runs.
func (e *env) warmPoolOwner(t *testing.T) {
	t.Helper()
	for range 2 {
		if code, out, errOut := e.execBin(t, "", nil, "exec", "--ephemeral", "--", "true"); code != 0 {
			t.Fatalf("exec --ephemeral -- true: %d %q %q", code, out, errOut)
		}
	}
	if pids := e.ownerPids(t); len(pids) != 1 {
		t.Fatalf("owners after two ephemeral execs: %v; want one", pids)
	}
}

// waitPoolMember polls the engine, with a deadline, until the owner's pool has a running,
// unclaimed container of scope. A claimed member keeps its role label but is renamed to its
// session's name, so only the name tells them apart; without it, the member the warm-up's
// last run claimed (still running while it is removed) would pass for the refill.
func waitPoolMember(t *testing.T, cli *client.Client, scope string) {
	t.Helper()
	f := client.Filters{}.Add("label", "hermes-sandbox.scope="+scope).Add("label", "hermes-sandbox.role=pool").
		Add("status", "running").Add("name", "^/?hermes-pool-"+scope+"-")
	deadline := time.Now().Add(2 * time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		list, err := cli.ContainerList(ctx, client.ContainerListOptions{Filters: f})
		cancel()
		if err == nil && len(list.Items) > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no running pool container of the owner after 2 minutes (last error: %v)", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestEphemeralPoolMemberCarriesNothing: an ephemeral exec through the owner gets a member
// of the warm pool (proved from the engine while the task runs). The task is an attacker that
// tries to leave something for the next one: processes started with setsid and orphaned, files
// and dotfiles in every writable directory (a directory it made unreadable and undeletable
// for itself among them), a fifo, an export and a cd. The owner resets the member and hands
// it to the next task (the same container: the test checks it is reused), which sees none of
// it and is as hardened as a fresh sandbox: no file, process, System V IPC object, POSIX
// message queue or exported variable. A member that fails the reset is removed instead: a
// task that changes what a reset does not restore (the workspace directory's own mode) gets
// no successor in its container.
func TestEphemeralPoolMemberCarriesNothing(t *testing.T) {
	e, cli, scope := dockerPoolEnv(t, 1)
	// The gate asks about the first task's running of the binary it wrote (run-unseen-content);
	// nobody is there to approve it, so this user's configuration allows it.
	e.mustRun("config", "set", "approvals.command_allowlist",
		`["running a file that an earlier part of the same command line wrote with content the gate cannot see"]`)
	ipcleave := buildIPCLeave(t)
	e.warmPoolOwner(t)
	waitPoolMember(t, cli, scope)

	const marker = "6173" // the background processes are `sleep 6173`: findable in /proc
	// procs counts the processes whose command line is exactly `sleep 6173`.
	procs := `procs() { for p in /proc/[0-9]*; do tr '\0' ' ' <$p/cmdline 2>/dev/null; echo; done | grep -c '^sleep ` + marker + ` $'; }; `
	// leave writes a file and a dotfile in each directory given.
	// ipcCount prints the System V objects there are (the lines of /proc/sysvipc/* past their
	// headers) and the POSIX message queues.
	const ipcCount = `echo "ipc=$(cat /proc/sysvipc/shm /proc/sysvipc/sem /proc/sysvipc/msg | grep -vc '^ *key') mq=$(ls -A /dev/mqueue)"`
	leave := `leave() { for d; do echo secret >$d/carry && echo secret >$d/.carry || return 1; done; }; `
	first := e.command(t, "exec", "--ephemeral", "-c", procs+leave+
		// The System V objects and the POSIX message queue come from a static binary that
		// the task reads from its stdin (busybox has no ipcmk).
		fmt.Sprintf(`head -c %d >/workspace/.ipcleave && chmod +x /workspace/.ipcleave && /workspace/.ipcleave && `, len(ipcleave))+
		`leave /workspace /tmp /dev/shm && mkdir -p /workspace/deep/er /tmp/.hid && leave /workspace/deep/er /tmp/.hid && `+
		`chmod 0 /workspace/deep && mkfifo /tmp/fifo-carry /workspace/.fifo-carry && `+
		`export CARRY=secret && cd /tmp && `+
		`(setsid sleep `+marker+` </dev/null >/dev/null 2>&1 &) && (sleep `+marker+` </dev/null >/dev/null 2>&1 &) && `+
		// The test's own deadline bounds this wait for the processes to show up.
		`until [ "$(procs)" = 2 ]; do sleep 0.05; done; hostname && `+
		`cat /workspace/carry /tmp/.carry /dev/shm/carry && echo "env=$CARRY" && procs && `+ipcCount+` && echo ready && read go && echo "go=$go"`)
	stdin, err := first.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := first.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errb strings.Builder
	first.Stderr = &errb
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	defer first.Process.Kill()
	go stdin.Write(ipcleave) // ends with an error if the task does
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var seen []string
	timeout := time.After(2 * time.Minute)
	for len(seen) == 0 || seen[len(seen)-1] != "ready" {
		select {
		case l, ok := <-lines:
			if !ok {
				first.Wait()
				t.Fatalf("the first task ended before it was ready: %q %q", seen, errb.String())
			}
			seen = append(seen, l)
		case <-timeout:
			t.Fatalf("the first task is not ready after 2 minutes: %q %q", seen, errb.String())
		}
	}
	// What the checks below look for is there while the first task runs.
	if len(seen) != 9 || seen[0] != "ipc-left" || seen[2] != "secret" || seen[3] != "secret" || seen[4] != "secret" || seen[5] != "env=secret" || seen[6] != "2" || seen[7] != "ipc=3 mq=carry" {
		t.Fatalf("the first task saw %q; want its IPC objects, hostname, files, variable and two processes", seen)
	}
	host := seen[1]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	info, err := cli.ContainerInspect(ctx, host, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatalf("inspect the first task's container %s: %v", host, err)
	}
	if role := info.Container.Config.Labels["hermes-sandbox.role"]; role != "pool" {
		t.Errorf("the first task's container has role %q; want a member of the warm pool", role)
	}
	fmt.Fprintln(stdin, "yes")
	stdin.Close()
	if err := first.Wait(); err != nil {
		t.Fatalf("the first task: %v %q", err, errb.String())
	}
	var rest []string
	for l := range lines {
		rest = append(rest, l)
	}
	if len(rest) != 1 || rest[0] != "go=yes" {
		t.Errorf("the first task's end: %q; want go=yes", rest)
	}

	check := procs + `hostname; pwd; ls -A /workspace /tmp /tmp/.hermes/state /dev/shm /dev/mqueue; echo "env=${CARRY-unset}"; ` +
		`echo "procs=$(procs)"; ` + ipcCount + `; ` +
		`grep CapEff /proc/self/status; ls /sys/class/net; touch /rootfs-probe 2>&1 || echo ro-root; ` +
		`touch /workspace/w /tmp/t && echo writable`
	code, out, errOut := e.execBin(t, "", nil, "exec", "--ephemeral", "-c", check)
	if code != 0 {
		t.Fatalf("the second task: %d %q %q", code, out, errOut)
	}
	got := strings.Split(strings.TrimSpace(out), "\n")
	if got[0] != host {
		t.Errorf("the second task ran in %s, not in the first task's container %s: the member was not reset and reused", got[0], host)
		e.logOwners(t)
	}
	for _, bad := range []string{"carry", "deep", ".hid", "ipcleave", "env=secret"} {
		if strings.Contains(out, bad) {
			t.Errorf("the second task sees %q of the first: %q", bad, out)
		}
	}
	for _, want := range []string{"\n/workspace\n", "env=unset", "procs=0", "ipc=0 mq=\n", "CapEff:\t0000000000000000", "\nlo\n", "ro-root", "writable"} {
		if !strings.Contains(out, want) {
			t.Errorf("the second task's output lacks %q: %q", want, out)
		}
	}
	if strings.Contains(out, "eth0") {
		t.Errorf("the second task has a network interface: %q", out)
	}

	// A change the reset does not undo (the workspace's own mode: a reset empties it, and the
	// fingerprint sees the difference): the member is removed, and the next task runs in
	// another container, without the change.
	if code, out, errOut := e.execBin(t, "", nil, "exec", "--ephemeral", "-c", "hostname; chmod 0751 /workspace && echo changed"); code != 0 || out != host+"\nchanged\n" {
		t.Fatalf("the third task: %d %q %q; want it in %s, changing the workspace's mode", code, out, errOut, host)
	}
	waitFor(t, "the member whose workspace mode changed to be removed", 2*time.Minute, func() bool {
		_, err := cli.ContainerInspect(ctx, host, client.ContainerInspectOptions{})
		return err != nil
	})
	code, out, errOut = e.execBin(t, "", nil, "exec", "--ephemeral", "-c", "hostname; stat -c %a /workspace")
	if code != 0 || strings.HasPrefix(out, host) || !strings.HasSuffix(out, "\n755\n") {
		t.Errorf("the fourth task: %d %q %q; want another container than %s, its workspace mode 755", code, out, errOut, host)
	}
	waitOwnedEphemeralsGone(t, e, cli, scope)
}

// TestEphemeralConcurrentCLIRuns: 50 `exec --ephemeral` processes at once share one owner's
// pool; every one succeeds in a sandbox of its own (no other task's file in it), and none is
// left when they are done.
func TestEphemeralConcurrentCLIRuns(t *testing.T) {
	e, cli, scope := dockerPoolEnv(t, 4)
	e.warmPoolOwner(t)
	owners := e.ownerPids(t)
	const n = 50
	hosts := make([]string, n)
	var wg sync.WaitGroup
	errs := make(chan string, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A task sees its own file in the workspace and nothing else: no other task ran in
			// its sandbox meanwhile, and none left anything there before (members are reused
			// after a reset).
			cmd := e.command(t, "exec", "--ephemeral", "-c", fmt.Sprintf("hostname; touch /workspace/mine-%d; sleep 0.2; ls -A /workspace; echo task-%d", i, i))
			var out, errb strings.Builder
			cmd.Stdout, cmd.Stderr, cmd.Stdin = &out, &errb, strings.NewReader("")
			// Bounds the wait for pipes held by something the task left running; generous, as a
			// loaded machine can be slow to drain them.
			cmd.WaitDelay = 30 * time.Second
			done := make(chan error, 1)
			if err := cmd.Start(); err != nil {
				errs <- err.Error()
				return
			}
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				lines := strings.Split(strings.TrimSpace(out.String()), "\n")
				if err != nil || len(lines) != 3 || lines[1] != fmt.Sprint("mine-", i) || lines[2] != fmt.Sprint("task-", i) {
					errs <- fmt.Sprintf("task %d: %v %q %q", i, err, out.String(), errb.String())
					return
				}
				hosts[i] = lines[0]
			case <-time.After(5 * time.Minute):
				cmd.Process.Kill()
				errs <- fmt.Sprintf("task %d still runs after 5 minutes", i)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	distinct := map[string]bool{}
	for _, h := range hosts {
		if h != "" {
			distinct[h] = true
		}
	}
	t.Logf("%d tasks ran in %d containers", n, len(distinct))
	if got := e.ownerPids(t); len(got) != 1 || got[0] != owners[0] {
		t.Errorf("owners after the tasks: %v; want the one from before (%v)", got, owners)
	}
	waitOwnedEphemeralsGone(t, e, cli, scope)
}

// buildIPCLeave builds testdata/ipcleave, static, for the sandboxes' architecture (this one's).
func buildIPCLeave(t *testing.T) []byte {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skipf("no go command to build the IPC attacker with: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "ipcleave")
	build := exec.Command("go", "build", "-o", bin, "./testdata/ipcleave")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build testdata/ipcleave: %v\n%s", err, out)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
