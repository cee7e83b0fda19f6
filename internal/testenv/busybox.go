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

// Rootfs describes a busybox root filesystem: Name is part of the image tag (with a hash of
// the layout and the busybox binary, so a change here makes a new image).
type Rootfs struct {
	Name    string      // image repository, e.g. "hermes-sandbox-test/busybox"
	Layout  string      // a description of the layout; part of the tag's hash
	Dirs    []string    // directories created (0755) besides bin, etc, usr/bin
	TmpMode os.FileMode // the mode of /tmp
	Passwd  string      // /etc/passwd
	Group   string      // /etc/group
}

// DefaultRootfs is the layout most tests use: a sandbox user (1000) and a bare 0755 /tmp
// (the sandbox must still work), no /workspace.
var DefaultRootfs = Rootfs{
	Name:    "hermes-sandbox-test/busybox",
	Layout:  "busybox-rootfs-v2: /bin applets, passwd with sandbox(1000), /tmp 0755, no /workspace",
	Dirs:    []string{"tmp", "proc", "sys", "dev", "root", "home/sandbox"},
	TmpMode: 0o755,
	Passwd:  "root:x:0:0:root:/root:/bin/sh\nsandbox:x:1000:1000:sandbox:/home/sandbox:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n",
	Group:   "root:x:0:\nsandbox:x:1000:\nnogroup:x:65534:\n",
}

// BusyboxRootfs builds DefaultRootfs; see BusyboxRootfsWith.
func BusyboxRootfs(t testing.TB, what string) (dir, ref string) {
	t.Helper()
	return BusyboxRootfsWith(t, what, DefaultRootfs)
}

// BusyboxRootfsWith builds a minimal root filesystem from the host's static busybox
// (Debian's busybox-static) in a temporary directory, for tests that import it as a
// container image (there is no registry here). It returns the directory and an image
// reference whose tag is a hash of the content, so callers can skip the import when the
// engine has it. what names the requirement for Missing (e.g. "docker").
func BusyboxRootfsWith(t testing.TB, what string, fs Rootfs) (dir, ref string) {
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
	sum := sha256.Sum256(append(data, fs.Layout...))
	ref = fs.Name + ":" + hex.EncodeToString(sum[:])[:12]
	dir = t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range append([]string{"bin", "etc", "usr/bin"}, fs.Dirs...) {
		must(os.MkdirAll(filepath.Join(dir, d), 0o755))
	}
	if fs.TmpMode != 0 {
		must(os.MkdirAll(filepath.Join(dir, "tmp"), 0o755))
		must(os.Chmod(filepath.Join(dir, "tmp"), fs.TmpMode))
	}
	must(os.WriteFile(filepath.Join(dir, "bin", "busybox"), data, 0o755))
	for _, a := range strings.Fields(string(out)) {
		if a == "busybox" {
			continue
		}
		must(os.Symlink("busybox", filepath.Join(dir, "bin", a)))
	}
	must(os.Symlink("/bin/env", filepath.Join(dir, "usr", "bin", "env")))
	must(os.WriteFile(filepath.Join(dir, "etc", "passwd"), []byte(fs.Passwd), 0o644))
	must(os.WriteFile(filepath.Join(dir, "etc", "group"), []byte(fs.Group), 0o644))
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
