//go:build !unix

package egress

import "os"

// fileID is "" where files have no inode numbers: size and modification time decide alone.
func fileID(os.FileInfo) string { return "" }
