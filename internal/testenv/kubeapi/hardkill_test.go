package kubeapi_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv/kubeapi"
)

const childEnv = "HERMES_KUBEAPI_TEST_CHILD"

// TestHardKillChild is the child of TestHardKill: it starts a server, prints its process ids
// and directory, and waits to be killed. It does nothing in an ordinary run.
func TestHardKillChild(t *testing.T) {
	if os.Getenv(childEnv) == "" {
		return
	}
	s := kubeapi.Start(t)
	fmt.Printf("SERVER %s %s\n", kubeapi.Dir(s), strings.Trim(fmt.Sprint(kubeapi.PIDs(s)), "[]"))
	select {
	case <-t.Context().Done():
	case <-time.After(2 * time.Minute):
		t.Fatal("not killed within 2 minutes")
	}
}

// alive reports whether pid is a live process (a zombie is dead: a container's init may not
// reap the orphans).
func alive(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || (s[i+2] != 'Z' && s[i+2] != 'X')
}

// TestHardKill kills a test process that runs a server with SIGKILL (no TestMain, no Stop)
// and checks that etcd and the apiserver die with it, and that the next start removes their
// directory.
func TestHardKill(t *testing.T) {
	kubeapi.Start(t) // skips, or fails, as the child would
	cmd := exec.Command(os.Args[0], "-test.run=^TestHardKillChild$", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	var dir string
	var pids []int
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	timeout := time.After(3 * time.Minute)
	for dir == "" {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatal("the child exited before it printed its server")
			}
			f := strings.Fields(line)
			if len(f) < 4 || f[0] != "SERVER" {
				t.Log("child:", line)
				continue
			}
			dir = f[1]
			for _, s := range f[2:] {
				pid, _ := strconv.Atoi(s)
				pids = append(pids, pid)
			}
		case <-timeout:
			t.Fatal("the child printed no server within 3 minutes")
		}
	}
	go func() {
		for range lines {
		}
	}()
	for _, pid := range pids {
		if !alive(pid) {
			t.Fatalf("pid %d of the child's server is not alive before the kill", pid)
		}
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("the child's server directory: %v", err)
	}

	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	deadline := time.Now().Add(20 * time.Second)
	for _, pid := range pids {
		for alive(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("pid %d still alive 20 s after its test process was killed", pid)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	kubeapi.RemoveStale()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("Stat(%s) after the next start = %v; want it removed", dir, err)
		os.RemoveAll(dir)
	}
}
