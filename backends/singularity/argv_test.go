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

func TestStartArgs(t *testing.T) {
	iso := []string{"instance", "start", "--containall", "--no-home", "--no-privs", "--net", "--network", "none"}
	tests := []struct {
		name string
		spec startSpec
		want []string
	}{
		{"readonly, no binds", startSpec{Image: "/img/a.sif", Instance: "hermes-x-s1", Helper: "/bin/agent", Workspace: "/st/ws", Limits: true},
			slices.Concat(iso, []string{"--writable-tmpfs", "-B", "/bin/agent:/.hermes/sandbox-agent:ro", "-B", "/st/ws:/workspace",
				"--pids-limit", "1024", "/img/a.sif", "hermes-x-s1"})},
		{"writable overlay", startSpec{Image: "/img/a.sif", Instance: "hermes-x-s1", Helper: "/bin/agent", Workspace: "/st/ws", Overlay: "/st/ov", Limits: true},
			slices.Concat(iso, []string{"--overlay", "/st/ov", "-B", "/bin/agent:/.hermes/sandbox-agent:ro", "-B", "/st/ws:/workspace",
				"--pids-limit", "1024", "/img/a.sif", "hermes-x-s1"})},
		{"binds, no limits", startSpec{Image: "/c/x.sif", Instance: "hermes-x-s2", Helper: "/h", Workspace: "/w",
			Binds: []string{"/data:/data:ro", "/scratch", "/a b:/mnt/ab:rw"}},
			slices.Concat(iso, []string{"--writable-tmpfs", "-B", "/h:/.hermes/sandbox-agent:ro", "-B", "/w:/workspace",
				"-B", "/data:/data:ro", "-B", "/scratch", "-B", "/a b:/mnt/ab:rw", "/c/x.sif", "hermes-x-s2"})},
	}
	for _, tt := range tests {
		if got := startArgs(tt.spec); !slices.Equal(got, tt.want) {
			t.Errorf("%s: startArgs(%+v) =\n  %q\nwant\n  %q", tt.name, tt.spec, got, tt.want)
		}
	}
}

func TestExecArgs(t *testing.T) {
	tests := []struct {
		spec execSpec
		want []string
	}{
		{execSpec{Instance: "hermes-x-s", Cwd: "/workspace"},
			[]string{"exec", "--cleanenv", "instance://hermes-x-s", "/.hermes/sandbox-agent", "serve", "--state", "/tmp/.hermes/state", "--cwd", "/workspace", "--shell", "auto"}},
		{execSpec{Instance: "hermes-x-s", EnvFile: "/st/env", Pre: []string{"__agent"}, Cwd: "/data", Shell: "bash"},
			[]string{"exec", "--cleanenv", "--env-file", "/st/env", "instance://hermes-x-s", "/.hermes/sandbox-agent", "__agent", "serve", "--state", "/tmp/.hermes/state", "--cwd", "/data", "--shell", "bash"}},
	}
	for _, tt := range tests {
		if got := execArgs(tt.spec); !slices.Equal(got, tt.want) {
			t.Errorf("execArgs(%+v) = %q; want %q", tt.spec, got, tt.want)
		}
	}
}

func TestStopListBuildArgs(t *testing.T) {
	tests := []struct {
		got, want []string
	}{
		{stopArgs("hermes-x-s", false), []string{"instance", "stop", "-t", "10", "hermes-x-s"}},
		{stopArgs("hermes-x-s", true), []string{"instance", "stop", "-F", "hermes-x-s"}},
		{listArgs(), []string{"instance", "list", "--json"}},
		{buildArgs("/c/i.sif", "docker://python:3.12-slim"), []string{"build", "/c/i.sif", "docker://python:3.12-slim"}},
		{versionArgs(), []string{"version"}},
	}
	for _, tt := range tests {
		if !slices.Equal(tt.got, tt.want) {
			t.Errorf("args = %q; want %q", tt.got, tt.want)
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
