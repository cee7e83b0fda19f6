package local

// The macOS confinement of local sessions: a Seatbelt profile (the sandbox-exec(1) language,
// SBPL) made per session, under which the helper and every command it starts run. The
// generator is pure Go so that it is tested on every platform; running the profile is
// checked on a Mac by scripts/verify-macos.sh.

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/hermes-sandbox/hermes-sandbox/config"
)

// SeatbeltSpec is what a session's Seatbelt profile enforces. Paths must be absolute; the
// caller resolves symlinks first (on macOS /tmp and /var are links into /private, and
// Seatbelt matches the resolved path).
type SeatbeltSpec struct {
	// WorkDir is the session's working directory: writable.
	WorkDir string
	// TempDirs are the temporary directories (/tmp, $TMPDIR): writable.
	TempDirs []string
	// Protect are this tool's config, state and audit directories: readable, never writable,
	// even inside WorkDir.
	Protect []string
	// Own is the session's own state directory, which the helper (it runs under the profile
	// too) writes: writable even inside Protect.
	Own []string
	// DenyRead are local.deny_read and the secrets file: neither readable nor writable.
	DenyRead []string
	// WriteAnywhere (local.confine auto) lets commands write anywhere but Protect and
	// DenyRead, as Landlock does on Linux; without it (strict) they write only to WorkDir,
	// TempDirs and Own.
	WriteAnywhere bool
	// Network is local.network: host allows everything, none denies every socket, allowlist
	// allows only the egress proxy on loopback at ProxyPort.
	Network   config.LocalNetwork
	ProxyPort int
}

// devWritable are the devices every shell writes to.
var devWritable = []string{"/dev/null", "/dev/zero", "/dev/tty", "/dev/dtracehelper", "/dev/random", "/dev/urandom"}

// SeatbeltProfile returns the profile for spec. Later rules win in SBPL, so the profile
// allows by default, then (strict) denies writes and allows them where commands work, denies
// writes to Protect, allows them again in the helper's Own state, and last denies what must
// stay out of reach whatever the earlier rules allowed.
func SeatbeltProfile(spec SeatbeltSpec) (string, error) {
	if spec.WorkDir == "" {
		return "", errors.New("seatbelt: no working directory")
	}
	var b strings.Builder
	b.WriteString("(version 1)\n(allow default)\n")
	if err := checkPath(spec.WorkDir); err != nil {
		return "", err
	}
	if !spec.WriteAnywhere {
		b.WriteString("(deny file-write*)\n")
		b.WriteString("(allow file-write*\n")
		for _, p := range append([]string{spec.WorkDir}, spec.TempDirs...) {
			if err := writeFilters(&b, "subpath", p); err != nil {
				return "", err
			}
		}
		for _, d := range devWritable {
			writeFilter(&b, "literal", d)
		}
		b.WriteString("  (regex #\"^/dev/fd/\")\n  (regex #\"^/dev/ttys[0-9]+$\"))\n")
	}
	for _, rule := range []struct {
		head  string
		paths []string
	}{
		{"(deny file-write*\n", spec.Protect},
		{"(allow file-write*\n", spec.Own},
		{"(deny file-read* file-write*\n", spec.DenyRead},
	} {
		if len(rule.paths) == 0 {
			continue
		}
		b.WriteString(rule.head)
		for _, p := range rule.paths {
			if err := writeFilters(&b, "subpath", p); err != nil {
				return "", err
			}
		}
		b.WriteString(")\n")
	}
	switch spec.Network {
	case config.LocalNetworkHost, "":
	case config.LocalNetworkNone:
		b.WriteString("(deny network*)\n")
	case config.LocalNetworkAllowlist:
		if spec.ProxyPort <= 0 || spec.ProxyPort > 65535 {
			return "", fmt.Errorf("seatbelt: local.network allowlist needs the egress proxy's port, not %d", spec.ProxyPort)
		}
		// Only the proxy's port on loopback; SBPL names loopback "localhost" in ip filters.
		fmt.Fprintf(&b, "(deny network*)\n(allow network-outbound (remote ip \"localhost:%d\"))\n", spec.ProxyPort)
	default:
		return "", fmt.Errorf("seatbelt: unknown local.network %q", spec.Network)
	}
	return b.String(), nil
}

// writeFilters writes a filter of kind for p, and for its /private form when p is under one
// of the links macOS keeps at the root (/tmp, /var, /etc), since a caller may hand either.
func writeFilters(b *strings.Builder, kind, p string) error {
	if err := checkPath(p); err != nil {
		return err
	}
	p = filepath.Clean(p)
	writeFilter(b, kind, p)
	for _, link := range []string{"/tmp", "/var", "/etc"} {
		if p == link || strings.HasPrefix(p, link+"/") {
			writeFilter(b, kind, "/private"+p)
		}
	}
	return nil
}

func writeFilter(b *strings.Builder, kind, p string) {
	fmt.Fprintf(b, "  (%s %s)\n", kind, sbplString(p))
}

// checkPath refuses what no profile can name safely: a relative path (Seatbelt matches
// absolute ones) and control characters (SBPL string escapes differ between macOS
// releases; a path with a newline or NUL is refused rather than guessed at).
func checkPath(p string) error {
	if !filepath.IsAbs(p) {
		return fmt.Errorf("seatbelt: path %q is not absolute", p)
	}
	for _, r := range p {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("seatbelt: path %q holds a control character", p)
		}
	}
	return nil
}

// sbplString quotes s as an SBPL (Scheme) string literal: backslash and double quote are
// escaped with a backslash; everything else, spaces and UTF-8 included, stands as is.
func sbplString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '"' || c == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	b.WriteByte('"')
	return b.String()
}
