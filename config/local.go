package config

import "slices"

// LocalConfig is the local section: how commands on this host are confined.
type LocalConfig struct {
	// Confine is how the helper confines every command it starts (namespaces and Landlock on
	// Linux).
	Confine Confine `yaml:"confine"`
	// Network is what commands can reach: host, none or allowlist ("" = by confine).
	Network LocalNetwork `yaml:"network"`
	// EgressAllow lists the hosts an allowlist network reaches ("" = terminal.egress_allow).
	EgressAllow []string `yaml:"egress_allow"`
	// DenyRead are paths commands can neither read nor list ("~" is the user's home; the
	// secrets file of this tool is always among them).
	DenyRead []string `yaml:"deny_read"`
	// BranchMaxBytes bounds what a fork, snapshot or restore of a local session copies byte
	// by byte where the filesystem cannot clone files (FICLONE): beyond it the copy stops with
	// an error rather than filling the disk. Cloned files do not count.
	BranchMaxBytes Size `yaml:"branch_max_bytes"`
}

// DefaultBranchMaxBytes is local.branch_max_bytes by default: 1 GiB.
const DefaultBranchMaxBytes Size = 1 << 30

// Confine is local.confine.
type Confine string

// Confinement modes.
const (
	// ConfineAuto makes this tool's config and state read-only to commands where the kernel
	// can enforce it (Landlock), and says so in doctor where it cannot.
	ConfineAuto Confine = "auto"
	// ConfineStrict lets commands write only under the working directory and the temporary
	// directories; it is an error where the kernel cannot enforce it.
	ConfineStrict Confine = "strict"
	// ConfineOff leaves commands unconfined: only the gate's path checks apply.
	ConfineOff Confine = "off"
)

var allConfines = []Confine{ConfineAuto, ConfineStrict, ConfineOff}

// ParseConfine parses auto, strict or off.
func ParseConfine(s string) (Confine, error) { return parseEnum("local confine", s, allConfines) }

// Valid reports whether m is a known mode.
func (m Confine) Valid() bool { return slices.Contains(allConfines, m) }

// UnmarshalText parses with ParseConfine.
func (m *Confine) UnmarshalText(text []byte) error { return unmarshalEnum(m, ParseConfine, text) }

// LocalNetwork is local.network: what local commands can reach.
type LocalNetwork string

// Local network modes. The empty mode follows local.confine and the allowlists: host with
// confine off; allowlist when local.egress_allow or terminal.egress_allow is set; else none
// under strict and host under auto.
const (
	// LocalNetworkHost shares this host's network.
	LocalNetworkHost LocalNetwork = "host"
	// LocalNetworkNone runs commands in a network namespace with loopback only.
	LocalNetworkNone LocalNetwork = "none"
	// LocalNetworkAllowlist is none plus this tool's filtering proxy, which lets through only
	// the hosts in local.egress_allow (or terminal.egress_allow).
	LocalNetworkAllowlist LocalNetwork = "allowlist"
)

var allLocalNetworks = []LocalNetwork{LocalNetworkHost, LocalNetworkNone, LocalNetworkAllowlist}

// ParseLocalNetwork parses host, none or allowlist ("" = follow local.confine).
func ParseLocalNetwork(s string) (LocalNetwork, error) {
	if s == "" {
		return "", nil
	}
	return parseEnum("local network", s, allLocalNetworks)
}

// UnmarshalText parses with ParseLocalNetwork.
func (m *LocalNetwork) UnmarshalText(text []byte) error {
	return unmarshalEnum(m, ParseLocalNetwork, text)
}

// EffectiveNetwork is local.network, or what local.confine makes of it when it is unset.
// shared is terminal.egress_allow.
func (l LocalConfig) EffectiveNetwork(shared []string) LocalNetwork {
	switch {
	case l.Network != "":
		return l.Network
	case l.Confine == ConfineOff:
		return LocalNetworkHost
	case len(l.EgressAllow) > 0 || len(shared) > 0:
		return LocalNetworkAllowlist
	case l.Confine == ConfineStrict:
		return LocalNetworkNone
	}
	return LocalNetworkHost
}

// DefaultDenyRead are the paths local commands may not read by default: credentials, keys,
// tokens, password stores, browser profiles and shell histories ("~" is the user's home).
func DefaultDenyRead() []string {
	return []string{
		"~/.ssh", "~/.aws", "~/.azure", "~/.config/gcloud", "~/.kube", "~/.docker/config.json", "~/.gnupg",
		"~/.netrc", "~/.git-credentials", "~/.config/gh", "~/.config/hub", "~/.npmrc", "~/.yarnrc", "~/.pypirc",
		"~/.config/pip/pip.conf", "~/.cargo/credentials", "~/.cargo/credentials.toml", "~/.gem/credentials",
		"~/.m2/settings.xml", "~/.gradle/gradle.properties", "~/.terraform.d/credentials.tfrc.json",
		"~/.config/doctl", "~/.oci", "~/.password-store", "~/.local/share/keyrings", "~/.vault-token",
		"~/.mozilla", "~/.config/google-chrome", "~/.config/chromium", "~/.config/BraveSoftware",
		"~/.config/microsoft-edge", "~/.config/vivaldi", "~/.config/opera", "~/snap/firefox",
		"~/.bash_history", "~/.zsh_history", "~/.zhistory", "~/.histfile", "~/.sh_history", "~/.python_history",
		"~/.node_repl_history", "~/.psql_history", "~/.mysql_history", "~/.sqlite_history", "~/.lesshst",
		"~/.local/share/fish/fish_history", "~/.config/fish/fish_history",
		"~/.hermes/.env",
	}
}
