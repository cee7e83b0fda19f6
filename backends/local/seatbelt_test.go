package local

import (
	"strings"
	"testing"

	"github.com/hermes-sandbox/hermes-sandbox/config"
)

const seatbeltHead = `(version 1)
(allow default)
(deny file-write*)
(allow file-write*
`

const seatbeltDev = `  (literal "/dev/null")
  (literal "/dev/zero")
  (literal "/dev/tty")
  (literal "/dev/dtracehelper")
  (literal "/dev/random")
  (literal "/dev/urandom")
  (regex #"^/dev/fd/")
  (regex #"^/dev/ttys[0-9]+$"))
`

// TestSeatbeltProfile compares whole generated profiles with the expected ones, hostile
// paths included: a quote or backslash in a path must not end the string and add rules.
func TestSeatbeltProfile(t *testing.T) {
	tests := []struct {
		name string
		spec SeatbeltSpec
		want string
	}{
		{
			name: "host network, temp dirs under the /private links",
			spec: SeatbeltSpec{WorkDir: "/Users/a/proj", TempDirs: []string{"/tmp", "/var/folders/x1/T"},
				Protect: []string{"/Users/a/.config/hermes-sandbox"}, DenyRead: []string{"/Users/a/.ssh"},
				Network: config.LocalNetworkHost},
			want: seatbeltHead + `  (subpath "/Users/a/proj")
  (subpath "/tmp")
  (subpath "/private/tmp")
  (subpath "/var/folders/x1/T")
  (subpath "/private/var/folders/x1/T")
` + seatbeltDev + `(deny file-write*
  (subpath "/Users/a/.config/hermes-sandbox")
)
(deny file-read* file-write*
  (subpath "/Users/a/.ssh")
)
`,
		},
		{
			name: "network none",
			spec: SeatbeltSpec{WorkDir: "/w", Network: config.LocalNetworkNone},
			want: seatbeltHead + "  (subpath \"/w\")\n" + seatbeltDev + "(deny network*)\n",
		},
		{
			name: "allowlist reaches only the proxy",
			spec: SeatbeltSpec{WorkDir: "/w", Network: config.LocalNetworkAllowlist, ProxyPort: 43128},
			want: seatbeltHead + "  (subpath \"/w\")\n" + seatbeltDev +
				"(deny network*)\n(allow network-outbound (remote ip \"localhost:43128\"))\n",
		},
		{
			name: "hostile paths are escaped",
			spec: SeatbeltSpec{WorkDir: `/Users/a/my "proj") (allow file-write* (subpath "/")`,
				DenyRead: []string{`/Users/a/back\slash\`, "/Users/a/with space/é"}},
			want: seatbeltHead + `  (subpath "/Users/a/my \"proj\") (allow file-write* (subpath \"/\")")
` + seatbeltDev + `(deny file-read* file-write*
  (subpath "/Users/a/back\\slash\\")
  (subpath "/Users/a/with space/é")
)
`,
		},
		{
			name: "auto writes anywhere but Protect, the helper's own state writable inside it",
			spec: SeatbeltSpec{WorkDir: "/w", WriteAnywhere: true, Protect: []string{"/s"}, Own: []string{"/s/local/x"},
				DenyRead: []string{"/d"}, Network: config.LocalNetworkNone},
			want: "(version 1)\n(allow default)\n" +
				"(deny file-write*\n  (subpath \"/s\")\n)\n" +
				"(allow file-write*\n  (subpath \"/s/local/x\")\n)\n" +
				"(deny file-read* file-write*\n  (subpath \"/d\")\n)\n" +
				"(deny network*)\n",
		},
		{
			name: "strict with the helper's own state: allowed after Protect, before DenyRead",
			spec: SeatbeltSpec{WorkDir: "/w", Protect: []string{"/var/s"}, Own: []string{"/var/s/local/x"}, DenyRead: []string{"/var/s/local/x/secret"}},
			want: seatbeltHead + "  (subpath \"/w\")\n" + seatbeltDev +
				"(deny file-write*\n  (subpath \"/var/s\")\n  (subpath \"/private/var/s\")\n)\n" +
				"(allow file-write*\n  (subpath \"/var/s/local/x\")\n  (subpath \"/private/var/s/local/x\")\n)\n" +
				"(deny file-read* file-write*\n  (subpath \"/var/s/local/x/secret\")\n  (subpath \"/private/var/s/local/x/secret\")\n)\n",
		},
		{
			name: "paths are cleaned",
			spec: SeatbeltSpec{WorkDir: "/w/./x/../y/", Protect: []string{"/etc//hermes"}},
			want: seatbeltHead + "  (subpath \"/w/y\")\n" + seatbeltDev +
				"(deny file-write*\n  (subpath \"/etc/hermes\")\n  (subpath \"/private/etc/hermes\")\n)\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := SeatbeltProfile(tt.spec)
			if err != nil {
				t.Fatalf("SeatbeltProfile(%+v): %v", tt.spec, err)
			}
			if got != tt.want {
				t.Errorf("SeatbeltProfile(%+v) =\n%s\nwant\n%s", tt.spec, got, tt.want)
			}
		})
	}
}

// TestSeatbeltProfileRefuses: what cannot be named safely is an error, not a weaker profile.
func TestSeatbeltProfileRefuses(t *testing.T) {
	tests := []struct {
		name string
		spec SeatbeltSpec
		want string
	}{
		{"no workdir", SeatbeltSpec{}, "no working directory"},
		{"relative workdir", SeatbeltSpec{WorkDir: "proj"}, "not absolute"},
		{"relative workdir, writes anywhere", SeatbeltSpec{WorkDir: "proj", WriteAnywhere: true}, "not absolute"},
		{"newline in the helper's own state", SeatbeltSpec{WorkDir: "/w", Own: []string{"/s\n(allow default)"}}, "control character"},
		{"newline in a deny path", SeatbeltSpec{WorkDir: "/w", DenyRead: []string{"/a\n(allow default)"}}, "control character"},
		{"NUL in a temp dir", SeatbeltSpec{WorkDir: "/w", TempDirs: []string{"/tmp\x00x"}}, "control character"},
		{"allowlist without a proxy", SeatbeltSpec{WorkDir: "/w", Network: config.LocalNetworkAllowlist}, "proxy's port"},
		{"unknown network", SeatbeltSpec{WorkDir: "/w", Network: "bridge"}, "unknown local.network"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := SeatbeltProfile(tt.spec)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("SeatbeltProfile(%+v) = %q, %v; want an error containing %q", tt.spec, got, err, tt.want)
			}
		})
	}
}
