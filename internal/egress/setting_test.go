//go:build unix

package egress

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

func TestNewOverridesPicksTheSetting(t *testing.T) {
	for _, c := range []struct {
		own, shared []string
		base        []string
		key         string
		shares      bool
	}{
		{own: []string{"a.example"}, shared: []string{"b.example"}, base: []string{"a.example"}, key: "docker.egress_allow"},
		{shared: []string{"b.example"}, base: []string{"b.example"}, key: "terminal.egress_allow", shares: true},
		{key: "docker.egress_allow", shares: true},
	} {
		o := NewOverrides(t.TempDir(), "docker", c.own, c.shared, nil)
		r := o.Report("how, in ", "; caveat")
		if !slices.Equal(o.Base, c.base) || o.ConfigKey != c.key || r.AppliesShared != c.shares || !slices.Equal(r.Allow, c.base) {
			t.Errorf("NewOverrides(own %q, shared %q) = base %q, key %q, applies shared %v; want %q, %q, %v",
				c.own, c.shared, o.Base, o.ConfigKey, r.AppliesShared, c.base, c.key, c.shares)
		}
		want := "enforced: how, in " + c.key
		if len(c.base) == 0 {
			want += " (empty: nothing is reachable until a person allows a host)"
		}
		if want += "; caveat"; r.Detail != want || r.Status != sandbox.EgressEnforced {
			t.Errorf("Report() = %q, %q; want %q, enforced", r.Status, r.Detail, want)
		}
	}
}

func TestCheckChange(t *testing.T) {
	o := NewOverrides(t.TempDir(), "kubernetes", nil, nil, nil)
	for _, c := range []struct {
		session, mode string
		allow         []string
		want          error
		msg           string
	}{
		{"s1", "allowlist", []string{"pypi.org", "*.github.com:22"}, nil, ""},
		{"../x", "allowlist", nil, sandbox.ErrInvalidConfig, "kubernetes: network ../x: "},
		{"s1", "open", []string{"pypi.org"}, sandbox.ErrUnsupported, "kubernetes.network is open, not allowlist"},
		{"s1", "allowlist", []string{"bad host!"}, sandbox.ErrInvalidConfig, "kubernetes: network s1: "},
	} {
		err := o.CheckChange("kubernetes", c.session, c.mode, c.allow, nil)
		if c.want == nil && err != nil || c.want != nil && (!errors.Is(err, c.want) || !strings.Contains(err.Error(), c.msg)) {
			t.Errorf("CheckChange(%q, %q, %q) = %v; want %v containing %q", c.session, c.mode, c.allow, err, c.want, c.msg)
		}
	}
}
