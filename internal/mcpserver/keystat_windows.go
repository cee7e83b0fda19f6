package mcpserver

import "os"

// statFile stamps a file so a change (an edit, or a rename over it) is noticed. Windows has no
// inode number in os.FileInfo; the time and size stand for it.
func statFile(path string) fileStamp {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}
	}
	return fileStamp{exists: true, mod: fi.ModTime(), size: fi.Size()}
}
