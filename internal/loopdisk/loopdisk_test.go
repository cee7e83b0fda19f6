//go:build linux

package loopdisk_test

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/hermes-sandbox/hermes-sandbox/internal/loopdisk"
	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv"
)

func need(t *testing.T) {
	t.Helper()
	if err := loopdisk.Supported(); err != nil {
		testenv.Missing(t, "loopdisk", "bounded directories: "+err.Error())
	}
}

// TestWritePastTheSizeFails: a disk holds at most its size; a write past it fails with
// ENOSPC, the image on the host stays within the size, and Remove unmounts and deletes it.
func TestWritePastTheSizeFails(t *testing.T) {
	need(t)
	d := loopdisk.At(t.TempDir(), "ws")
	t.Cleanup(func() { d.Remove() })
	const size = 16 << 20
	if err := d.Ensure(t.Context(), size, 1234, 5678); err != nil {
		t.Fatal(err)
	}
	if !d.Mounted() {
		t.Fatal("not mounted after Ensure")
	}
	var st syscall.Stat_t
	if err := syscall.Stat(d.Data(), &st); err != nil || st.Uid != 1234 || st.Gid != 5678 {
		t.Fatalf("data directory: %v, owner %d:%d; want 1234:5678", err, st.Uid, st.Gid)
	}
	f, err := os.Create(filepath.Join(d.Data(), "big"))
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 1<<20)
	var werr error
	written := 0
	for range 2 * size / len(chunk) {
		var n int
		n, werr = f.Write(chunk)
		written += n
		if werr != nil {
			break
		}
	}
	if werr == nil {
		werr = f.Sync()
	}
	f.Close()
	if !errors.Is(werr, syscall.ENOSPC) {
		t.Fatalf("writing %d bytes into a %d-byte disk: %v; want ENOSPC", written, size, werr)
	}
	var img syscall.Stat_t
	if err := syscall.Stat(d.Image, &img); err != nil {
		t.Fatal(err)
	}
	if used := img.Blocks * 512; used > size {
		t.Errorf("the image takes %d bytes on the host; want at most %d", used, size)
	}

	// Unmounted (as after a reboot), the data directory is gone rather than empty, and
	// Ensure mounts the same file system again.
	if err := syscall.Unmount(d.Mount, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(d.Data()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("unmounted disk's data directory: %v; want it missing", err)
	}
	if err := d.Ensure(t.Context(), size, 0, 0); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(d.Data(), "big")); err != nil || fi.Size() == 0 {
		t.Fatalf("after mounting again: %v; want the file written before", err)
	}

	if err := d.Remove(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{d.Image, d.Mount} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s after Remove: %v; want it gone", p, err)
		}
	}
	if err := d.Remove(); err != nil {
		t.Errorf("Remove of a removed disk = %v; want nil", err)
	}
}

// TestSeenBySelf: this process sees its own mounts.
func TestSeenBySelf(t *testing.T) {
	if err := loopdisk.SeenBy(os.Getpid(), t.TempDir()); err != nil {
		t.Errorf("loopdisk.SeenBy(self) = %v; want nil", err)
	}
}
