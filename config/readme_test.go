package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadmeConfigurationExampleLoads: the YAML example in the README's Configuration section is
// a configuration this version loads (it once had audit: twice).
func TestReadmeConfigurationExampleLoads(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Skipf("needs the repository's README.md: %v", err)
	}
	_, rest, ok := strings.Cut(string(data), "\n## Configuration\n")
	if !ok {
		t.Fatal("README.md has no ## Configuration section")
	}
	_, rest, ok = strings.Cut(rest, "```yaml\n")
	if !ok {
		t.Fatal("the Configuration section has no ```yaml example")
	}
	example, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatal("the Configuration section's example is not closed")
	}
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(example), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := LoadWith(Options{Path: path, Environ: []string{"HOME=" + t.TempDir()}})
	if err != nil {
		t.Fatalf("the README's configuration example does not load: %v\n%s", err, example)
	}
	if !c.fileLoaded || c.Source("docker.image") != SourceFile {
		t.Fatalf("the example was not read as a config file (docker.image from %s)", c.Source("docker.image"))
	}
}
