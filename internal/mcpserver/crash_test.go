package mcpserver_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/hermes-sandbox/hermes-sandbox/internal/agentbin"
	"github.com/hermes-sandbox/hermes-sandbox/internal/mcpserver"
	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv"
	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv/dockerimage"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// spawned is an `mcp --http` server process and its stderr.
type spawned struct {
	cmd  *exec.Cmd
	url  string
	done chan struct{} // closed once the process has exited
	err  error         // its exit; read after done
	mu   sync.Mutex
	log  strings.Builder // guarded by mu
}

func (s *spawned) stderr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.String()
}

// spawnHTTP starts `hermes-sandbox mcp --http 127.0.0.1:0` with environ and waits until it
// listens; the test's end kills it if it still runs.
func spawnHTTP(t *testing.T, bin string, environ []string) *spawned {
	t.Helper()
	s := &spawned{cmd: exec.Command(bin, "mcp", "--http", "127.0.0.1:0"), done: make(chan struct{})}
	s.cmd.Env = environ
	pipe, err := s.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	urlc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pipe)
		re := regexp.MustCompile(`http://\S+/mcp`)
		for sc.Scan() {
			s.mu.Lock()
			s.log.WriteString(sc.Text() + "\n")
			s.mu.Unlock()
			if u := re.FindString(sc.Text()); u != "" {
				select {
				case urlc <- u:
				default:
				}
			}
		}
		s.err = s.cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(func() {
		select {
		case <-s.done:
		default:
			s.cmd.Process.Kill()
			<-s.done
		}
		if t.Failed() {
			t.Logf("server %d stderr:\n%s", s.cmd.Process.Pid, s.stderr())
		}
	})
	select {
	case s.url = <-urlc:
	case <-s.done:
		t.Fatalf("server exited early: %v\n%s", s.err, s.stderr())
	case <-time.After(2 * time.Minute):
		t.Fatalf("server did not report its address\n%s", s.stderr())
	}
	return s
}

// containerOf returns the id of the container of sandbox session name in scope, or "".
func containerOf(t *testing.T, cli *client.Client, scope, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true,
		Filters: client.Filters{}.Add("label", "hermes-sandbox.scope="+scope).Add("label", "hermes-sandbox.session="+name)})
	if err != nil {
		t.Fatalf("list containers: %v", err)
	}
	if len(list.Items) == 0 {
		return ""
	}
	return list.Items[0].ID
}

// TestCrashSweep: an MCP server killed with SIGKILL cannot remove its sandbox. The next
// server started on the same state removes it before it serves, and leaves alone the sandbox
// of a server that still runs.
func TestCrashSweep(t *testing.T) {
	bin := binary(t)
	helper := testenv.AgentBinary(t)
	img := dockerimage.Busybox(t, "the MCP crash sweep test", testenv.DefaultRootfs)
	cli := testenv.Docker(t)
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	sc, err := sandbox.NewScope(filepath.Join(state, "hermes-sandbox"))
	if err != nil {
		t.Fatal(err)
	}
	scope := sc.ID()
	t.Cleanup(func() {
		if left := testenv.RemoveLabelled("hermes-sandbox.scope", scope); left != "" {
			t.Errorf("left behind: %s", left)
		}
	})
	home := filepath.Join(dir, "home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	environ := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "XDG_STATE_HOME=" + state,
		"XDG_CONFIG_HOME=" + filepath.Join(dir, "config"), "HERMES_SANDBOX_AUDIT_LOG_DESTINATION=" + filepath.Join(dir, "audit.log"),
		"HERMES_SANDBOX_TERMINAL_BACKEND=docker", "HERMES_SANDBOX_DOCKER_IMAGE=" + img, "HERMES_SANDBOX_DOCKER_USER=",
		"HERMES_SANDBOX_DOCKER_CWD=/workspace", agentbin.EnvVar + "=" + helper}
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		environ = append(environ, "DOCKER_HOST="+h)
	}

	// open starts a session on srv and returns its sandbox session's container.
	open := func(srv *spawned) string {
		t.Helper()
		cs, err := httpClient(t, srv.url, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		var info mcpserver.InfoResult
		ok(t, cs, "sandbox_info", nil, &info)
		var out mcpserver.TerminalResult
		ok(t, cs, "terminal", map[string]any{"command": "echo up"}, &out)
		if out.Stdout != "up\n" {
			t.Fatalf("terminal: %q", out.Stdout)
		}
		id := containerOf(t, cli, scope, info.Session)
		if id == "" {
			t.Fatalf("no container for session %s in scope %s", info.Session, scope)
		}
		return id
	}
	running := func(id string) bool {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
		return err == nil
	}

	crashed, live := spawnHTTP(t, bin, environ), spawnHTTP(t, bin, environ)
	victim, kept := open(crashed), open(live)
	if err := crashed.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-crashed.done
	if !running(victim) {
		t.Fatal("the killed server's container is gone already: the test would prove nothing")
	}

	next := spawnHTTP(t, bin, environ) // listens only after its sweep
	if running(victim) {
		t.Errorf("the container %.12s of the server killed with SIGKILL survives the next server's start", victim)
	}
	if !strings.Contains(next.stderr(), "removed container") {
		t.Errorf("the next server does not say what it removed:\n%s", next.stderr())
	}
	if !running(kept) {
		t.Errorf("the container %.12s of a server that still runs was removed", kept)
	}

	// Both servers drain on SIGTERM and remove their own sandboxes.
	for _, s := range []*spawned{live, next} {
		s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.done:
			if s.err != nil {
				t.Errorf("server %d after SIGTERM: %v", s.cmd.Process.Pid, s.err)
			}
		case <-time.After(2 * time.Minute):
			t.Errorf("server %d did not exit after SIGTERM", s.cmd.Process.Pid)
		}
	}
	if running(kept) {
		t.Errorf("the live server's container %.12s survives its drain", kept)
	}
}
