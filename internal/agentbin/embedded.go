package agentbin

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
)

// EmbedDir is where `make dist` puts the helpers it embeds in a release CLI (build tag
// embedhelpers), relative to this package: sandbox-agent-linux-amd64 and -arm64.
const EmbedDir = "helpers"

// fromEmbedded writes the helper for arch that this CLI carries (a release build: make dist
// embeds both Linux helpers, so a macOS or Windows CLI needs no file beside it) into dir,
// under a name holding its SHA-256, and returns its path; "" when this build carries none.
// A file already there with the same content is used as it is.
func fromEmbedded(arch, dir string) (string, error) {
	data := embeddedHelper(arch)
	if data == nil {
		return "", nil
	}
	return extract(data, arch, dir)
}

// extract writes data, a static linux helper for arch, into dir as
// sandbox-agent-linux-ARCH-SHA (first 16 hex digits), unless it is there already, and checks
// it is what it says.
func extract(data []byte, arch, dir string) (string, error) {
	sum := sha256.Sum256(data)
	p := filepath.Join(dir, "sandbox-agent-linux-"+arch+"-"+hex.EncodeToString(sum[:8]))
	if fi, err := os.Stat(p); err == nil && fi.Size() == int64(len(data)) {
		if got, err := os.ReadFile(p); err == nil && sha256.Sum256(got) == sum {
			return p, checkStatic(p, arch)
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("the embedded helper: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".helper-*")
	if err != nil {
		return "", fmt.Errorf("the embedded helper: %w", err)
	}
	_, err = tmp.Write(data)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o755)
	}
	if err == nil {
		err = checkStatic(tmp.Name(), arch)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), p)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return "", fmt.Errorf("the embedded helper: %w", err)
	}
	return p, nil
}

// helperCache is where embedded helpers are written: the user's cache directory.
func helperCache() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "hermes-sandbox", "helpers")
}
