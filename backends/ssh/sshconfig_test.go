//go:build unix

package ssh

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// writeSSHConfig writes text to p and parses it.
func writeSSHConfig(t *testing.T, p, home, text string) *sshConfig {
	t.Helper()
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := parseSSHConfigFile(p, home)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestSSHConfigMatch: Match blocks apply as `ssh -G` applies them: in order, host against the
// host name set so far, originalhost against the alias, user and localuser, negation, all,
// and final in a second pass; criteria that would run a command never apply here, and an
// unknown criterion is an error.
func TestSSHConfigMatch(t *testing.T) {
	home := t.TempDir()
	text := `Host web
    HostName web.%h.example

Match originalhost web host web.web.example
    User via-host-after-hostname

Match host=web
    Port 1111

Match exec "true" host db
    User via-exec

Match localuser me !host db
    IdentityFile ~/.ssh/mine

Match user via-host-after-hostname
    Port 2222

Match final host db
    Port 3333

Match all
    User everyone
    Port 22
`
	p := filepath.Join(home, "config")
	c := writeSSHConfig(t, p, home, text)
	tests := []struct {
		alias, localUser string
		want             hostConfig
	}{
		{"web", "me", hostConfig{HostName: "web.%h.example", User: "via-host-after-hostname", Port: 2222, IdentityFiles: []string{"~/.ssh/mine"}}},
		{"db", "me", hostConfig{User: "everyone", Port: 22}},
		{"db", "other", hostConfig{User: "everyone", Port: 22}},
		{"other", "someone", hostConfig{User: "everyone", Port: 22}},
	}
	for _, tt := range tests {
		if got := c.lookup(tt.alias, tt.localUser); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("lookup(%q as %s) = %+v; want %+v", tt.alias, tt.localUser, got, tt.want)
		}
	}
	// Without the Match all, the final pass decides db's port.
	c = writeSSHConfig(t, p, home, strings.Split(text, "Match all")[0])
	if got := c.lookup("db", "me"); got.Port != 3333 || got.User != "" {
		t.Errorf("lookup(db) with Match final = %+v; want port 3333 from the final pass, and no user from Match exec", got)
	}
	for _, bad := range []string{"Match\n", "Match hots x\n", "Match host\n"} {
		os.WriteFile(p, []byte(bad), 0o600)
		if _, err := parseSSHConfigFile(p, home); err == nil {
			t.Errorf("parse %q succeeded; want an error", bad)
		}
	}
}
