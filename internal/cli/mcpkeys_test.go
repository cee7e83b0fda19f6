//go:build unix

package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-sandbox/hermes-sandbox/internal/mcpserver"
)

// `mcp keys add` prints the key once, alone on the last line; list shows scopes and limits
// but never the key; revoke removes it.
func TestMCPKeysCommands(t *testing.T) {
	e := newEnv(t)
	out := e.mustRun("mcp", "keys", "add", "ci", "--backends", "docker", "--tools", "terminal,read_file",
		"--approvals", "deny", "--max-sessions", "4", "--max-concurrent", "2", "--rate", "60/min", "--expires", "30d")
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	key := lines[len(lines)-1]
	if !strings.HasPrefix(key, "hsk_") || strings.Contains(key, " ") {
		t.Fatalf("the last line is not the key alone: %q", key)
	}
	path := filepath.Join(e.dir, "config", "hermes-sandbox", mcpserver.KeysFileName)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %v; want 0600", path, fi.Mode().Perm())
	}
	list := e.mustRun("mcp", "keys", "list")
	for _, want := range []string{"ci", "docker", "terminal,read_file", "deny", "60/min", "never"} {
		if !strings.Contains(list, want) {
			t.Errorf("keys list lacks %q:\n%s", want, list)
		}
	}
	_, secret, _ := strings.Cut(strings.TrimPrefix(key, "hsk_"), "_")
	data, _ := os.ReadFile(path)
	if strings.Contains(list, secret) || strings.Contains(string(data), secret) {
		t.Error("the key's secret is shown by list or stored in the file")
	}
	for _, bad := range [][]string{
		{"mcp", "keys", "add", "ci"},
		{"mcp", "keys", "add", "x", "--rate", "often"},
		{"mcp", "keys", "add", "y", "--expires", "-1d"},
		{"mcp", "keys", "add", "z", "--tools", "rm"},
		{"mcp", "keys", "revoke", "nobody"},
	} {
		if code, _, _ := e.run("", bad...); code == 0 {
			t.Errorf("%v succeeded", bad)
		}
	}
	e.mustRun("mcp", "keys", "revoke", "ci")
	if list := e.mustRun("mcp", "keys", "list"); !strings.Contains(list, "No keys") {
		t.Errorf("after revoke: %s", list)
	}
}
