package sandbox

import "testing"

func TestLooksCredential(t *testing.T) {
	for name, want := range map[string]bool{
		"HERMES_SANDBOX_VERCEL_TOKEN":          true,
		"HERMES_SANDBOX_SSH_PASSWORD":          true,
		"HERMES_SANDBOX_MODAL_TOKEN_ID":        true,
		"HERMES_SANDBOX_MODAL_TOKEN_SECRET":    true,
		"HERMES_SANDBOX_DAYTONA_API_KEY":       true,
		"AWS_SECRET_ACCESS_KEY":                true,
		"AWS_ACCESS_KEY_ID":                    true,
		"GITHUB_TOKEN":                         true,
		"OPENAI_API_KEY":                       true,
		"DATABASE_URL":                         true,
		"HERMES_SANDBOX_DOCKER_IMAGE":          false,
		"HERMES_SANDBOX_DOCKER_NETWORK":        false,
		"HERMES_SANDBOX_TERMINAL_EGRESS_ALLOW": false,
		"HERMES_SANDBOX_CONFIG":                false,
		"AWS_REGION":                           false,
		"MODAL_ENVIRONMENT":                    false,
		"HOME":                                 false,
	} {
		if got := LooksCredential(name); got != want {
			t.Errorf("LooksCredential(%q) = %v; want %v", name, got, want)
		}
		// Whatever is a credential is also kept out of sandboxes.
		if want && !LooksSecret(name) {
			t.Errorf("LooksSecret(%q) = false for a credential", name)
		}
	}
}
