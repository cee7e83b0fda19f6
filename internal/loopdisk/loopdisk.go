// Package loopdisk bounds a directory's size on hosts whose storage has no quota: the
// directory is an ext4 file system in a sparse image file, mounted through a loop device. A
// write past the size fails with ENOSPC inside, and the host's disk grows by at most the
// image's size. It needs root on the host (a loop device and a mount) and mke2fs.
package loopdisk

import (
	"fmt"
	"os"
	"path/filepath"
)

// HostRoot is where the docker backend keeps the bounded workspaces (docker.disk_limit) of
// every state directory on this host, each disk named after its engine volume.
const HostRoot = "/var/lib/hermes-sandbox/disks"

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

// NamespaceError says that the disks this process mounts are not seen by the process that
// must use them: they are in different mount namespaces and mounts do not propagate from
// ours to theirs (a systemd unit with PrivateMounts=, ProtectSystem=…, or `unshare -m`).
type NamespaceError struct {
	Ours, Theirs string // the namespaces, as /proc/PID/ns/mnt reads: mnt:[4026531841]
	Pid          int    // the process that cannot see the disks
}

func (e *NamespaceError) Error() string {
	return fmt.Sprintf("this process runs in a mount namespace of its own (%s; pid %d, which must see the disks, is in %s), "+
		"and mounts made here do not reach it", e.Ours, e.Pid, e.Theirs)
}
