package audit

import (
	"cmp"
	"regexp"
	"slices"
	"strings"
)

// Redacted replaces a secret in redacted text.
const Redacted = "***"

// minSecretLen is the shortest exact secret NewRedactor replaces: shorter
// strings would blank out ordinary words.
const minSecretLen = 4

// tokenPatterns match credentials that are obvious from their shape.
var tokenPatterns = []struct {
	re   *regexp.Regexp
	repl string
}{
	// PEM private keys, also when an excerpt cuts the END line off.
	{regexp.MustCompile(`(?s)(-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----).*?(-----END [A-Z0-9 ]*PRIVATE KEY-----|\z)`), "${1}***${2}"},
	// Authorization headers.
	{regexp.MustCompile(`(?i)(authorization\s*:\s*(?:bearer|basic|token)\s+)[^\s"']+`), "${1}***"},
	{regexp.MustCompile(`(?i)\b(bearer\s+)[A-Za-z0-9._~+/=-]{16,}`), "${1}***"},
	// AWS access key ids.
	{regexp.MustCompile(`\b(?:AKIA|ASIA)[0-9A-Z]{16}\b`), "***"},
	// GitHub tokens.
	{regexp.MustCompile(`\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})`), "***"},
	// OpenAI / Anthropic style keys: sk-… of 20 characters or more.
	{regexp.MustCompile(`\bsk-[A-Za-z0-9_-]{17,}`), "***"},
	// Passwords in URLs: scheme://user:pass@host.
	{regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://[^/:@\s]*:)[^/@\s]+@`), "${1}***@"},
	// password=…, DB_PASSWORD=…, ?token=…, --api-key=…
	{regexp.MustCompile(`(?i)\b((?:[a-z0-9]+[_-])*(?:password|passwd|pwd|secret|token|api[_-]?key|access[_-]?key)=)("[^"]*"|'[^']*'|[^\s&;#"']+)`), "${1}***"},
}

// NewRedactor returns a function that replaces every occurrence of each
// secret (of at least 4 characters, surrounding space trimmed) with "***",
// then redacts tokens recognisable by their shape: Authorization headers,
// AWS key ids, PEM private keys, GitHub tokens, sk- keys, URL passwords and
// password=/token= assignments. It is safe for concurrent use.
func NewRedactor(secrets []string) func(string) string {
	exact := NewExactRedactor(secrets)
	return func(s string) string {
		if s == "" {
			return s
		}
		s = exact(s)
		for _, p := range tokenPatterns {
			s = p.re.ReplaceAllString(s, p.repl)
		}
		return s
	}
}

// NewExactRedactor replaces only the given secret values (at least minSecretLen long), without
// the generic token patterns: for command output, where a pattern could mangle real data.
func NewExactRedactor(secrets []string) func(string) string {
	var olds []string
	for _, s := range secrets {
		if s = strings.TrimSpace(s); len(s) >= minSecretLen && s != Redacted {
			olds = append(olds, s)
		}
	}
	slices.SortFunc(olds, func(a, b string) int { // longest first, so it wins over its prefixes
		return cmp.Or(cmp.Compare(len(b), len(a)), strings.Compare(a, b))
	})
	olds = slices.Compact(olds)
	if len(olds) == 0 {
		return func(s string) string { return s }
	}
	pairs := make([]string, 0, 2*len(olds))
	for _, s := range olds {
		pairs = append(pairs, s, Redacted)
	}
	return strings.NewReplacer(pairs...).Replace
}
