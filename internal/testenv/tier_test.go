package testenv

import "testing"

func TestFull(t *testing.T) {
	for _, tt := range []struct {
		full, require, what string
		want                bool
	}{
		{"", "", "docker", false},
		{"1", "", "docker", true},
		{"", "ssh,docker", "docker", true},
		{"", "ssh", "docker", false},
		{"", "docker", "kubernetes", false},
	} {
		t.Setenv(FullEnv, tt.full)
		t.Setenv("HERMES_SANDBOX_TEST_REQUIRE", tt.require)
		if got := Full(tt.what); got != tt.want {
			t.Errorf("Full(%q) with %s=%q, REQUIRE=%q = %v; want %v", tt.what, FullEnv, tt.full, tt.require, got, tt.want)
		}
	}
}

// TestNeedFullSkips checks that a test of the full tier is skipped, with the variable to set in
// its reason, when the tier is off, and runs when it is on.
func TestNeedFullSkips(t *testing.T) {
	t.Setenv("HERMES_SANDBOX_TEST_REQUIRE", "")
	for _, full := range []string{"", "1"} {
		t.Setenv(FullEnv, full)
		ran := false
		var skipped bool
		t.Run("inner", func(t *testing.T) {
			defer func() { skipped = t.Skipped() }()
			NeedFull(t, "docker", "the fake runs sandboxes as containers")
			ran = true
		})
		if want := full == "1"; ran != want || skipped == want {
			t.Errorf("NeedFull with %s=%q: ran %v, skipped %v; want ran %v", FullEnv, full, ran, skipped, want)
		}
	}
}
