//go:build !linux

package imagebuild

import "io/fs"

func inode(fs.FileInfo) (uint64, uint64, bool) { return 0, 0, false }
