package sandbox

import (
	"os"
	"path/filepath"
)

// WriteFileAtomic replaces the file at p (mode 0600) with data through a uniquely named
// temporary file in the same directory, so neither a crash nor another process writing the
// same file at once (several CLI processes recording a session's first use) leaves a torn
// or truncated file.
func WriteFileAtomic(p string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(p), "."+filepath.Base(p)+".*.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o600)
	}
	if err == nil {
		err = os.Rename(tmp, p)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}
