package agentbin

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// dirTarget is a sandbox made of a local directory and /bin/sh; damage changes what an upload
// writes, as a broken stream would.
type dirTarget struct {
	path   string // PATH for the scripts
	damage func([]byte) []byte
	runs   int
}

func (d *dirTarget) Write(ctx context.Context, p string, r io.Reader, size int64) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if int64(len(data)) != size {
		return errors.New("size mismatch in the test")
	}
	if d.damage != nil {
		data = d.damage(data)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, data, 0o600)
}

func (d *dirTarget) Run(ctx context.Context, script string, args ...string) (int, string, error) {
	d.runs++
	cmd := exec.CommandContext(ctx, "/bin/sh", append([]string{"-c", script, "sh"}, args...)...)
	if d.path != "" {
		cmd.Env = []string{"PATH=" + d.path}
	}
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), string(out), nil
	}
	return 0, string(out), err
}

// toolDir is a PATH holding only the named tools, to take sha256sum away.
func toolDir(t *testing.T, tools ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range tools {
		p, err := exec.LookPath(name)
		if err != nil {
			t.Skipf("skipping: no %s here", name)
		}
		if err := os.Symlink(p, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func testBinary() *Binary {
	data := make([]byte, 300_001)
	for i := range data {
		data[i] = byte(rand.N(256))
	}
	return FromBytes(data, nil)
}

func TestInstall(t *testing.T) {
	b := testBinary()
	base := []string{"wc", "chmod", "mv", "rm"}
	for _, tc := range []struct {
		name   string
		tools  []string // nil: the whole PATH
		damage func([]byte) []byte
		want   int // 0 installed, else the InstallError's code
	}{
		{"intact", nil, nil, 0},
		{"short", nil, func(p []byte) []byte { return p[:len(p)-4096] }, ExitCorrupt},
		{"empty", nil, func(p []byte) []byte { return nil }, ExitCorrupt},
		{"one byte changed", nil, func(p []byte) []byte { p[len(p)/2]++; return p }, ExitCorrupt},
		{"one byte changed, only cksum", append(base, "cksum"), func(p []byte) []byte { p[7]++; return p }, ExitCorrupt},
		{"intact, only cksum", append(base, "cksum"), nil, 0},
		{"short, no checksum tool", base, func(p []byte) []byte { return p[:10] }, ExitCorrupt},
		{"intact, no checksum tool", base, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &dirTarget{damage: tc.damage}
			if tc.tools != nil {
				d.path = toolDir(t, tc.tools...)
			}
			dir := filepath.Join(t.TempDir(), "agent")
			final := filepath.Join(dir, b.Name())
			err := Install(t.Context(), d, b, final)
			var ie *InstallError
			switch {
			case tc.want == 0 && err != nil:
				t.Fatalf("Install(%s) = %v; want nil", tc.name, err)
			case tc.want != 0 && (!errors.As(err, &ie) || ie.Code != tc.want || !IsCorrupt(err)):
				t.Fatalf("Install(%s) = %v; want an InstallError with code %d", tc.name, err, tc.want)
			}
			got, rerr := os.ReadFile(final)
			if tc.want == 0 {
				fi, serr := os.Stat(final)
				if rerr != nil || !bytes.Equal(got, mustBytes(t, b)) || serr != nil || fi.Mode().Perm() != 0o700 {
					t.Fatalf("after Install(%s): %d bytes, %v, %v; want the helper, mode 0700", tc.name, len(got), rerr, fi)
				}
			} else if !errors.Is(rerr, os.ErrNotExist) {
				t.Fatalf("after Install(%s): %s exists (%d bytes); a damaged upload must not be installed", tc.name, final, len(got))
			}
			entries, _ := os.ReadDir(dir)
			for _, e := range entries {
				if strings.HasPrefix(e.Name(), ".up-") {
					t.Errorf("after Install(%s): temporary file %s left behind", tc.name, e.Name())
				}
			}
		})
	}
}

func mustBytes(t *testing.T, b *Binary) []byte {
	t.Helper()
	data, err := b.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// The CRC computed here is what POSIX cksum prints, so the fallback check can pass.
func TestCksumMatchesTool(t *testing.T) {
	if _, err := exec.LookPath("cksum"); err != nil {
		t.Skip("skipping: no cksum here")
	}
	for _, n := range []int{0, 1, 255, 256, 65537, 300_001} {
		data := make([]byte, n)
		for i := range data {
			data[i] = byte(rand.N(256))
		}
		cmd := exec.Command("cksum")
		cmd.Stdin = bytes.NewReader(data)
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		want, _, _ := strings.Cut(string(out), " ")
		if got := strconv.FormatUint(uint64(FromBytes(data, nil).CRC), 10); got != want {
			t.Errorf("CRC of %d bytes = %s; cksum says %s", n, got, want)
		}
	}
}

// Load finds the helper, sums it once and keeps the sums in the cache directory.
func TestLoadCachesSums(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "sandbox-agent")
	build := exec.Command("go", "build", "-o", bin, "github.com/hermes-sandbox/hermes-sandbox/cmd/sandbox-agent")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the helper: %v\n%s", err, out)
	}
	t.Setenv(EnvVar, bin)
	cache := t.TempDir()
	b, err := Load(HostArch(), cache)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	want := FromBytes(data, nil)
	if b.Path != bin || len(b.Args) != 0 || b.Size != want.Size || b.SHA256 != want.SHA256 || b.CRC != want.CRC {
		t.Fatalf("Load = %+v; want %s with size %d, SHA-256 %s, CRC %d", b, bin, want.Size, want.SHA256, want.CRC)
	}
	if c, err := os.ReadFile(filepath.Join(cache, "helper-sums.json")); err != nil || !strings.Contains(string(c), want.SHA256) {
		t.Fatalf("cache file = %q, %v; want the SHA-256 in it", c, err)
	}
}
