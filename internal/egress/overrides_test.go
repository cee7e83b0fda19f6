//go:build unix

package egress

import (
	"os"
	"slices"
	"testing"
)

// TestOverrides: a session's change adds and removes hosts on top of the configured list,
// is seen by AllowFunc on the next call, stays with its own session, and a broken file
// allows nothing.
func TestOverrides(t *testing.T) {
	o := Overrides{Dir: t.TempDir(), Base: []string{"pypi.org", "*.github.com"}, ConfigKey: "kubernetes.egress_allow"}
	allow := o.AllowFunc("s1")
	if !allow().Allows("pypi.org", 443) || allow().Allows("evil.test", 80) {
		t.Fatalf("before a change: %v", allow().Strings())
	}
	now, err := o.Change("s1", []string{"Evil.Test:80"}, []string{"pypi.org"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"*.github.com", "evil.test:80"}; !slices.Equal(now, want) {
		t.Errorf("Change() = %q; want %q", now, want)
	}
	if a := allow(); !a.Allows("evil.test", 80) || a.Allows("pypi.org", 443) || a.Allows("evil.test", 443) {
		t.Errorf("AllowFunc after the change = %v", a.Strings())
	}
	if a, _ := o.Allowlist("s2"); !a.Allows("pypi.org", 443) || a.Allows("evil.test", 80) {
		t.Errorf("another session's allowlist changed: %v", a.Strings())
	}
	// Allowing a denied host again takes it off the deny list.
	if now, err = o.Change("s1", []string{"pypi.org"}, nil); err != nil || !slices.Contains(now, "pypi.org") {
		t.Errorf("Change(allow pypi.org) = %q, %v", now, err)
	}
	if _, err := o.Change("s1", []string{"10.0.0.1"}, nil); err == nil {
		t.Error("Change(allow 10.0.0.1) = nil; want an error")
	}
	if err := os.WriteFile(o.Path("s1"), []byte("{broken"), 0o600); err != nil {
		t.Fatal(err)
	}
	if a := allow(); len(a.Strings()) != 0 {
		t.Errorf("AllowFunc with a broken file = %v; want nothing", a.Strings())
	}
	o.Remove("s1")
	if a := allow(); !a.Allows("pypi.org", 443) || a.Allows("evil.test", 80) {
		t.Errorf("after Remove: %v; want the configured list", a.Strings())
	}
}
