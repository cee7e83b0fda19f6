package local

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hermes-sandbox/hermes-sandbox/config"
)

// TestSeatbeltOnMac runs commands under a generated profile with /usr/bin/sandbox-exec and
// checks that it confines them: a write in the working directory works and one outside it
// fails, a deny_read file cannot be read, a protected directory cannot be written, and with
// network none a connect to a listening loopback port fails. scripts/verify-macos.sh runs it.
// Each check first proves the thing is there to deny (the file exists, the port listens).
func TestSeatbeltOnMac(t *testing.T) {
	if _, err := os.Stat(SandboxExec); err != nil {
		t.Skipf("no %s: %v", SandboxExec, err)
	}
	real := func(p string) string {
		r, err := filepath.EvalSymlinks(p)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	root := real(t.TempDir())
	work, outside, secret, protect := filepath.Join(root, "work"), filepath.Join(root, "outside"),
		filepath.Join(root, "secret"), filepath.Join(root, "work", "protected")
	for _, d := range []string{work, outside, secret, protect} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(secret, "key"), []byte("s3cret"), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	profile, err := SeatbeltProfile(SeatbeltSpec{WorkDir: work, Protect: []string{protect},
		DenyRead: []string{secret}, Network: config.LocalNetworkNone})
	if err != nil {
		t.Fatal(err)
	}
	run := func(script string) error {
		cmd := exec.Command(SandboxExec, "-p", profile, "/bin/sh", "-c", script)
		cmd.Dir = work
		out, err := cmd.CombinedOutput()
		t.Logf("%s: %v %s", script, err, strings.TrimSpace(string(out)))
		return err
	}
	connect := "exec 3<>/dev/tcp/127.0.0.1/" + strconv.Itoa(port)
	if err := exec.Command("/bin/bash", "-c", connect).Run(); err != nil {
		t.Fatalf("the port does not answer outside the sandbox: %v", err)
	}
	checks := []struct {
		name   string
		script string
		allow  bool
	}{
		{"write in the working directory", "echo ok > " + shellQuote(filepath.Join(work, "f")), true},
		{"write outside the working directory", "echo no > " + shellQuote(filepath.Join(outside, "f")), false},
		{"read a deny_read file", "cat " + shellQuote(filepath.Join(secret, "key")), false},
		{"write in a protected directory", "echo no > " + shellQuote(filepath.Join(protect, "f")), false},
		{"connect with network none", "/bin/bash -c " + shellQuote(connect), false},
	}
	for _, c := range checks {
		err := run(c.script)
		if c.allow && err != nil {
			t.Errorf("FAIL %s: refused: %v", c.name, err)
		} else if !c.allow && err == nil {
			t.Errorf("FAIL %s: allowed", c.name)
		} else {
			t.Logf("PASS %s", c.name)
		}
	}
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
