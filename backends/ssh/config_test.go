//go:build unix

package ssh

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

func TestWildcardMatch(t *testing.T) {
	tests := []struct {
		pat, s string
		want   bool
	}{
		{"*", "anything", true},
		{"web?", "web1", true},
		{"web?", "web12", false},
		{"*.example.com", "a.b.example.com", true},
		{"*.example.com", "example.com", false},
		{"a*b*c", "aXXbYYc", true},
		{"a*b*c", "aXXbYY", false},
		{"", "", true},
	}
	for _, tt := range tests {
		if got := wildcardMatch(tt.pat, tt.s); got != tt.want {
			t.Errorf("wildcardMatch(%q, %q) = %v; want %v", tt.pat, tt.s, got, tt.want)
		}
	}
}

func TestSSHConfigLookup(t *testing.T) {
	home := t.TempDir()
	inc := filepath.Join(home, ".ssh", "conf.d")
	if err := os.MkdirAll(inc, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(inc, "extra"), []byte("Host inc\n  HostName included.example\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	text := `# comment
Include conf.d/*
Host build1 build2
    HostName 10.0.0.%h
    User=ci
    Port 2222
    IdentityFile ~/.ssh/build_key
    ProxyJump bastion

Host *.internal !secret.internal
    User internal-user
    IdentityFile "~/.ssh/with space"

Match host whatever
    User never

Host *
    User fallback
    Port 2200
    IdentityFile ~/.ssh/id_all
`
	c := writeSSHConfig(t, filepath.Join(home, ".ssh", "config"), home, text)
	tests := []struct {
		alias string
		want  hostConfig
	}{
		{"build1", hostConfig{HostName: "10.0.0.%h", User: "ci", Port: 2222, IdentityFiles: []string{"~/.ssh/build_key", "~/.ssh/id_all"}, ProxyJump: "bastion"}},
		{"db.internal", hostConfig{User: "internal-user", Port: 2200, IdentityFiles: []string{"~/.ssh/with space", "~/.ssh/id_all"}}},
		{"secret.internal", hostConfig{User: "fallback", Port: 2200, IdentityFiles: []string{"~/.ssh/id_all"}}},
		{"inc", hostConfig{HostName: "included.example", User: "fallback", Port: 2200, IdentityFiles: []string{"~/.ssh/id_all"}}},
	}
	for _, tt := range tests {
		if got := c.lookup(tt.alias, "me"); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("lookup(%q) = %+v; want %+v", tt.alias, got, tt.want)
		}
	}
}

func TestParseProxyJump(t *testing.T) {
	tests := []struct {
		in   string
		want []jumpHop
		err  bool
	}{
		{"", nil, false},
		{"none", nil, false},
		{"bastion", []jumpHop{{host: "bastion"}}, false},
		{"me@bastion:2022,other", []jumpHop{{user: "me", host: "bastion", port: 2022}, {host: "other"}}, false},
		{"ssh://me@[::1]:22", []jumpHop{{user: "me", host: "::1", port: 22}}, false},
		{"host:notaport", nil, true},
	}
	for _, tt := range tests {
		got, err := parseProxyJump(tt.in)
		if (err != nil) != tt.err || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("parseProxyJump(%q) = %+v, %v; want %+v (error %v)", tt.in, got, err, tt.want, tt.err)
		}
	}
}

func TestResolveSettings(t *testing.T) {
	home := t.TempDir()
	sshDir := filepath.Join(home, ".ssh")
	if err := os.MkdirAll(sshDir, 0o700); err != nil {
		t.Fatal(err)
	}
	text := "Host box\n  HostName box.%h.lan\n  User alice\n  Port 2222\n  IdentityFile ~/.ssh/box_key\n  ProxyJump jump@gate:2200\nHost gate\n  HostName gate.lan\n"
	if err := os.WriteFile(filepath.Join(sshDir, "config"), []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	fo := func(cfg *config.Config) sandbox.FactoryOptions {
		return cfg.BackendOptions(sandbox.FactoryOptions{Environ: []string{"HOME=" + home, "USER=me", "SSH_AUTH_SOCK=/tmp/agent.sock"}})
	}
	cfg := config.NewConfig()
	cfg.SSH.Host = "box"
	s, err := resolveSettings(cfg.SSH, fo(cfg), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s.target.host != "box.box.lan" || s.target.user != "alice" || s.target.port != 2222 {
		t.Errorf("target = %+v; want box.box.lan alice 2222 from ~/.ssh/config", s.target)
	}
	wantKeys := []keyFile{{filepath.Join(home, ".ssh/id_ed25519"), false}, {filepath.Join(home, ".ssh/box_key"), true}}
	if !reflect.DeepEqual(s.target.keys, wantKeys) {
		t.Errorf("keys = %+v; want %+v", s.target.keys, wantKeys)
	}
	if len(s.jumps) != 1 || s.jumps[0].host != "gate.lan" || s.jumps[0].user != "jump" || s.jumps[0].port != 2200 {
		t.Errorf("jumps = %+v; want jump@gate.lan:2200", s.jumps)
	}
	if s.authSock != "/tmp/agent.sock" || s.knownHosts != filepath.Join(home, ".ssh/known_hosts") {
		t.Errorf("authSock %q knownHosts %q", s.authSock, s.knownHosts)
	}
	// hermes-sandbox's own settings win over ~/.ssh/config.
	cfg = config.NewConfig()
	cfg.SSH.Host = "box"
	if err := cfg.SetValue("ssh.port", "22"); err != nil {
		t.Fatal(err)
	}
	cfg.SSH.User = "bob"
	cfg.SSH.Key = "~/.ssh/mine"
	s, err = resolveSettings(cfg.SSH, fo(cfg), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s.target.user != "bob" || s.target.port != 22 || s.target.keys[0] != (keyFile{filepath.Join(home, ".ssh/mine"), true}) {
		t.Errorf("explicit settings lost: %+v", s.target)
	}
	// Without ~/.ssh/config entries, OpenSSH's default keys are tried.
	cfg = config.NewConfig()
	cfg.SSH.Host = "plain"
	s, err = resolveSettings(cfg.SSH, fo(cfg), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.target.keys) != 3 || s.target.user != "me" || s.target.port != 22 || len(s.jumps) != 0 {
		t.Errorf("plain host = %+v", s.target)
	}
	// No host: a configuration error that says what to do.
	cfg = config.NewConfig()
	if _, err := resolveSettings(cfg.SSH, fo(cfg), Options{}); !errors.Is(err, sandbox.ErrInvalidConfig) || !strings.Contains(err.Error(), "setup ssh") {
		t.Errorf("resolveSettings(no host) = %v", err)
	}
}

func TestDiagnose(t *testing.T) {
	ep := endpoint{alias: "box", host: "box.lan", port: 22, user: "me"}
	tests := []struct {
		err  error
		want string
	}{
		{&DialError{Role: "host", Endpoint: ep, Err: &net.OpError{Op: "dial", Err: &net.DNSError{Err: "no such host", Name: "box.lan", IsNotFound: true}}}, "cannot resolve host name"},
		{&DialError{Role: "host", Endpoint: ep, Err: &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}, "connection refused"},
		{&DialError{Role: "host", Endpoint: ep, Timeout: 10e9, Err: fmt.Errorf("%w: i/o timeout", errConnectTimeout)}, "within 10s"},
		{&DialError{Role: "host", Endpoint: ep, Err: &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.EHOSTUNREACH)}}, "unreachable"},
		{&DialError{Role: "host", Endpoint: ep, Err: &AuthError{Endpoint: ep.String(), Tried: []string{"key /k"}}}, "authorized_keys"},
		{&UploadError{Host: "h", Path: "/p", DiskFull: true, Free: 10, Need: 100}, "disk is full"},
		{wrap("open", "x", fmt.Errorf("ssh.host is not set: %w", sandbox.ErrInvalidConfig)), "ssh.host is not set"},
		{errors.New("something else"), ""},
		{context.Canceled, ""},
	}
	for _, tt := range tests {
		got := Diagnose(wrap("check", "", tt.err))
		if tt.want == "" && got != "" || !strings.Contains(got, tt.want) {
			t.Errorf("Diagnose(%v) = %q; want it to contain %q", tt.err, got, tt.want)
		}
	}
	dnsErr := &DialError{Role: "host", Endpoint: ep, Err: &net.DNSError{Err: "no such host", IsNotFound: true}}
	if !strings.Contains(Diagnose(dnsErr), "HostName for box") {
		t.Errorf("Diagnose(DNS error for an alias) = %q; want the ~/.ssh/config hint", Diagnose(dnsErr))
	}
}

func TestShellQuote(t *testing.T) {
	for _, s := range []string{"", "plain", "it's", "a b", "$(x)", "\xff\n'\"", "--"} {
		q := shq(s)
		out, err := execSh(t, "printf '%s' "+q)
		if err != nil || out != s {
			t.Errorf("shq(%q) = %s, which the shell reads as %q (%v)", s, q, out, err)
		}
	}
}
