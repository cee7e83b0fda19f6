package config

import "slices"

// LocalConfig is the local section: how commands on this host are confined.
type LocalConfig struct {
	// Confine is how the helper confines every command it starts (Landlock on Linux).
	Confine Confine `yaml:"confine"`
}

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
