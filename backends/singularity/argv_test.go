//go:build !windows

package singularity

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// TestHardeningReachesTheRuntime starts a session through the fake runtime, which refuses
// any flag it does not know (as apptainer does), and checks that every isolation flag reached
// `instance start`, that the helper runs with a clean environment, and that the instance's
// network namespace has only loopback.
func TestHardeningReachesTheRuntime(t *testing.T) {
	for _, readonly := range []bool{true, false} {
		setup := newFakeSetup(t)
		setup.tweak = func(c *config.Config) {
			c.Singularity.Readonly = readonly
			c.Singularity.Binds = []string{"/etc:/hostetc:ro"}
		}
		b := setup.backend(t)
		helperPath, _, err := helper()
		if err != nil {
			t.Fatal(err)
		}
		s := open(t, b, "hard")
		if res := mustExec(t, s, `tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '`); res.Stdout != "lo\n" {
			t.Errorf("readonly=%v: network interfaces = %q; want only lo", readonly, res.Stdout)
		}
		var start, execLine string
		for _, c := range setup.fake.calls(t) {
			switch {
			case strings.HasPrefix(c, "instance start "):
				start = c + " "
			case strings.HasPrefix(c, "exec "):
				execLine = c + " "
			}
		}
		want := []string{" --containall ", " --no-home ", " --no-privs ", " --net ", " --network none ",
			" --pids-limit 1024 ", " -B " + helperPath + ":/.hermes/sandbox-agent:ro ", " -B /etc:/hostetc:ro "}
		if readonly {
			want = append(want, " --writable-tmpfs ")
		} else {
			want = append(want, " --overlay "+filepath.Join(b.sessionDir("hard"), "overlay")+" ")
		}
		for _, w := range want {
			if !strings.Contains(start, w) {
				t.Errorf("readonly=%v: `instance start` lacks %q: %q", readonly, strings.TrimSpace(w), start)
			}
		}
		if !strings.HasPrefix(execLine, "exec --cleanenv ") {
			t.Errorf("helper exec = %q; want --cleanenv first", execLine)
		}
	}
}

// TestFakeRefusesUnknownFlags: the fake runtime is strict, so a misspelt or new flag in the
// backend's command lines fails the tests instead of passing unnoticed.
func TestFakeRefusesUnknownFlags(t *testing.T) {
	f := newFake(t, "apptainer")
	img := testImage(t)
	for _, args := range [][]string{
		{"instance", "start", "--containall", "--no-privz", img, "x"},
		{"instance", "start", "--network=none", img, "y"},
		{"instance", "stop", "--force", "x"},
		{"exec", "--cleanenv", "--contain", "instance://x", "true"},
	} {
		out, err := exec.Command(f.exe, args...).CombinedOutput()
		if err == nil {
			t.Errorf("fake %q succeeded; want a refusal", args)
		} else if !strings.Contains(string(out), "unknown flag") && !strings.Contains(string(out), "unexpected exec argument") {
			t.Errorf("fake %q = %v %q; want it to name the unknown flag", args, err, out)
		}
	}
}

func TestRemoteImage(t *testing.T) {
	tests := map[string]bool{
		"docker://python:3.12-slim": true, "oras://ghcr.io/x/y:1": true, "library://alpine": true,
		"docker-archive:/tmp/x.tar": true, "/images/a.sif": false, "rel/a.sif": false, "a.sif": false,
	}
	for ref, want := range tests {
		if got := remoteImage(ref); got != want {
			t.Errorf("remoteImage(%q) = %v; want %v", ref, got, want)
		}
	}
	a, b := cachedImageName("docker://python:3.12-slim"), cachedImageName("docker://python:3.12")
	if a == b || !strings.HasSuffix(a, ".sif") || strings.ContainsAny(a, "/:") {
		t.Errorf("cachedImageName = %q, %q; want distinct, safe .sif names", a, b)
	}
}

// TestEnvFileContent reads the env file back the way --env-file does (sourced by a shell):
// every value arrives exactly, quotes, newlines, tabs and $(…) included.
func TestEnvFileContent(t *testing.T) {
	env := []string{"A=plain", "B=it's \"q\"\nline2", "C=", "D=$(touch x)\ttab `x` \\"}
	p := filepath.Join(t.TempDir(), "env")
	if err := os.WriteFile(p, envFileContent(env), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("/bin/sh", "-c", `. "$1" && printf '%s\0' "A=$A" "B=$B" "C=$C" "D=$D"`, "sh", p).Output()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00"); !slices.Equal(got, env) {
		t.Errorf("sourced env file = %q; want %q", got, env)
	}
}

// TestPassthroughOnlyListed: only terminal.env_passthrough names reach the helper's env
// file, with their values from FactoryOptions.Environ, and no value is on a command line.
func TestPassthroughOnlyListed(t *testing.T) {
	cfg := config.NewConfig()
	cfg.Singularity.Image = "/x.sif"
	cfg.Terminal.EnvPassthrough = []string{"HERMES_PASS", "NOT_SET"}
	state := t.TempDir()
	b, err := New(cfg.Singularity, cfg.BackendOptions(sandbox.FactoryOptions{StateDir: state,
		Environ: []string{"HERMES_PASS=v1", "SECRET_TOKEN=nope", "HERMES_PASS=v2"}}))
	if err != nil {
		t.Fatal(err)
	}
	be := b.(*Backend)
	if !slices.Equal(be.passEnv, []string{"HERMES_PASS=v2"}) {
		t.Errorf("passEnv = %q; want [HERMES_PASS=v2]", be.passEnv)
	}
	p, err := be.writeEnvFile("s1")
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("env file %s: %v, mode %v; want 0600", p, err, fi.Mode())
	}
	args := execArgs(execSpec{Instance: be.instanceName("s1"), EnvFile: p, Cwd: workdir(cfg.Singularity)})
	if joined := strings.Join(args, " "); strings.Contains(joined, "v2") || strings.Contains(joined, "nope") {
		t.Errorf("exec command line carries a value: %q", joined)
	}
	// No names listed: no file, no flag.
	cfg.Terminal.EnvPassthrough = nil
	b2, _ := New(cfg.Singularity, cfg.BackendOptions(sandbox.FactoryOptions{StateDir: state, Environ: []string{"HERMES_PASS=v"}}))
	if p2, err := b2.(*Backend).writeEnvFile("s1"); err != nil || p2 != "" {
		t.Errorf("writeEnvFile without passthrough = %q, %v; want none", p2, err)
	}
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Errorf("stale env file %s left behind: %v", p, err)
	}
}

func TestInstanceNames(t *testing.T) {
	cfg := config.NewConfig()
	a, _ := New(cfg.Singularity, cfg.BackendOptions(sandbox.FactoryOptions{StateDir: t.TempDir()}))
	b, _ := New(cfg.Singularity, cfg.BackendOptions(sandbox.FactoryOptions{StateDir: t.TempDir()}))
	ab, bb := a.(*Backend), b.(*Backend)
	if ab.instanceName("s") == bb.instanceName("s") {
		t.Errorf("two state directories share instance name %q", ab.instanceName("s"))
	}
	if got := ab.sessionOf(ab.instanceName("my-sess")); got != "my-sess" {
		t.Errorf("sessionOf(instanceName(my-sess)) = %q", got)
	}
	if got := ab.sessionOf(bb.instanceName("my-sess")); got != "" {
		t.Errorf("sessionOf(other scope) = %q; want none", got)
	}
}
