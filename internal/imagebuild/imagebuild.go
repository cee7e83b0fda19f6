// Package imagebuild makes a root filesystem from Debian's packages with debootstrap, so a
// machine without a container registry can still get a real image (python3, git…). The result
// is a tar file kept in a cache keyed by suite, packages, mirror and architecture, so the
// second build of the same image takes no download.
package imagebuild

import (
	"archive/tar"
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
)

// Options describe a Debian root filesystem.
type Options struct {
	Suite    string   // bookworm, trixie…
	Packages []string // installed on top of the minimal base
	// Mirror is the Debian archive; "" = the one this machine's apt uses, else deb.debian.org.
	Mirror string
	// CacheDir keeps built root filesystems as tar files; "" = no cache.
	CacheDir string
	// Progress receives debootstrap's progress lines; may be nil.
	Progress io.Writer
	// Debootstrap is the program to run; "" = debootstrap from PATH.
	Debootstrap string
}

// Build returns the path of a tar file holding the root filesystem, building it when the
// cache has none. cached says whether it came from the cache.
func Build(ctx context.Context, o Options) (tarPath string, cached bool, err error) {
	if o.Suite == "" {
		return "", false, errors.New("image build: no Debian suite given (e.g. --debian bookworm)")
	}
	for _, p := range o.Packages {
		if p == "" || strings.ContainsAny(p, " \t,/;") || strings.HasPrefix(p, "-") {
			return "", false, fmt.Errorf("image build: invalid package name %q", p)
		}
	}
	if o.Mirror == "" {
		o.Mirror = HostMirror()
	}
	prog := o.Debootstrap
	if prog == "" {
		prog = "debootstrap"
	}
	if _, err := exec.LookPath(prog); err != nil {
		return "", false, fmt.Errorf("image build: %s not found; install it with `apt-get install debootstrap` (as root)", prog)
	}
	if os.Geteuid() != 0 {
		return "", false, errors.New("image build: debootstrap needs root (run as root, or with sudo)")
	}
	pkgs := slices.Clone(o.Packages)
	slices.Sort(pkgs)
	pkgs = slices.Compact(pkgs)
	key := CacheKey(o.Suite, pkgs, o.Mirror)
	if o.CacheDir != "" {
		tarPath = filepath.Join(o.CacheDir, key+".tar")
		if st, err := os.Stat(tarPath); err == nil && st.Size() > 0 {
			return tarPath, true, nil
		}
		if err := os.MkdirAll(o.CacheDir, 0o700); err != nil {
			return "", false, fmt.Errorf("image build: cache: %w", err)
		}
	}
	work, err := os.MkdirTemp(o.CacheDir, "build-*")
	if err != nil {
		return "", false, fmt.Errorf("image build: %w", err)
	}
	defer os.RemoveAll(work)
	rootfs := filepath.Join(work, "rootfs")
	args := []string{"--variant=minbase"}
	if len(pkgs) > 0 {
		args = append(args, "--include="+strings.Join(pkgs, ","))
	}
	args = append(args, o.Suite, rootfs, o.Mirror)
	if err := runLogged(ctx, o.Progress, prog, args...); err != nil {
		return "", false, fmt.Errorf("image build: debootstrap %s: %w", strings.Join(args, " "), err)
	}
	// Package caches are not part of the image.
	for _, d := range []string{"var/cache/apt/archives", "var/lib/apt/lists"} {
		clearDir(filepath.Join(rootfs, d))
	}
	if err := os.MkdirAll(filepath.Join(rootfs, "workspace"), 0o777); err != nil {
		return "", false, fmt.Errorf("image build: %w", err)
	}
	if o.CacheDir == "" {
		tarPath = filepath.Join(os.TempDir(), "hermes-image-"+key+".tar")
	}
	if err := writeTar(rootfs, tarPath); err != nil {
		return "", false, fmt.Errorf("image build: %w", err)
	}
	return tarPath, false, nil
}

// CacheKey names a root filesystem by what went into it.
func CacheKey(suite string, sortedPkgs []string, mirror string) string {
	h := sha256.Sum256([]byte(strings.Join([]string{suite, strings.Join(sortedPkgs, ","), mirror, runtime.GOARCH}, "\n")))
	return "debian-" + suite + "-" + hex.EncodeToString(h[:8])
}

// HostMirror is the Debian archive this machine's apt uses (deb822 or one-line sources), or
// http://deb.debian.org/debian.
func HostMirror() string {
	files, _ := filepath.Glob("/etc/apt/sources.list.d/*.sources")
	for _, f := range files {
		if m := mirrorIn(f, true); m != "" {
			return m
		}
	}
	files, _ = filepath.Glob("/etc/apt/sources.list.d/*.list")
	for _, f := range append([]string{"/etc/apt/sources.list"}, files...) {
		if m := mirrorIn(f, false); m != "" {
			return m
		}
	}
	return "http://deb.debian.org/debian"
}

// mirrorIn finds the first main Debian archive (not -security, not a third party's) in an
// apt source file.
func mirrorIn(path string, deb822 bool) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		line = strings.TrimSpace(line)
		var uri string
		if deb822 {
			if v, ok := strings.CutPrefix(line, "URIs:"); ok {
				uri = strings.Fields(v + " ")[0]
			}
		} else if f := strings.Fields(line); len(f) >= 3 && f[0] == "deb" {
			uri = f[1]
			if strings.HasPrefix(uri, "[") { // deb [opts] URI
				for _, x := range f[2:] {
					if strings.Contains(x, "://") {
						uri = x
						break
					}
				}
			}
		}
		if strings.Contains(uri, "://") && strings.HasSuffix(strings.TrimSuffix(uri, "/"), "/debian") {
			return strings.TrimSuffix(uri, "/")
		}
	}
	return ""
}

// runLogged runs a program, copying its output lines to w as it goes.
func runLogged(ctx context.Context, w io.Writer, prog string, args ...string) error {
	cmd := exec.CommandContext(ctx, prog, args...)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	var tail []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			tail = append(tail, line)
			if len(tail) > 20 {
				tail = tail[1:]
			}
			if w != nil {
				fmt.Fprintln(w, "  "+line)
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	err := cmd.Run()
	pw.Close()
	<-done
	if err != nil && w == nil && len(tail) > 0 {
		return fmt.Errorf("%w; last output:\n%s", err, strings.Join(tail, "\n"))
	}
	return err
}

func clearDir(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.Name() != "partial" && e.Name() != "lock" {
			os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
}

// writeTar writes dir as a tar file at path, atomically (a temp name, then rename), keeping
// owners, modes, symlinks and hard links as they are.
func writeTar(dir, path string) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tar-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	bw := bufio.NewWriterSize(tmp, 1<<20)
	tw := tar.NewWriter(bw)
	inodes := map[uint64]string{}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		if info.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		}
		hdr, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		if info.IsDir() {
			hdr.Name += "/"
		}
		hdr.Uname, hdr.Gname = "", ""
		if ino, nlink, ok := inode(info); ok && info.Mode().IsRegular() && nlink > 1 {
			if first, seen := inodes[ino]; seen {
				hdr.Typeflag, hdr.Linkname, hdr.Size = tar.TypeLink, first, 0
				return tw.WriteHeader(hdr)
			}
			inodes[ino] = hdr.Name
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
	if err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
