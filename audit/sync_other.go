//go:build !linux

package audit

import "os"

// syncData makes appended data durable (F_FULLFSYNC on darwin).
func syncData(f *os.File) error { return f.Sync() }
