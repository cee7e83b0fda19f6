//go:build unix

package cli_test

import (
	"encoding/json"
	"runtime"
	"strings"
	"testing"

	"github.com/hermes-sandbox/hermes-sandbox/internal/cli"
)

// TestVersionSaysCommitAndPlatform: version names the version, the commit and the platform
// the binary was built for, in its line and in --json.
func TestVersionSaysCommitAndPlatform(t *testing.T) {
	e := newEnv(t)
	old := cli.Commit
	cli.Commit = "abc123def456"
	t.Cleanup(func() { cli.Commit = old })
	line := e.mustRun("version")
	platform := runtime.GOOS + "/" + runtime.GOARCH
	for _, want := range []string{"hermes-sandbox " + cli.Version + " ", "commit abc123def456", platform + ")"} {
		if !strings.Contains(line, want) {
			t.Errorf("version = %q; want it to hold %q", line, want)
		}
	}
	var v struct{ Version, Commit, OS, Arch string }
	if err := json.Unmarshal([]byte(e.mustRun("version", "--json")), &v); err != nil {
		t.Fatal(err)
	}
	if v.Version != cli.Version || v.Commit != "abc123def456" || v.OS != runtime.GOOS || v.Arch != runtime.GOARCH {
		t.Errorf("version --json = %+v; want version %s, commit abc123def456, %s", v, cli.Version, platform)
	}
}
