// Package agentbin finds the static sandbox-agent helper binary for a target architecture,
// so a backend can bind-mount it into a container or upload it to a remote host.
package agentbin

import (
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

// EnvVar names a helper binary (or a directory of sandbox-agent-linux-<arch> files) to use.
const EnvVar = "HERMES_SANDBOX_AGENT"

// Path returns a static linux binary of the helper for arch (amd64, arm64). It looks at
// $HERMES_SANDBOX_AGENT, then beside the running executable (sandbox-agent-linux-<arch>,
// sandbox-agent), then at the running executable itself, which can serve as its own helper
// when it is a static linux binary of that architecture (`hermes-sandbox __agent`), then at
// the helper a release build carries (make dist embeds both; written once into the user's
// cache directory), then on
// PATH (sandbox-agent-linux-<arch>, sandbox-agent, then a static hermes-sandbox), so a Go
// program using the library finds a helper installed with `go install`. The second result is
// the argument list that starts the helper's protocol server.
func Path(arch string) (string, []string, error) {
	exe, _ := os.Executable()
	return find(arch, exe)
}

// find is Path with the running executable given ("" = none to consider).
func find(arch, exe string) (string, []string, error) {
	var tried []string
	var candidates []string
	if p := os.Getenv(EnvVar); p != "" {
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			candidates = append(candidates, filepath.Join(p, "sandbox-agent-linux-"+arch), filepath.Join(p, "sandbox-agent"))
		} else {
			candidates = append(candidates, p)
		}
	}
	if exe != "" {
		dir := filepath.Dir(exe)
		candidates = append(candidates, filepath.Join(dir, "sandbox-agent-linux-"+arch), filepath.Join(dir, "sandbox-agent"))
	}
	for _, c := range candidates {
		tried = append(tried, c)
		if err := checkStatic(c, arch); err == nil {
			return c, []string{"serve"}, nil
		}
	}
	if exe != "" && filepath.Base(exe) != "" {
		tried = append(tried, exe)
		if err := checkStatic(exe, arch); err == nil {
			return exe, []string{"__agent", "serve"}, nil
		}
	}
	if p, err := fromEmbedded(arch, helperCache()); err != nil {
		tried = append(tried, "the embedded helper ("+err.Error()+")")
	} else if p != "" {
		return p, []string{"serve"}, nil
	}
	for _, name := range []string{"sandbox-agent-linux-" + arch, "sandbox-agent", "hermes-sandbox"} {
		p, err := exec.LookPath(name)
		if err != nil {
			continue
		}
		tried = append(tried, p)
		if err := checkStatic(p, arch); err == nil {
			if name == "hermes-sandbox" {
				return p, []string{"__agent", "serve"}, nil
			}
			return p, []string{"serve"}, nil
		}
	}
	return "", nil, fmt.Errorf("no static linux/%s sandbox-agent helper found (tried %v): build one with `CGO_ENABLED=0 "+
		"GOOS=linux GOARCH=%s go build -o sandbox-agent-linux-%s ./cmd/sandbox-agent` and put it "+
		"beside hermes-sandbox or on PATH (CGO_ENABLED=0 go install …/cmd/sandbox-agent), or point "+
		"%s at it",
		arch, tried, arch, arch, EnvVar)
}

// checkStatic verifies that p is a statically linked linux ELF for arch.
func checkStatic(p, arch string) error {
	f, err := elf.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[arch]
	if want == 0 || f.Machine != want {
		return fmt.Errorf("%s is for %s, not %s", p, f.Machine, arch)
	}
	if f.OSABI != elf.ELFOSABI_NONE && f.OSABI != elf.ELFOSABI_LINUX {
		return fmt.Errorf("%s is not a linux binary", p)
	}
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return errors.New(p + " is dynamically linked")
		}
	}
	return nil
}

// HostArch is the architecture of this process, the usual target for local containers.
func HostArch() string { return runtime.GOARCH }

// GoArch maps what `uname -m` prints to the architecture the helper is built for; "" when
// there is none.
func GoArch(machine string) string {
	switch machine {
	case "x86_64", "amd64":
		return "amd64"
	case "aarch64", "arm64", "armv8l":
		return "arm64"
	}
	return ""
}
