//go:build unix

package ssh

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

func hostFingerprint(t *testing.T, d *testSSHD) string {
	t.Helper()
	b, err := os.ReadFile(d.hostKey + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	pub, _, _, _, err := gossh.ParseAuthorizedKey(b)
	if err != nil {
		t.Fatal(err)
	}
	return gossh.FingerprintSHA256(pub)
}

func TestFirstConnectRecordsHostKey(t *testing.T) {
	d := newTestSSHD(t)
	var progress syncBuffer
	b := d.backendWith(t, d.config(), &progress, Options{})
	if err := b.Check(testCtx(t, 30*time.Second)); err != nil {
		t.Fatalf("Check() = %v", err)
	}
	b.Close()
	fp := hostFingerprint(t, d)
	kh, err := os.ReadFile(d.knownHosts)
	if err != nil {
		t.Fatalf("known_hosts not written: %v", err)
	}
	prefix := fmt.Sprintf("[127.0.0.1]:%d ssh-ed25519 ", d.port)
	if !strings.HasPrefix(string(kh), prefix) || strings.Count(string(kh), "\n") != 1 {
		t.Errorf("known_hosts = %q; want one line starting %q", kh, prefix)
	}
	if !strings.Contains(progress.String(), fp) || !strings.Contains(progress.String(), "trusting") {
		t.Errorf("progress = %q; want the fingerprint %s announced", progress.String(), fp)
	}
	// A second connection finds the key and records nothing new.
	var progress2 syncBuffer
	b2 := d.backendWith(t, d.config(), &progress2, Options{})
	if err := b2.Check(testCtx(t, 30*time.Second)); err != nil {
		t.Fatalf("second Check() = %v", err)
	}
	kh2, _ := os.ReadFile(d.knownHosts)
	if !bytes.Equal(kh, kh2) || strings.Contains(progress2.String(), "trusting") {
		t.Errorf("second connection changed known_hosts (%q) or announced again (%q)", kh2, progress2.String())
	}
}

func TestChangedHostKeyRefused(t *testing.T) {
	d := newTestSSHD(t)
	b := d.backend(t, Options{})
	sess, err := b.Open(testCtx(t, 30*time.Second), "hk")
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	mustExec(t, sess, "true")
	oldFP := hostFingerprint(t, d)
	kh, _ := os.ReadFile(d.knownHosts)

	d.restart(true)
	newFP := hostFingerprint(t, d)
	// The open session reconnects for its next command, and is refused.
	if _, err := sess.Exec(testCtx(t, 30*time.Second), sandbox.Command{Script: "true"}); err == nil {
		// The first command may only find the old stream broken; the next one reconnects.
		_, err = sess.Exec(testCtx(t, 30*time.Second), sandbox.Command{Script: "true"})
		if err == nil {
			t.Fatalf("Exec after the host key changed succeeded")
		}
	}
	b2 := d.backend(t, Options{})
	err = b2.Check(testCtx(t, 30*time.Second))
	var hke *HostKeyError
	if !errors.As(err, &hke) || !errors.Is(err, sandbox.ErrDenied) {
		t.Fatalf("Check() after key change = %v; want a HostKeyError matching ErrDenied", err)
	}
	msg := err.Error()
	for _, want := range []string{oldFP, newFP, "ssh-keygen -R", d.knownHosts, "line 1", "CHANGED"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not mention %q", msg, want)
		}
	}
	if kh2, _ := os.ReadFile(d.knownHosts); !bytes.Equal(kh, kh2) {
		t.Errorf("known_hosts changed after a refused key: %q → %q", kh, kh2)
	}
	if diag := Diagnose(err); !strings.Contains(diag, "ssh-keygen -R") {
		t.Errorf("Diagnose() = %q; want the fix", diag)
	}
}

func TestStrictHostKeyCheckingYes(t *testing.T) {
	d := newTestSSHD(t)
	cfg := d.config()
	cfg.SSH.StrictHostKeyChecking = config.HostKeyYes
	b := d.backendWith(t, cfg, nil, Options{})
	err := b.Check(testCtx(t, 30*time.Second))
	var hke *HostKeyError
	if !errors.As(err, &hke) || !hke.Unknown {
		t.Fatalf("Check() with an unknown host and strict yes = %v; want an unknown-host error", err)
	}
	if !strings.Contains(err.Error(), "ssh-keyscan") || !strings.Contains(err.Error(), hostFingerprint(t, d)) {
		t.Errorf("error %q should show the fingerprint and how to add it", err)
	}
	if _, err := os.Stat(d.knownHosts); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("known_hosts was written under strict yes")
	}
}
