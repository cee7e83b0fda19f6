package owner

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// honestHello is this process's own call.
func honestHello(t *testing.T) Hello {
	t.Helper()
	h, err := NewHello([]string{"exec", "--", "true"}, os.Environ(), false)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestVerifyPeerTakesNothingOnTrust: every part of a call's key, and its terminal, is checked
// against the calling process itself.
func TestVerifyPeerTakesNothingOnTrust(t *testing.T) {
	if err := VerifyPeer(os.Getpid(), honestHello(t)); err != nil {
		t.Fatalf("this process's own call: %v", err)
	}
	for name, forge := range map[string]func(*Hello){
		"another binary":      func(h *Hello) { h.Key.Exe = "/usr/bin/python3|1:2:3:4" },
		"another directory":   func(h *Hello) { h.Key.Cwd = "/|1:2" },
		"another context":     func(h *Hello) { h.Key.Ctx = strings.Replace(h.Key.Ctx, "NoNewPrivs: 0", "NoNewPrivs: 1", 1) + "x" },
		"a terminal it lacks": func(h *Hello) { h.TTY = !h.TTY },
		"another environment": func(h *Hello) {
			h.Environ = append(h.Environ, "HERMES_SANDBOX_APPROVALS_MODE=off")
			h.Key.Env = keyEnv(h.Environ)
		},
	} {
		h := honestHello(t)
		forge(&h)
		if err := VerifyPeer(os.Getpid(), h); err == nil {
			t.Errorf("a call claiming %s was taken", name)
		}
	}
}

// TestProcContextSeesConfinementAndLimits: a process under another nice value, or with
// no_new_privs (as every confined local command has), has another context.
func TestProcContextSeesConfinementAndLimits(t *testing.T) {
	start := func(argv ...string) string {
		t.Helper()
		cmd := exec.Command(argv[0], argv[1:]...)
		if err := cmd.Start(); err != nil {
			t.Skipf("cannot run %v: %v", argv, err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		pid := strconv.Itoa(cmd.Process.Pid)
		// Wait until the child runs its final program (its /proc/PID/exe is no longer ours).
		self, _ := os.Readlink("/proc/self/exe")
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if exe, err := os.Readlink("/proc/" + pid + "/exe"); err == nil && exe != self && !strings.HasSuffix(exe, "/nice") && !strings.HasSuffix(exe, "/setpriv") {
				break
			}
		}
		ctx, _, err := procContext(pid)
		if err != nil {
			t.Fatal(err)
		}
		return ctx
	}
	plain := start("sleep", "30")
	if niced := start("nice", "-n", "7", "sleep", "30"); niced == plain {
		t.Error("a process under nice 7 has the context of one under nice 0")
	}
	if _, err := exec.LookPath("setpriv"); err == nil {
		if nnp := start("setpriv", "--no-new-privs", "sleep", "30"); nnp == plain {
			t.Error("a process with no_new_privs has the context of one without")
		}
	}
}
