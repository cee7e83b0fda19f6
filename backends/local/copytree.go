//go:build !windows

package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

var errNoClone = errors.New("filesystem cannot clone files")

// copyStats says what a copyTree did.
type copyStats struct {
	bytes  int64 // regular files' bytes
	copied int64 // of which copied byte by byte (counted against local.branch_max_bytes)
	cloned bool  // at least one file was cloned
}

// copyTree copies src to dst (which must not exist): directories, regular files (cloned
// where the filesystem can, else copied, at most b.branchMax bytes of those), symbolic links
// as they are, named pipes anew. Sockets and devices are skipped. This tool's own state and
// branches, if they lie inside src, are not copied.
func (b *Backend) copyTree(ctx context.Context, src, dst string) (copyStats, error) {
	var st copyStats
	canClone := true
	skip := map[string]bool{b.opts.StateDir: true, b.opts.StateDir + "-branches": true}
	type dirMode struct {
		path string
		mode fs.FileMode
	}
	var dirs []dirMode
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if skip[p] {
			return filepath.SkipDir
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch mode := info.Mode(); {
		case mode.IsDir():
			// Owner-writable while we fill it; the real mode is set after (below).
			dirs = append(dirs, dirMode{target, mode.Perm()})
			return os.Mkdir(target, mode.Perm()|0o700)
		case mode&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case mode&fs.ModeNamedPipe != 0:
			return mkfifo(target, mode)
		case mode.IsRegular():
			st.bytes += info.Size()
			return b.copyFile(p, target, mode, &canClone, &st)
		default:
			return nil // a socket or device: a copy of either means nothing
		}
	})
	if errors.Is(err, errOverLimit) {
		return st, fmt.Errorf("%s holds more than local.branch_max_bytes (%d bytes) to copy, and its filesystem cannot clone files (FICLONE): "+
			"raise it (hermes-sandbox config set local.branch_max_bytes 4g), or keep the tree on btrfs or XFS, where copies are clones: %w",
			src, b.branchMax, sandbox.ErrLimit)
	}
	if err != nil {
		return st, err
	}
	// Each directory gets its source's mode, deepest first, once nothing more is written into
	// it (a read-only one was owner-writable while filled).
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := os.Chmod(dirs[i].path, dirs[i].mode); err != nil {
			return st, err
		}
	}
	return st, nil
}

var errOverLimit = errors.New("over local.branch_max_bytes")

func (b *Backend) copyFile(from, to string, mode fs.FileMode, canClone *bool, st *copyStats) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode.Perm()|0o200)
	if err != nil {
		return err
	}
	if *canClone {
		err := cloneFile(out, in)
		if err == nil {
			st.cloned = true
			return closeWithMode(out, mode)
		}
		if !errors.Is(err, errNoClone) {
			out.Close()
			return fmt.Errorf("clone %s: %w", from, err)
		}
		*canClone = false // the same filesystem will say the same for every other file
	}
	left := b.branchMax - st.copied
	n, err := io.Copy(out, io.LimitReader(in, left+1))
	st.copied += n
	if err == nil && st.copied > b.branchMax {
		err = errOverLimit
	}
	if err != nil {
		out.Close()
		return err
	}
	return closeWithMode(out, mode)
}

func closeWithMode(f *os.File, mode fs.FileMode) error {
	err := f.Chmod(mode.Perm())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
