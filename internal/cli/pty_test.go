//go:build unix

package cli_test

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/hermes-sandbox/hermes-sandbox/audit"
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

func TestShellIsAGatedDoor(t *testing.T) {
	e := newEnv(t)
	e.mustRun("config", "set", "sandbox", "local")
	e.mustRun("exec", "-c", "cd /tmp && export SHELLTEST=from-session")
	cfgDir := filepath.Join(e.dir, "config", "hermes-sandbox")
	before, err := os.ReadFile(filepath.Join(cfgDir, "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// The first line runs in the session's state; the second is hardline (an edit of this
	// tool's own config, reached by a relative path) and must not run; the third is dangerous
	// and is denied at the prompt.
	input := "echo \"$SHELLTEST in $(pwd)\"\n" +
		"cd " + cfgDir + " && echo '# edited' >> config.yaml; echo after-hard''line\n" +
		"git reset --hard 2>/dev/null; echo after-danger''ous\n" +
		"d\n" +
		"exit 3\n"
	out, code := ptyRun(t, e, "$ ", input, "shell")
	if code != 3 {
		t.Errorf("shell exit code = %d; want 3 (output %q)", code, out)
	}
	if !strings.Contains(out, "from-session in /tmp") {
		t.Errorf("shell output %q; want the session's env and directory", out)
	}
	if strings.Contains(out, "after-hardline") || !strings.Contains(out, "hardline") {
		t.Errorf("the hardline line ran or was not reported: %q", out)
	}
	if strings.Contains(out, "after-dangerous") || !strings.Contains(out, "Allow?") {
		t.Errorf("the dangerous line ran or was not asked about: %q", out)
	}
	if after, _ := os.ReadFile(filepath.Join(cfgDir, "config.yaml")); !bytes.Equal(before, after) {
		t.Errorf("a refused line edited the config: %q", after)
	}
	rs := auditRecords(t, e)
	var lines []string
	for _, r := range rs {
		if r.Tool == "shell_line" && r.Type == audit.TypeIntent {
			lines = append(lines, r.Verdict+":"+r.Decision)
		}
	}
	if len(lines) != 3 || lines[0] != "safe:allowed" || lines[1] != "hardline:refused" || lines[2] != "dangerous:denied" {
		t.Errorf("audit shell lines = %v; want each line with its verdict", lines)
	}
}

func TestShellNeedsATerminal(t *testing.T) {
	e := newEnv(t)
	e.mustRun("config", "set", "sandbox", "local")
	code, out, errOut := e.run("echo piped\n", "shell")
	out += errOut
	if code == 0 || strings.Contains(out, "piped\n") || !strings.Contains(out, "terminal") {
		t.Errorf("piped shell: code %d, output %q; want a refusal that asks for a terminal", code, out)
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
	// …and neither does a compound command whose findings are all allowlisted…
	if code, _, errOut := e.run("", "exec", "-c", script); code == 126 {
		t.Errorf("compound command with only allowlisted findings: exit %d %q", code, errOut)
	}
	// …but one with another finding still needs approval, and the hint names only that one.
	code, _, errOut := e.run("", "exec", "-c", script+"; git clean -fdx")
	if code != 126 || !strings.Contains(errOut, "git clean") || strings.Contains(errOut, `"git reset`) {
		t.Errorf("compound command with a new finding: exit %d, %q; want 126 naming only git clean", code, errOut)
	}
}

func auditRecords(t *testing.T, e *env) []audit.Record {
	t.Helper()
	rs, err := audit.ReadAll(filepath.Join(e.dir, ".local", "state", "hermes-sandbox", "audit.log"))
	if err != nil {
		t.Fatal(err)
	}
	return rs
}
