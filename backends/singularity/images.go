//go:build !windows

package singularity

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// partialInfix marks a SIF file still being built: <name>.partial-<pid>.sif.
const partialInfix = ".partial-"

// PullImage converts a remote reference (docker://, oras://, library://, …) into a SIF file in
// the image cache, as the first session would, so that it does not have to. A local SIF file
// needs no pull.
func (b *Backend) PullImage(ctx context.Context, ref string, p sandbox.Progress) (sandbox.ImageInfo, error) {
	if !remoteImage(ref) {
		return sandbox.ImageInfo{}, wrap("pull", ref, fmt.Errorf("not a remote reference: give docker://IMAGE (or oras://, library://); a local SIF file "+
			"needs no pull, set singularity.image to its path: %w", sandbox.ErrInvalidConfig))
	}
	dst, err := b.build(ctx, ref, filepath.Join(b.cacheDir(), cachedImageName(ref)), p)
	if err != nil {
		return sandbox.ImageInfo{}, err
	}
	info, err := b.sifInfo(dst)
	info.Ref = ref
	return info, err
}

// ImportImage builds a SIF file from a root filesystem directory (made by debootstrap, or a
// busybox tree) into the image cache; its path is the value for singularity.image.
func (b *Backend) ImportImage(ctx context.Context, src sandbox.ImageSource, p sandbox.Progress) (sandbox.ImageInfo, error) {
	if src.TarFile != "" {
		return sandbox.ImageInfo{}, wrap("import", src.TarFile, fmt.Errorf("singularity builds images from a directory, not a tar file: unpack it (mkdir DIR && tar "+
			"-xf %s -C DIR) and use --rootfs DIR: %w", src.TarFile, sandbox.ErrUnsupported))
	}
	if src.Tag == "" || sanitized(src.Tag) != src.Tag {
		return sandbox.ImageInfo{}, wrap("import", src.Tag, fmt.Errorf("bad tag %q: use letters, digits, '.', '_' and '-' (it names the SIF file): %w", src.Tag, sandbox.ErrInvalidConfig))
	}
	fi, err := os.Stat(src.RootfsDir)
	if err != nil {
		return sandbox.ImageInfo{}, wrap("import", src.RootfsDir, err)
	}
	if !fi.IsDir() {
		return sandbox.ImageInfo{}, wrap("import", src.RootfsDir, fmt.Errorf("not a directory: %w", sandbox.ErrInvalidConfig))
	}
	dir, err := filepath.Abs(src.RootfsDir)
	if err != nil {
		return sandbox.ImageInfo{}, wrap("import", src.RootfsDir, err)
	}
	dst := filepath.Join(b.cacheDir(), src.Tag+".sif")
	if _, err := os.Stat(dst); err == nil {
		return sandbox.ImageInfo{}, wrap("import", src.Tag, fmt.Errorf("%s exists: choose another --tag, or remove it first: %w", dst, sandbox.ErrInvalidConfig))
	}
	if _, err := b.build(ctx, dir, dst, p); err != nil {
		return sandbox.ImageInfo{}, err
	}
	return b.sifInfo(dst)
}

// Images lists the SIF files in the image cache, and the configured local image.
func (b *Backend) Images(ctx context.Context) ([]sandbox.ImageInfo, error) {
	entries, err := os.ReadDir(b.cacheDir())
	if err != nil && !os.IsNotExist(err) {
		return nil, wrap("list images", "", err)
	}
	var out []sandbox.ImageInfo
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".sif") || strings.Contains(e.Name(), partialInfix) {
			continue
		}
		if info, err := b.sifInfo(filepath.Join(b.cacheDir(), e.Name())); err == nil {
			out = append(out, info)
		}
	}
	if b.cfg.Image != "" && !remoteImage(b.cfg.Image) {
		if p, err := b.localImage(); err == nil && filepath.Dir(p) != b.cacheDir() {
			if info, err := b.sifInfo(p); err == nil {
				out = append(out, info)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Ref < out[j].Ref })
	return out, nil
}

// sifInfo describes one SIF file; its path is its reference.
func (b *Backend) sifInfo(p string) (sandbox.ImageInfo, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return sandbox.ImageInfo{Ref: p}, wrap("image", p, err)
	}
	return sandbox.ImageInfo{Ref: p, ID: p, Size: fi.Size(), Created: fi.ModTime(), Configured: p == b.configuredSIF()}, nil
}

// configuredSIF is the SIF file singularity.image resolves to ("" when it resolves to none).
func (b *Backend) configuredSIF() string {
	switch {
	case b.cfg.Image == "":
		return ""
	case remoteImage(b.cfg.Image):
		return filepath.Join(b.cacheDir(), cachedImageName(b.cfg.Image))
	}
	p, _ := filepath.Abs(b.cfg.Image)
	return p
}

// sanitized replaces what cannot be in a cache file name.
func sanitized(s string) string { return strings.Trim(unsafeChars.ReplaceAllString(s, "_"), "_.") }
