package sandboxtest

import "os"

// readHostFile reads a spill file; spill files live on the caller's host.
func readHostFile(p string) ([]byte, error) { return os.ReadFile(p) }
