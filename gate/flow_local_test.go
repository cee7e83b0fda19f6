package gate_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/hermes-sandbox/hermes-sandbox/backends/local"
	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/gate"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// TestLineFlowPayloadsOnLocal is the attacker's view of #34 item 4 on the local backend with
// the gate on: each command line replaces a harmless run.sh with a payload (or makes a
// harmless name run one) and then runs it. The person at the prompt (who denies) must be
// asked, or the gate must refuse outright, and the payload must not run.
func TestLineFlowPayloadsOnLocal(t *testing.T) {
	ap := &fakeApprover{decision: gate.Deny}
	home, work := t.TempDir(), t.TempDir()
	cfg := config.NewConfig()
	cfg.Terminal.Cwd = work
	lb, err := local.New(cfg.BackendOptions(sandbox.FactoryOptions{StateDir: filepath.Join(home, "state"),
		Environ: []string{"PATH=/usr/bin:/bin", "HOME=" + home}}))
	if err != nil {
		t.Fatal(err)
	}
	b := gate.Wrap(lb, gate.Options{Mode: config.ApprovalManual, Tools: cfg.Tools})
	t.Cleanup(func() { b.Close() })
	s, err := b.Open(context.Background(), "flow")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx := gate.WithApprover(context.Background(), ap)
	// The payload appends to the shell's startup file in the session's home: a finding that
	// needs approval, and a trace the test can see.
	rc := filepath.Join(home, ".bashrc")
	payload := "echo pwned >> ~/.bashrc\n"
	write := func(name, data string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(work, name), []byte(data), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write("evil.sh", payload)
	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	if err := tw.WriteHeader(&tar.Header{Name: "x.sh", Mode: 0o755, Size: int64(len(payload))}); err != nil {
		t.Fatal(err)
	}
	tw.Write([]byte(payload))
	tw.Close()
	write("a.tar", tb.String())

	lines := []string{
		"cp evil.sh run.sh && sh run.sh",
		"cp evil.sh run.sh && ./run.sh",
		"cat evil.sh > run.sh && sh run.sh",
		"ln -sf evil.sh run.sh && sh run.sh",
		"dd if=evil.sh of=run.sh 2>/dev/null && sh run.sh",
		"sed -n 'w run.sh' evil.sh && sh run.sh",
		`python3 -c 'import shutil; shutil.copy("evil.sh", "run.sh")' && sh run.sh`,
		"tar xf a.tar && mv x.sh run.sh && sh run.sh",
		"hash -p /bin/sh ls; ls evil.sh",
		"env 'BASH_FUNC_ls%%=() { echo pwned >> ~/.bashrc; }' bash -c ls",
		`python3 -c 'import os; f=os.system; f("echo pwned >> ~/.bashrc")'`,
		// an escape sequence that repaints the line: policy check said dangerous, exec ran it
		"echo harmless # \x1b[2K\x1b[1Gls -la",
	}
	for _, line := range lines {
		write("run.sh", "echo harmless\n")
		before := len(ap.asked)
		_, err := s.Exec(ctx, sandbox.Command{Script: line})
		var re *gate.RefusedError
		if !errors.As(err, &re) || (re.Reason != "denied" && re.Reason != "hardline") {
			t.Errorf("exec %q: err = %v; want it refused (asked and denied, or hardline)", line, err)
		} else if re.Reason == "denied" && len(ap.asked) == before {
			t.Errorf("exec %q was refused without asking the person", line)
		}
		if data, err := os.ReadFile(rc); err == nil {
			t.Errorf("exec %q ran its payload: ~/.bashrc holds %q", line, data)
			os.Remove(rc)
		}
	}
	// The harmless twins run.
	for _, line := range []string{"cp run.sh copy.sh && sh copy.sh", "tar tf a.tar >/dev/null && sh run.sh"} {
		if res, err := s.Exec(ctx, sandbox.Command{Script: line}); err != nil || res.ExitCode != 0 {
			t.Errorf("exec %q: %v %+v; want it to run", line, err, res)
		}
	}
}
