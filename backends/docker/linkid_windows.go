package docker

import "os"

// fileID is a file's identity; os.FileInfo carries none on Windows.
type fileID struct{ dev, ino uint64 }

// linkID finds no hard links on Windows: each file goes into a build context's tar whole.
func linkID(fi os.FileInfo) (fileID, bool) { return fileID{}, false }
