package testenv

import (
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// busyboxLayout names the root filesystem BusyboxRootfs builds; it is part of the image tag,
// so a change here makes a new image.
const busyboxLayout = "busybox-rootfs-v2: /bin applets, passwd with sandbox(1000), /tmp 0755, no /workspace"

// BusyboxRootfs builds a minimal root filesystem from the host's static busybox (Debian's
// busybox-static) in a temporary directory, for tests that import it as a container image
// (there is no registry here). It returns the directory and an image reference whose tag is
// a hash of the content, so callers can skip the import when the engine has it. what names
// the requirement for Missing (e.g. "docker").
func BusyboxRootfs(t testing.TB, what string) (dir, ref string) {
	t.Helper()
	bb, err := exec.LookPath("busybox")
	if err != nil {
		bb = "/bin/busybox"
	}
	if err := checkStaticELF(bb); err != nil {
		Missing(t, what, "the test image needs a static busybox: apt-get install busybox-static ("+err.Error()+")")
	}
	data, err := os.ReadFile(bb)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bb, "--list").Output()
	if err != nil {
		t.Fatalf("busybox --list: %v", err)
	}
	sum := sha256.Sum256(append(data, busyboxLayout...))
	ref = "hermes-sandbox-test/busybox:" + hex.EncodeToString(sum[:])[:12]
	dir = t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"bin", "etc", "tmp", "proc", "sys", "dev", "root", "usr/bin", "home/sandbox"} {
		must(os.MkdirAll(filepath.Join(dir, d), 0o755))
	}
	// /tmp 0755, as in a bare root filesystem: the sandbox must still work.
	must(os.Chmod(filepath.Join(dir, "tmp"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "bin", "busybox"), data, 0o755))
	for _, a := range strings.Fields(string(out)) {
		if a == "busybox" {
			continue
		}
		must(os.Symlink("busybox", filepath.Join(dir, "bin", a)))
	}
	must(os.Symlink("/bin/env", filepath.Join(dir, "usr", "bin", "env")))
	must(os.WriteFile(filepath.Join(dir, "etc", "passwd"), []byte("root:x:0:0:root:/root:/bin/sh\nsandbox:x:1000:1000:sandbox:/home/sandbox:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"), 0o644))
	must(os.WriteFile(filepath.Join(dir, "etc", "group"), []byte("root:x:0:\nsandbox:x:1000:\nnogroup:x:65534:\n"), 0o644))
	return dir, ref
}

func checkStaticELF(p string) error {
	f, err := elf.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked", p)
		}
	}
	return nil
}
