package sandbox

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// baselineEnv names the host variables that reach a command without being listed: enough for
// programs to find themselves, their home and their locale, and nothing that carries a
// credential.
var baselineEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TERM",
	"TZ", "TMPDIR", "COLORTERM", "NO_COLOR"}

// credentialName matches names that look like they hold a secret.
var credentialName = regexp.MustCompile(`(?i)(^AWS_|^AZURE_|^GOOGLE_|^GCP_|^GH_|^GITHUB_|^OPENAI_|^ANTHROPIC_|^HF_|^MODAL_|^DAYTONA_|^VERCEL_|` +
	`^SSH_AUTH_SOCK$|^HERMES_SANDBOX_|_API_KEY$|_APIKEY$|_TOKEN$|_SECRET$|_SECRET_KEY$|_PASSWORD$|_PASSWD$|_CREDENTIALS?$|_PRIVATE_KEY$|^DATABASE_URL$|_DSN$)`)

// LooksSecret reports whether an environment variable name may hold a credential: such a
// variable is kept out of a sandbox unless env_passthrough names it. It is broad on purpose
// (a provider's whole prefix), so it is not the test for redacting values: see LooksCredential.
func LooksSecret(name string) bool { return credentialName.MatchString(name) }

// credentialValue matches names whose values are credentials themselves, not configuration
// that happens to share a provider's prefix (AWS_REGION, HERMES_SANDBOX_DOCKER_IMAGE).
var credentialValue = regexp.MustCompile(`(?i)(^SSH_AUTH_SOCK$|_API_?KEY$|_TOKEN$|_TOKEN_ID$|_TOKEN_SECRET$|_SECRET$|` +
	`_SECRET_KEY$|_SECRET_ACCESS_KEY$|_ACCESS_KEY_ID$|_PASSWORD$|_PASSWD$|_PASSPHRASE$|_CREDENTIALS?$|_PRIVATE_KEY$|` +
	`^DATABASE_URL$|_DSN$|^(GH|GITHUB|OPENAI|ANTHROPIC|HF)_[A-Z_]*(KEY|TOKEN)$)`)

// LooksCredential reports whether an environment variable's value is a credential, whose
// value must never be written to the audit log or shown to the agent.
func LooksCredential(name string) bool { return credentialValue.MatchString(name) }

// FilterEnv keeps the safe baseline (PATH, HOME, LANG, LC_*, TERM, USER, …) of environ plus the
// names in passthrough. A credential-looking name passes only when passthrough names it.
func FilterEnv(environ []string, passthrough []string) []string {
	var out []string
	for _, kv := range environ {
		name, _, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		listed := slices.Contains(passthrough, name)
		base := slices.Contains(baselineEnv, name) || strings.HasPrefix(name, "LC_")
		if listed || (base && !LooksSecret(name)) {
			out = append(out, kv)
		}
	}
	return out
}

var sessionName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// ValidateSessionName checks that name can be used in paths, labels and remote names.
func ValidateSessionName(name string) error {
	if !sessionName.MatchString(name) {
		return fmt.Errorf("session name %q: use 1–63 letters, digits, '.', '_' or '-', starting with a letter or digit: %w", name, ErrInvalidConfig)
	}
	return nil
}
