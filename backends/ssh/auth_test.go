//go:build unix

package ssh

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"
	sshagent "golang.org/x/crypto/ssh/agent"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

func TestAuthFailures(t *testing.T) {
	d := newTestSSHD(t)
	t.Run("wrong key", func(t *testing.T) {
		other := filepath.Join(t.TempDir(), "other")
		writeKey(t, other, "")
		cfg := d.config()
		cfg.SSH.Key = other
		b := d.backendWith(t, cfg, nil, Options{})
		err := b.Check(testCtx(t, 30*time.Second))
		var ae *AuthError
		if !errors.As(err, &ae) || !errors.Is(err, sandbox.ErrDenied) {
			t.Fatalf("Check(wrong key) = %v; want an AuthError matching ErrDenied", err)
		}
		if !strings.Contains(err.Error(), other) || !strings.Contains(err.Error(), "authorized_keys") {
			t.Errorf("error %q should name the key offered and what to do", err)
		}
	})
	t.Run("bad permissions", func(t *testing.T) {
		k := filepath.Join(t.TempDir(), "loose")
		pub := writeKey(t, k, "")
		d.authorize(t, pub)
		if err := os.Chmod(k, 0o644); err != nil {
			t.Fatal(err)
		}
		cfg := d.config()
		cfg.SSH.Key = k
		b := d.backendWith(t, cfg, nil, Options{})
		err := b.Check(testCtx(t, 30*time.Second))
		if err == nil || !strings.Contains(err.Error(), "chmod 600 "+k) || !strings.Contains(err.Error(), "0644") {
			t.Fatalf("Check(key mode 0644) = %v; want a refusal that says chmod 600", err)
		}
	})
	t.Run("missing key", func(t *testing.T) {
		cfg := d.config()
		cfg.SSH.Key = filepath.Join(t.TempDir(), "nope")
		b := d.backendWith(t, cfg, nil, Options{})
		if err := b.Check(testCtx(t, 30*time.Second)); err == nil || !strings.Contains(err.Error(), "no such file") {
			t.Fatalf("Check(missing key) = %v; want it named", err)
		}
	})
}

func TestEncryptedKey(t *testing.T) {
	d := newTestSSHD(t)
	k := filepath.Join(t.TempDir(), "enc")
	d.authorize(t, writeKey(t, k, "s3cret"))
	cfg := func() *config.Config { c := d.config(); c.SSH.Key = k; return c }
	t.Run("passphrase secret", func(t *testing.T) {
		c := cfg()
		c.SSH.KeyPassphrase = "s3cret"
		if err := d.backendWith(t, c, nil, Options{}).Check(testCtx(t, 30*time.Second)); err != nil {
			t.Fatalf("Check(encrypted key, ssh.key_passphrase) = %v", err)
		}
	})
	t.Run("wrong secret", func(t *testing.T) {
		c := cfg()
		c.SSH.KeyPassphrase = "wrong"
		err := d.backendWith(t, c, nil, Options{}).Check(testCtx(t, 30*time.Second))
		if err == nil || !strings.Contains(err.Error(), "does not decrypt") {
			t.Fatalf("Check(wrong passphrase) = %v", err)
		}
	})
	t.Run("prompt", func(t *testing.T) {
		var asked []string
		prompt := func(p string) (string, error) { asked = append(asked, p); return "s3cret", nil }
		b := d.backendWith(t, cfg(), nil, Options{Prompt: prompt})
		if err := b.Check(testCtx(t, 30*time.Second)); err != nil {
			t.Fatalf("Check(encrypted key, prompt) = %v", err)
		}
		if len(asked) != 1 || !strings.Contains(asked[0], k) {
			t.Errorf("prompted %q; want once, naming the key", asked)
		}
	})
	t.Run("slow prompt", func(t *testing.T) {
		// A person takes longer to type a passphrase than ssh.connect_timeout allows the
		// server: the time spent at the prompt is not the server's.
		c := cfg()
		c.SSH.ConnectTimeout = time.Second
		prompt := func(string) (string, error) { time.Sleep(2 * time.Second); return "s3cret", nil }
		if err := d.backendWith(t, c, nil, Options{Prompt: prompt}).Check(testCtx(t, 30*time.Second)); err != nil {
			t.Fatalf("Check(encrypted key, slow prompt, connect_timeout 1s) = %v", err)
		}
	})
	t.Run("no terminal", func(t *testing.T) {
		prompt := func(string) (string, error) { return "", ErrNoTerminal }
		err := d.backendWith(t, cfg(), nil, Options{Prompt: prompt}).Check(testCtx(t, 30*time.Second))
		if !errors.Is(err, ErrNoTerminal) || !strings.Contains(err.Error(), "ssh.key_passphrase") {
			t.Fatalf("Check(encrypted key, no terminal) = %v; want a clear error naming ssh.key_passphrase", err)
		}
	})
}

func TestAgentAuth(t *testing.T) {
	d := newTestSSHD(t)
	k := filepath.Join(t.TempDir(), "agentkey")
	d.authorize(t, writeKey(t, k, ""))
	pemBytes, err := os.ReadFile(k)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := gossh.ParseRawPrivateKey(pemBytes)
	if err != nil {
		t.Fatal(err)
	}
	keyring := sshagent.NewKeyring()
	if err := keyring.Add(sshagent.AddedKey{PrivateKey: raw}); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "agent.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() { defer wg.Done(); sshagent.ServeAgent(keyring, c); c.Close() }()
		}
	}()
	defer wg.Wait()
	defer l.Close()
	cfg := d.config()
	cfg.SSH.Key = config.NewConfig().SSH.Key // the default, absent here: only the agent can log in
	fo := d.factory(t, cfg, nil)
	fo.Environ = append(fo.Environ, "SSH_AUTH_SOCK="+sock)
	b, err := NewWithOptions(cfg.SSH, fo, Options{SSHConfig: "none"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Check(testCtx(t, 30*time.Second)); err != nil {
		t.Fatalf("Check() with ssh-agent = %v", err)
	}
}

func TestPasswordNotOfferedUnlessEnabled(t *testing.T) {
	ctx := &gossh.ClientAuthContext{AllowedMethods: []string{"password", "keyboard-interactive"}}
	a := &authState{s: &settings{password: "pw"}, keys: &keyCache{}}
	if m, err := a.next(ctx); m != nil || err != nil {
		t.Errorf("next() without password_auth = %v, %v; want nothing to offer", m, err)
	}
	a = &authState{s: &settings{password: "pw", passwordAuth: true}, keys: &keyCache{}}
	if m, err := a.next(ctx); m == nil || err != nil || a.tried[0] != "password" {
		t.Errorf("next() with password_auth = %v, %v, tried %v; want the password method", m, err, a.tried)
	}
}

// authorize adds pub to the server's authorized keys.
func (d *testSSHD) authorize(t *testing.T, pub gossh.PublicKey) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(d.dir, "authorized_keys"), os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(gossh.MarshalAuthorizedKey(pub)); err != nil {
		t.Fatal(err)
	}
}

func TestDifferentCredentialsDoNotShare(t *testing.T) {
	d := newTestSSHD(t)
	good := d.backend(t, Options{})
	sess, err := good.Open(testCtx(t, 30*time.Second), "good")
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	other := filepath.Join(t.TempDir(), "other")
	writeKey(t, other, "")
	cfg := d.config()
	cfg.SSH.Key = other
	if err := d.backendWith(t, cfg, nil, Options{}).Check(testCtx(t, 30*time.Second)); err == nil {
		t.Fatalf("a backend with an unauthorized key reused another backend's connection")
	}
	if err := d.backend(t, Options{}).Check(testCtx(t, 30*time.Second)); err != nil {
		t.Fatalf("a backend with the same settings: Check() = %v", err)
	}
}
