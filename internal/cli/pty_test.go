package cli_test

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
)

// ptyRun starts the real binary on a new pseudo-terminal (its controlling terminal, so
// /dev/tty works), feeds it input once prompt appears, and returns everything it printed and
// its exit code.
func ptyRun(t *testing.T, e *env, prompt, input string, args ...string) (string, int) {
	t.Helper()
	cmd := e.command(t, args...)
	cmd.Env = append(cmd.Env, "TERM=dumb")
	f, err := pty.StartWithAttrs(cmd, &pty.Winsize{Rows: 24, Cols: 100}, &syscall.SysProcAttr{Setsid: true, Setctty: true})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var mu sync.Mutex
	var out bytes.Buffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 4096)
		for {
			n, err := f.Read(buf)
			mu.Lock()
			out.Write(buf[:n])
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		seen := strings.Contains(out.String(), prompt)
		if prompt == "" { // any shell prompt
			seen = strings.Contains(out.String(), "$ ") || strings.Contains(out.String(), "# ")
		}
		mu.Unlock()
		if seen {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			mu.Lock()
			defer mu.Unlock()
			t.Fatalf("never saw %q; output so far: %q", prompt, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	io.WriteString(f, input)
	err = cmd.Wait()
	f.SetReadDeadline(time.Now().Add(time.Second))
	<-done
	mu.Lock()
	defer mu.Unlock()
	if err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatalf("wait: %v", err)
		}
	}
	return out.String(), cmd.ProcessState.ExitCode()
}

func TestShellIsARealTerminal(t *testing.T) {
	e := newEnv(t)
	e.mustRun("config", "set", "sandbox", "local")
	e.mustRun("exec", "-c", "cd /tmp && export SHELLTEST=from-session")
	out, code := ptyRun(t, e, "", "if [ -t 0 ]; then echo tty-yes; fi; echo \"$SHELLTEST in $(pwd)\"; exit 3\n", "shell")
	if code != 3 {
		t.Errorf("shell exit code = %d; want 3 (output %q)", code, out)
	}
	if !strings.Contains(out, "tty-yes") || !strings.Contains(out, "from-session in /tmp") {
		t.Errorf("shell output %q; want a terminal, the session's env and directory", out)
	}
}

func TestManualApprovalPromptsOnTheTerminal(t *testing.T) {
	e := newEnv(t)
	e.mustRun("config", "set", "sandbox", "local")
	repo := t.TempDir()
	if err := os.WriteFile(repo+"/f", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	// `git reset --hard` is dangerous; outside a repository it fails harmlessly.
	script := "cd " + repo + " && git reset --hard 2>/dev/null; echo ran"
	out, code := ptyRun(t, e, "Allow?", "d\n", "exec", "-c", script)
	if code != 126 || strings.Contains(out, "\nran") || !strings.Contains(out, "git-reset-hard") {
		t.Errorf("denied at the prompt: exit %d, output %q; want 126, the finding, and nothing run", code, out)
	}
	out, code = ptyRun(t, e, "Allow?", "o\n", "exec", "-c", script)
	if code != 0 || !strings.Contains(out, "ran") {
		t.Errorf("approved once: exit %d, output %q; want it to run", code, out)
	}
	// Without a terminal, manual mode denies without asking.
	if code, _, errOut := e.run("", "exec", "-c", script); code != 126 || !strings.Contains(errOut, "command_allowlist") {
		t.Errorf("no terminal: exit %d, %q; want 126 and how to allow it", code, errOut)
	}
}

func TestApproveAlwaysPersistsTheAllowlist(t *testing.T) {
	e := newEnv(t)
	e.mustRun("config", "set", "sandbox", "local")
	script := "cd " + t.TempDir() + " && git reset --hard 2>/dev/null; echo ran"
	out, code := ptyRun(t, e, "Allow?", "a\n", "exec", "-c", script)
	if code != 0 || !strings.Contains(out, "ran") {
		t.Fatalf("approved always: exit %d, output %q", code, out)
	}
	list := e.mustRun("config", "get", "approvals.command_allowlist")
	if !strings.Contains(list, "reset") {
		t.Errorf("command_allowlist after 'always' = %q; want the finding's description", list)
	}
	// The same finding no longer needs anyone, even without a terminal…
	// (it runs, and git fails outside a repository: anything but the gate's 126)
	if code, out, errOut := e.run("", "exec", "-c", "git reset --hard"); code == 126 || strings.Contains(errOut, "refused") {
		t.Errorf("allowlisted command: exit %d %q %q", code, out, errOut)
	}
	// …but a compound command never rides on the allowlist.
	if code, _, _ := e.run("", "exec", "-c", script); code != 126 {
		t.Errorf("compound command with an allowlisted part: exit %d; want 126", code)
	}
}
