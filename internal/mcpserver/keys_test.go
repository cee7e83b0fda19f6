package mcpserver

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestKeysAddVerifyRevoke(t *testing.T) {
	path := filepath.Join(t.TempDir(), KeysFileName)
	now := time.Now()
	key, err := AddKey(path, Key{Name: "alice", Tools: []string{"terminal"}, RatePerMinute: 5}, now)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(key, keyPrefix) {
		t.Fatalf("key %q lacks the %s prefix", key, keyPrefix)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("keys file mode %v; want 0600", fi.Mode().Perm())
	}
	data, _ := os.ReadFile(path)
	_, secret, _ := strings.Cut(strings.TrimPrefix(key, keyPrefix), "_")
	if strings.Contains(string(data), secret) {
		t.Fatal("the keys file holds the key's secret")
	}
	if _, err := AddKey(path, Key{Name: "alice"}, now); err == nil {
		t.Error("a second key named alice was accepted")
	}
	for _, bad := range []Key{{Name: "Bad Name"}, {Name: AdminName}, {Name: "x", Tools: []string{"nope"}}, {Name: "y", Approvals: "maybe"}} {
		if _, err := AddKey(path, bad, now); err == nil {
			t.Errorf("AddKey(%+v) accepted", bad)
		}
	}
	ks, err := newKeyStore(path)
	if err != nil {
		t.Fatal(err)
	}
	if k := ks.verify(key); k == nil || k.Name != "alice" || k.RatePerMinute != 5 {
		t.Fatalf("verify(key) = %+v; want alice", k)
	}
	if k := ks.verify(key); k == nil {
		t.Fatal("the cached key no longer verifies")
	}
	if k := ks.verify(key[:len(key)-1] + "x"); k != nil {
		t.Fatal("a wrong secret verified")
	}
	if k := ks.verify("hsk_000000000000_" + secret); k != nil {
		t.Fatal("a wrong id verified")
	}
	if err := RevokeKey(path, "alice"); err != nil {
		t.Fatal(err)
	}
	if gone, err := ks.refresh(true); err != nil || len(gone) != 1 || gone[0] != "alice" {
		t.Fatalf("refresh after revoke: %v, %v; want alice gone", gone, err)
	}
	if k := ks.verify(key); k != nil {
		t.Fatal("a revoked key still verifies (the cache was not invalidated)")
	}
	if err := RevokeKey(path, "alice"); err == nil {
		t.Error("revoking a missing key succeeded")
	}
}

func TestKeyExpires(t *testing.T) {
	path := filepath.Join(t.TempDir(), KeysFileName)
	key, err := AddKey(path, Key{Name: "old", Expires: time.Now().Add(-time.Second)}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ks, err := newKeyStore(path)
	if err != nil {
		t.Fatal(err)
	}
	if k := ks.verify(key); k != nil {
		t.Fatal("an expired key verified")
	}
}

func TestLimiterRateAndConcurrency(t *testing.T) {
	var l limiter
	k := &Key{Name: "k", MaxConcurrent: 2, RatePerMinute: 3}
	now := time.Unix(1000, 0)
	d1, e := l.startCall(k, now)
	if e != nil {
		t.Fatal(e)
	}
	d2, e := l.startCall(k, now)
	if e != nil {
		t.Fatal(e)
	}
	if _, e := l.startCall(k, now); e == nil || e.Limit != "max_concurrent" {
		t.Fatalf("third concurrent call: %v; want max_concurrent", e)
	}
	d1()
	d2()
	d3, e := l.startCall(k, now)
	if e != nil {
		t.Fatal(e)
	}
	d3()
	_, e = l.startCall(k, now)
	if e == nil || e.Limit != "rate" || e.RetryAfter != 20*time.Second {
		t.Fatalf("fourth call in a minute: %v; want the rate limit, retry in 20s", e)
	}
	if !strings.Contains(e.Error(), "rate") || !strings.Contains(e.Error(), "retry in 20s") {
		t.Errorf("message %q does not name the limit and the reset", e.Error())
	}
	if _, e := l.startCall(k, now.Add(20*time.Second)); e != nil {
		t.Fatalf("after 20s: %v; want a refilled call", e)
	}
	other := &Key{Name: "other", MaxConcurrent: 1}
	if _, e := l.startCall(other, now); e != nil {
		t.Fatalf("another key was held by k's limits: %v", e)
	}
}
