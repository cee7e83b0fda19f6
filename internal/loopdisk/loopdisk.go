// Package loopdisk bounds a directory's size on hosts whose storage has no quota: the
// directory is an ext4 file system in a sparse image file, mounted through a loop device. A
// write past the size fails with ENOSPC inside, and the host's disk grows by at most the
// image's size. It needs root on the host (a loop device and a mount) and mke2fs.
package loopdisk

import (
	"os"
	"path/filepath"
)

// Disk is one bounded directory: Image is the image file, Mount the directory it is mounted
// on. The bounded directory handed out is Data, a directory inside the file system, so that
// a disk that is not mounted has no Data at all (rather than an empty one).
type Disk struct {
	Image string
	Mount string
}

// At names the disk for key under root.
func At(root, key string) Disk {
	return Disk{Image: filepath.Join(root, key+".img"), Mount: filepath.Join(root, key)}
}

// Data is the bounded directory.
func (d Disk) Data() string { return filepath.Join(d.Mount, "data") }

// Exists reports whether the disk's image exists.
func (d Disk) Exists() bool {
	_, err := os.Stat(d.Image)
	return err == nil
}
