package all

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hermes-sandbox/hermes-sandbox/backends/local"
	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// TestLocalSectionProtectsOwners checks that local is told to protect the session owners'
// sockets, which it no longer works out for itself.
func TestLocalSectionProtectsOwners(t *testing.T) {
	state := t.TempDir()
	o := sandbox.FactoryOptions{Environ: []string{"HOME=/nonexistent", "HERMES_SANDBOX_TERMINAL_STATE_DIR=" + state}}
	sec := localSection(config.NewConfig(), o)
	if want := filepath.Join(state, "owners"); !slices.Contains(sec.Protect, want) {
		t.Errorf("localSection(%v).Protect = %q; want it to hold %q", o.Environ, sec.Protect, want)
	}
	want := local.SectionOf(config.NewConfig()).Protect
	if sec := localSection(config.NewConfig(), sandbox.FactoryOptions{}); !slices.Equal(sec.Protect, want) {
		t.Errorf("localSection without HOME: Protect = %q; want %q", sec.Protect, want)
	}
}

// TestLinuxOnly: singularity's factory off Linux (singularity_other.go) names the platform
// and where to go instead.
func TestLinuxOnly(t *testing.T) {
	err := linuxOnly("singularity", "darwin")
	if want := "singularity: not available on this platform (darwin)"; err == nil || !strings.HasPrefix(err.Error(), want) ||
		!strings.Contains(err.Error(), "ssh backend") || !errors.Is(err, sandbox.ErrUnavailable) {
		t.Errorf("linuxOnly(singularity, darwin) = %v; want %q, the ssh backend and ErrUnavailable", err, want)
	}
}

// slimTags are the Makefile's SLIM_TAGS: every backend but local left out.
var slimTags = "no_docker,no_ssh,no_singularity,no_modal,no_daytona,no_vercel,no_kubernetes"

func TestLeftOut(t *testing.T) {
	_, err := leftOut("modal")
	if want := "modal: not built into this binary; build without -tags no_modal"; err == nil ||
		!strings.Contains(err.Error(), want) || !errors.Is(err, sandbox.ErrInvalidConfig) {
		t.Errorf("leftOut(%q) = %v; want %q and ErrInvalidConfig", "modal", err, want)
	}
}

// TestSlimBuild builds the CLI with every tag, checks that no backend but local is linked in,
// and that choosing a left-out backend says how to get it.
func TestSlimBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the CLI (-short)")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH:", err)
	}
	const main = "github.com/hermes-sandbox/hermes-sandbox/cmd/hermes-sandbox"
	deps, err := exec.CommandContext(t.Context(), goBin, "list", "-deps", "-tags", slimTags, main).Output()
	if err != nil {
		t.Fatalf("go list -deps -tags %s: %v", slimTags, err)
	}
	var linked []string
	for _, p := range strings.Fields(string(deps)) {
		if strings.Contains(p, "/hermes-sandbox/backends/") {
			linked = append(linked, p)
		}
	}
	slices.Sort(linked)
	if want := []string{"github.com/hermes-sandbox/hermes-sandbox/backends/all", "github.com/hermes-sandbox/hermes-sandbox/backends/local"}; !slices.Equal(linked, want) {
		t.Errorf("the slim build links %q; want only %q", linked, want)
	}

	dir := t.TempDir()
	bin := filepath.Join(dir, "hermes-sandbox")
	if out, err := exec.CommandContext(t.Context(), goBin, "build", "-tags", slimTags, "-o", bin, main).CombinedOutput(); err != nil {
		t.Fatalf("go build -tags %s: %v\n%s", slimTags, err, out)
	}
	for _, name := range []string{"docker", "kubernetes"} {
		cmd := exec.CommandContext(t.Context(), bin, "--sandbox", name, "exec", "-c", "true")
		cmd.Dir = dir
		cmd.Env = []string{"HOME=" + dir, "PATH=" + os.Getenv("PATH"), "XDG_CONFIG_HOME=" + filepath.Join(dir, "config"),
			"XDG_STATE_HOME=" + filepath.Join(dir, "state"), "HERMES_SANDBOX_TERMINAL_CWD=" + dir, "HERMES_SANDBOX_TERMINAL_KEEP_ALIVE=0"}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		err := cmd.Run()
		want := name + ": not built into this binary; build without -tags no_" + name
		if err == nil || !strings.Contains(stderr.String(), want) {
			t.Errorf("slim hermes-sandbox --sandbox %s exec: %v, stderr %q; want a failure saying %q", name, err, stderr.String(), want)
		}
	}
}
