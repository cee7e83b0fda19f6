package cli_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hermes-sandbox/hermes-sandbox/internal/channel"
)

// owners returns the session owners' sockets of e and the PIDs that answer on them.
func (e *env) owners(t *testing.T) map[string]int {
	t.Helper()
	socks, _ := filepath.Glob(filepath.Join(e.dir, "state", "hermes-sandbox", "owners", "*.sock"))
	out := map[string]int{}
	for _, s := range socks {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		r, err := channel.DialOwner(ctx, s)
		cancel()
		if err != nil {
			continue
		}
		out[s] = r.Hello().PID
		r.Close()
	}
	return out
}

// countProcs counts host processes whose command line contains marker.
func countProcs(marker string) int {
	n := 0
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		b, err := os.ReadFile(d + "/cmdline")
		if err == nil && strings.Contains(strings.ReplaceAll(string(b), "\x00", " "), marker) {
			n++
		}
	}
	return n
}

func TestOwnerServesLaterRunsPrivately(t *testing.T) {
	e := newEnv(t)
	e.mustRun("config", "set", "sandbox", "local")
	e.mustRun("exec", "-c", "cd /tmp && export OWNED=1")
	first := e.owners(t)
	if len(first) != 1 {
		t.Fatalf("owners after the first exec = %v; want one", first)
	}
	for sock, pid := range first {
		fi, err := os.Stat(sock)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("owner socket %s mode %v (%v); want 0600", sock, fi.Mode().Perm(), err)
		}
		di, err := os.Stat(filepath.Dir(sock))
		if err != nil || di.Mode().Perm() != 0o700 {
			t.Errorf("owners directory mode %v (%v); want 0700", di.Mode().Perm(), err)
		}
		if unix.Kill(pid, 0) != nil {
			t.Errorf("owner %d is not running", pid)
		}
	}
	if out := e.mustRun("exec", "-c", "pwd; echo $OWNED"); out != "/tmp\n1\n" {
		t.Errorf("second exec printed %q; want /tmp and 1", out)
	}
	if second := e.owners(t); fmt.Sprint(second) != fmt.Sprint(first) {
		t.Errorf("owners after the second exec = %v; want the same one %v", second, first)
	}
	// A changed configuration makes a new owner; the old one is retired.
	e.mustRun("config", "set", "terminal.timeout", "77s")
	e.mustRun("exec", "-c", "true")
	third := e.owners(t)
	for sock, pid := range third {
		if pid == first[sock] {
			t.Errorf("owner %d kept serving after the configuration changed", pid)
		}
	}
}

func TestOwnerKeepAliveExpires(t *testing.T) {
	e := newEnv(t)
	e.environ = append(e.environ, "HERMES_SANDBOX_TERMINAL_KEEP_ALIVE=1s")
	e.mustRun("config", "set", "sandbox", "local")
	e.mustRun("exec", "-c", "true")
	owners := e.owners(t)
	if len(owners) != 1 {
		t.Fatalf("owners = %v; want one", owners)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, pid := range owners {
		for unix.Kill(pid, 0) == nil {
			if time.Now().After(deadline) {
				t.Fatalf("owner %d still runs 30s after a 1s keep_alive", pid)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if out := e.mustRun("exec", "-c", "echo again"); out != "again\n" {
		t.Errorf("exec after the owner left printed %q", out)
	}
}

func TestNoOwnerWithKeepAliveZero(t *testing.T) {
	e := newEnv(t)
	e.environ = append(e.environ, "HERMES_SANDBOX_TERMINAL_KEEP_ALIVE=0")
	e.mustRun("config", "set", "sandbox", "local")
	e.mustRun("exec", "-c", "export Z=1")
	if out := e.mustRun("exec", "-c", "echo $Z"); out != "1\n" {
		t.Errorf("state across runs without an owner: %q", out)
	}
	if o := e.owners(t); len(o) != 0 {
		t.Errorf("keep_alive 0 started owners %v", o)
	}
}

// TestTenFirstExecs: ten CLI processes start at once on a new session: all succeed, and
// they share one owner and one session.
func TestTenFirstExecs(t *testing.T) {
	e := newEnv(t)
	e.mustRun("config", "set", "sandbox", "local")
	file := filepath.Join(e.dir, "first")
	var wg sync.WaitGroup
	errs := make(chan string, 10)
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := e.command(t, "exec", "--session", "fresh", "-c", fmt.Sprintf("echo %d >> %s; export FIRST_%d=1", i, file, i)).CombinedOutput()
			if err != nil {
				errs <- fmt.Sprintf("exec #%d: %v: %s", i, err, out)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if o := e.owners(t); len(o) != 1 {
		t.Errorf("owners = %v; want one", o)
	}
	b, _ := os.ReadFile(file)
	if n := len(strings.Fields(string(b))); n != 10 {
		t.Errorf("%d of 10 first execs ran", n)
	}
	out := e.mustRun("exec", "--session", "fresh", "-c", "env | grep -c '^FIRST_'")
	if strings.TrimSpace(out) != "10" {
		t.Errorf("exports kept from ten simultaneous first execs: %q; want 10", out)
	}
}

// TestKilledCallerKillsItsCommand: kill -9 of the CLI ends its command's whole tree.
func TestKilledCallerKillsItsCommand(t *testing.T) {
	e := newEnv(t)
	e.mustRun("config", "set", "sandbox", "local")
	marker := fmt.Sprint(time.Now().UnixNano()%1_000_000 + 4_000_000)
	cmd := e.command(t, "exec", "-c", "sleep 1"+marker+" & sh -c 'sleep 2"+marker+"' & echo started; wait")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	if line != "started\n" {
		t.Fatalf("first line %q", line)
	}
	if n := countProcs(marker); n < 2 {
		t.Fatalf("%d processes with the marker before the kill; want 2", n)
	}
	cmd.Process.Kill()
	cmd.Wait()
	deadline := time.Now().Add(20 * time.Second)
	for countProcs(marker) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d processes of the killed caller's command still run", countProcs(marker))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestStateNotSavedIsReported(t *testing.T) {
	e := newEnv(t)
	e.mustRun("config", "set", "sandbox", "local")
	code, out, errOut := e.run("", "exec", "--json", "-c", "export LOST=1; __hermes_st=/nonexistent-hermes/x")
	if code != 0 {
		t.Fatalf("exec exited %d: %s", code, errOut)
	}
	var res struct {
		StateSaved *bool `json:"state_saved"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.StateSaved == nil || *res.StateSaved {
		t.Errorf("--json = %s (%v); want state_saved false", out, err)
	}
	if !strings.Contains(errOut, "could not be saved") {
		t.Errorf("stderr = %q; want a warning", errOut)
	}
	_, out, _ = e.run("", "exec", "--json", "-c", "true")
	if !strings.Contains(out, `"state_saved":true`) {
		t.Errorf("an ordinary exec = %s; want state_saved true", out)
	}
}
