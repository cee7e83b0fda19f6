//go:build unix

package agent

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"syscall"
	"time"
)

// CopyStats counts what CopyTree copied.
type CopyStats struct {
	Files   int64 // regular files and hard links
	Bytes   int64 // bytes of regular files
	Skipped int64 // devices, sockets and FIFOs, which are not copied
}

// CopyTree copies the tree under from into the directory to, which should be empty: files,
// directories, symbolic links and hard links, with their owners, modes (setuid, setgid and
// sticky bits included) and modification times; to's root gets from's owner and mode.
// Devices, sockets and FIFOs are skipped and counted.
//
// It is the helper's `copytree` command, which a docker fork, restore or snapshot runs in a
// short-lived container that mounts the source volume read-only and the new one writable,
// so the files never leave the engine's host. The source may be a live session's workspace,
// whose commands can swap a directory for a symbolic link while the copy runs: every path is
// resolved inside its own os.Root, so neither a link in from nor one put in place meanwhile
// leads the copy outside from or its writes outside to, and a file that turns into a FIFO is
// opened without blocking and skipped. A file removed meanwhile is left out.
func CopyTree(from, to string) (CopyStats, error) {
	src, err := os.OpenRoot(from)
	if err != nil {
		return CopyStats{}, err
	}
	defer src.Close()
	dst, err := os.OpenRoot(to)
	if err != nil {
		return CopyStats{}, err
	}
	defer dst.Close()
	top, err := src.Lstat(".")
	if err != nil {
		return CopyStats{}, err
	}
	c := &treeCopier{src: src, dst: dst, links: map[fileKey]string{}}
	if err := c.dir(".", top); err != nil {
		return c.stats, err
	}
	return c.stats, nil
}

type fileKey struct{ dev, ino uint64 }

type treeCopier struct {
	src, dst *os.Root
	links    map[fileKey]string // a file with more than one link → where its first copy is
	stats    CopyStats
}

// dir copies the entries of the directory name, then gives its copy fi's owner, mode and
// time (after the entries, whose creation would change the time).
func (c *treeCopier) dir(name string, fi fs.FileInfo) error {
	d, err := c.src.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	entries, err := d.ReadDir(-1)
	d.Close()
	if err != nil {
		return err
	}
	for _, e := range entries {
		p := path.Join(name, e.Name())
		info, err := c.src.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed since it was listed
		}
		if err != nil {
			return err
		}
		switch mode := info.Mode(); {
		case mode.IsDir():
			if err := c.dst.Mkdir(p, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
				return err
			}
			err = c.dir(p, info)
		case mode.IsRegular():
			err = c.file(p, info)
		case mode&fs.ModeSymlink != 0:
			err = c.symlink(p, info)
		default:
			c.stats.Skipped++
		}
		if err != nil {
			return err
		}
	}
	return c.meta(name, fi)
}

func (c *treeCopier) file(name string, fi fs.FileInfo) error {
	st, _ := fi.Sys().(*syscall.Stat_t)
	if st != nil && st.Nlink > 1 {
		key := fileKey{uint64(st.Dev), uint64(st.Ino)}
		if first, ok := c.links[key]; ok {
			if err := c.dst.Link(first, name); err == nil {
				c.stats.Files++
				return nil
			}
		} else {
			c.links[key] = name
		}
	}
	// O_NONBLOCK: a FIFO put in the file's place must not hang the copy (it is skipped below).
	in, err := c.src.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ELOOP) {
		return nil // removed, or replaced by a link, since it was listed
	}
	if err != nil {
		return err
	}
	defer in.Close()
	got, err := in.Stat()
	if err != nil {
		return err
	}
	if !got.Mode().IsRegular() {
		c.stats.Skipped++
		return nil
	}
	out, err := c.dst.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	n, err := io.Copy(out, in) // copy_file_range where the kernel has it
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("copy %s: %w", name, err)
	}
	c.stats.Files++
	c.stats.Bytes += n
	return c.meta(name, got)
}

func (c *treeCopier) symlink(name string, fi fs.FileInfo) error {
	target, err := c.src.Readlink(name)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.EINVAL) {
		return nil // removed, or replaced, since it was listed
	}
	if err != nil {
		return err
	}
	if err := c.dst.Symlink(target, name); err != nil {
		return err
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return c.dst.Lchown(name, int(st.Uid), int(st.Gid))
	}
	return nil
}

// meta gives the copy of name fi's owner, then its mode (a change of owner clears the setuid
// and setgid bits), then its modification time.
func (c *treeCopier) meta(name string, fi fs.FileInfo) error {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		if err := c.dst.Lchown(name, int(st.Uid), int(st.Gid)); err != nil {
			return err
		}
	}
	if err := c.dst.Chmod(name, fi.Mode()&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky)); err != nil {
		return err
	}
	return c.dst.Chtimes(name, time.Time{}, fi.ModTime())
}
