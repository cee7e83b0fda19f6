package config

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Secret is a credential. It prints as *** through String, fmt verbs,
// JSON, YAML and slog, so it can be logged or dumped safely; Reveal returns
// the real value. An empty Secret prints as the empty string, so "not set"
// stays distinguishable from "set".
type Secret string

// Reveal returns the secret value. Call it only where the value is sent to
// its provider.
func (s Secret) Reveal() string { return string(s) }

// String returns "***", or "" when the secret is empty.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return "***"
}

// Format implements fmt.Formatter so that every verb (%v, %s, %q, %#v, %x)
// prints the masked form.
func (s Secret) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, s.String()) }

// MarshalJSON returns the masked form.
func (s Secret) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

// MarshalYAML returns the masked form.
func (s Secret) MarshalYAML() (any, error) { return s.String(), nil }

// LogValue implements slog.LogValuer with the masked form.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// Size is a number of bytes. In YAML and env vars it is written as an
// integer byte count or a number with a binary unit: 256k, 512m, 1.5g, 2t.
// The suffixes K/KB/KiB (and likewise for m, g, t) all mean powers of 1024,
// case-insensitively.
type Size int64

// Common sizes.
const (
	Byte     Size = 1
	Kibibyte      = 1024 * Byte
	Mebibyte      = 1024 * Kibibyte
	Gibibyte      = 1024 * Mebibyte
	Tebibyte      = 1024 * Gibibyte
)

var sizeUnits = map[string]Size{
	"": Byte, "b": Byte,
	"k": Kibibyte, "kb": Kibibyte, "ki": Kibibyte, "kib": Kibibyte,
	"m": Mebibyte, "mb": Mebibyte, "mi": Mebibyte, "mib": Mebibyte,
	"g": Gibibyte, "gb": Gibibyte, "gi": Gibibyte, "gib": Gibibyte,
	"t": Tebibyte, "tb": Tebibyte, "ti": Tebibyte, "tib": Tebibyte,
}

// ParseSize parses a size such as "512m", "1.5g", "256KiB" or "1024".
func ParseSize(s string) (Size, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, fmt.Errorf("invalid size %q: empty (want e.g. 512m)", s)
	}
	if strings.HasPrefix(t, "-") {
		return 0, fmt.Errorf("invalid size %q: must not be negative", s)
	}
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if i < 0 {
		i = len(t)
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	mult, ok := sizeUnits[unit]
	if num == "" || strings.Count(num, ".") > 1 || num == "." || !ok {
		return 0, fmt.Errorf("invalid size %q: want a number of bytes or a number with a unit k, m, g or t (e.g. 512m, 1.5g)", s)
	}
	r, ok := new(big.Rat).SetString(num)
	if !ok {
		return 0, fmt.Errorf("invalid size %q: bad number %q", s, num)
	}
	r.Mul(r, new(big.Rat).SetInt64(int64(mult)))
	if !r.IsInt() {
		return 0, fmt.Errorf("invalid size %q: not a whole number of bytes", s)
	}
	if n := r.Num(); n.IsInt64() {
		return Size(n.Int64()), nil
	}
	return 0, fmt.Errorf("invalid size %q: too large", s)
}

// String returns the compact form with the largest unit that divides the
// size exactly: 512m, 1536m, 1g, 1000 (bytes).
func (s Size) String() string {
	if s < 0 {
		return "-" + (-s).String()
	}
	if s == 0 {
		return "0"
	}
	for _, u := range []struct {
		n      Size
		suffix string
	}{{Tebibyte, "t"}, {Gibibyte, "g"}, {Mebibyte, "m"}, {Kibibyte, "k"}} {
		if s%u.n == 0 {
			return strconv.FormatInt(int64(s/u.n), 10) + u.suffix
		}
	}
	return strconv.FormatInt(int64(s), 10)
}

// Bytes returns the size as an int64 byte count.
func (s Size) Bytes() int64 { return int64(s) }

// MarshalText returns String.
func (s Size) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText parses with ParseSize.
func (s *Size) UnmarshalText(text []byte) error {
	v, err := ParseSize(string(text))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// ParseDuration parses a Go duration such as "30s", "15m" or "1h30m". A bare
// number other than 0 is rejected, because its unit would be a guess.
func ParseDuration(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	if _, err := strconv.ParseFloat(t, 64); err == nil && t != "0" {
		return 0, fmt.Errorf("invalid duration %q: add a unit, e.g. %ss or %sm", s, t, t)
	}
	d, err := time.ParseDuration(t)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q: want a number with a unit (ms, s, m, h), e.g. 30s, 15m, 1h30m", s)
	}
	return d, nil
}

// FormatDuration formats d the way it is written in config files: 3m rather
// than 3m0s, 1h30m rather than 1h30m0s.
func FormatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// ExpandHome replaces a leading "~" or "~/" in path with the current
// user's home directory. Other paths, including "~user", are returned
// unchanged.
func ExpandHome(path string) (string, error) {
	if path != "~" && !strings.HasPrefix(path, "~/") {
		return path, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("expand %s: %w", path, err)
	}
	return expandHomeWith(path, home), nil
}

func expandHomeWith(path, home string) string {
	if path == "~" {
		return home
	}
	if strings.HasPrefix(path, "~/") && home != "" {
		return filepath.Join(home, path[2:])
	}
	return path
}

// parseEnum matches s (case-insensitively) against allowed values.
func parseEnum[T ~string](what, s string, allowed []T) (T, error) {
	for _, a := range allowed {
		if strings.EqualFold(s, string(a)) {
			return a, nil
		}
	}
	names := make([]string, len(allowed))
	for i, a := range allowed {
		names[i] = string(a)
	}
	msg := fmt.Sprintf("invalid %s %q: want one of %s", what, s, strings.Join(names, ", "))
	if sug := suggest(s, names); sug != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", sug)
	}
	return "", fmt.Errorf("%s", msg)
}

// Backend names a sandbox backend (terminal.backend).
type Backend string

// Backends.
const (
	BackendAuto        Backend = "auto"
	BackendLocal       Backend = "local"
	BackendDocker      Backend = "docker"
	BackendSSH         Backend = "ssh"
	BackendSingularity Backend = "singularity"
	BackendModal       Backend = "modal"
	BackendDaytona     Backend = "daytona"
	BackendVercel      Backend = "vercel"
	BackendKubernetes  Backend = "kubernetes"
)

var allBackends = []Backend{BackendAuto, BackendLocal, BackendDocker, BackendSSH,
	BackendSingularity, BackendModal, BackendDaytona, BackendVercel, BackendKubernetes}

// Backends returns every valid Backend, auto first.
func Backends() []Backend { return slices.Clone(allBackends) }

// ParseBackend parses a backend name.
func ParseBackend(s string) (Backend, error) { return parseEnum("backend", s, allBackends) }

// Valid reports whether b is a known backend.
func (b Backend) Valid() bool { return slices.Contains(allBackends, b) }

// UnmarshalText parses with ParseBackend.
func (b *Backend) UnmarshalText(text []byte) error { return unmarshalEnum(b, ParseBackend, text) }

// Shell selects the shell used to run commands: auto, bash, sh, or an
// absolute path to a shell binary.
type Shell string

// Shell choices.
const (
	ShellAuto Shell = "auto"
	ShellBash Shell = "bash"
	ShellSh   Shell = "sh"
)

// ParseShell parses a shell choice.
func ParseShell(s string) (Shell, error) {
	switch v := Shell(s); {
	case v == ShellAuto || v == ShellBash || v == ShellSh:
		return v, nil
	case strings.HasPrefix(s, "/") && filepath.Clean(s) == s:
		return v, nil
	}
	return "", fmt.Errorf("invalid shell %q: want auto, bash, sh or an absolute path such as /bin/zsh", s)
}

// Valid reports whether s is auto, bash, sh or a clean absolute path.
func (s Shell) Valid() bool { _, err := ParseShell(string(s)); return err == nil }

// UnmarshalText parses with ParseShell.
func (s *Shell) UnmarshalText(text []byte) error { return unmarshalEnum(s, ParseShell, text) }

// NetworkMode is docker.network and kubernetes.network: what a sandbox's commands can reach.
type NetworkMode string

// Network modes. The empty mode follows the section's network_enabled.
const (
	// NetworkNone gives the container no network but loopback.
	NetworkNone NetworkMode = "none"
	// NetworkAllowlist gives it no route out except this tool's filtering proxy, which
	// lets through only the hosts in the section's egress_allow (or terminal.egress_allow).
	NetworkAllowlist NetworkMode = "allowlist"
	// NetworkOpen puts it on the engine's default network, unfiltered.
	NetworkOpen NetworkMode = "open"
)

var allNetworkModes = []NetworkMode{NetworkNone, NetworkAllowlist, NetworkOpen}

// ParseNetworkMode parses none, allowlist or open ("" = follow network_enabled).
func ParseNetworkMode(s string) (NetworkMode, error) {
	if s == "" {
		return "", nil
	}
	// The key is not named here: whoever reports the error (decode, config set, Validate)
	// prefixes the key it came from, docker.network or kubernetes.network.
	return parseEnum("network mode", s, allNetworkModes)
}

// UnmarshalText parses with ParseNetworkMode.
func (m *NetworkMode) UnmarshalText(text []byte) error {
	return unmarshalEnum(m, ParseNetworkMode, text)
}

// EffectiveNetwork is docker.network, or network_enabled's meaning when it is unset.
func (d DockerConfig) EffectiveNetwork() NetworkMode {
	return effectiveNetwork(d.Network, d.NetworkEnabled)
}

// EffectiveNetwork is kubernetes.network, or network_enabled's meaning when it is unset.
func (k KubernetesConfig) EffectiveNetwork() NetworkMode {
	return effectiveNetwork(k.Network, k.NetworkEnabled)
}

func effectiveNetwork(mode NetworkMode, enabled bool) NetworkMode {
	switch {
	case mode != "":
		return mode
	case enabled:
		return NetworkOpen
	}
	return NetworkNone
}

// HostKeyPolicy is ssh.strict_host_key_checking. There is deliberately no
// "no": an unknown or changed host key is never silently accepted.
type HostKeyPolicy string

// Host key policies.
const (
	// HostKeyYes accepts only hosts already in known_hosts.
	HostKeyYes HostKeyPolicy = "yes"
	// HostKeyAcceptNew records unknown hosts but rejects changed keys.
	HostKeyAcceptNew HostKeyPolicy = "accept-new"
)

var allHostKeyPolicies = []HostKeyPolicy{HostKeyYes, HostKeyAcceptNew}

// ParseHostKeyPolicy parses yes or accept-new.
func ParseHostKeyPolicy(s string) (HostKeyPolicy, error) {
	if strings.EqualFold(s, "no") || strings.EqualFold(s, "off") || strings.EqualFold(s, "false") {
		return "", fmt.Errorf("invalid strict_host_key_checking %q: disabling host key checks is not supported; use accept-new", s)
	}
	return parseEnum("strict_host_key_checking", s, allHostKeyPolicies)
}

// Valid reports whether p is yes or accept-new.
func (p HostKeyPolicy) Valid() bool { return slices.Contains(allHostKeyPolicies, p) }

// UnmarshalText parses with ParseHostKeyPolicy.
func (p *HostKeyPolicy) UnmarshalText(text []byte) error {
	return unmarshalEnum(p, ParseHostKeyPolicy, text)
}

// ApprovalMode is approvals.mode.
type ApprovalMode string

// Approval modes.
const (
	// ApprovalManual asks a human before running a command that needs approval.
	ApprovalManual ApprovalMode = "manual"
	// ApprovalDeny refuses every command that needs approval.
	ApprovalDeny ApprovalMode = "deny"
	// ApprovalOff runs everything without asking.
	ApprovalOff ApprovalMode = "off"
)

var allApprovalModes = []ApprovalMode{ApprovalManual, ApprovalDeny, ApprovalOff}

// ParseApprovalMode parses manual, deny or off.
func ParseApprovalMode(s string) (ApprovalMode, error) {
	return parseEnum("approvals mode", s, allApprovalModes)
}

// Valid reports whether m is a known mode.
func (m ApprovalMode) Valid() bool { return slices.Contains(allApprovalModes, m) }

// UnmarshalText parses with ParseApprovalMode.
func (m *ApprovalMode) UnmarshalText(text []byte) error {
	return unmarshalEnum(m, ParseApprovalMode, text)
}

// AuditLevel is audit.level.
type AuditLevel string

// Audit levels.
const (
	// AuditFull records commands and their output.
	AuditFull AuditLevel = "full"
	// AuditCommands records commands only.
	AuditCommands AuditLevel = "commands"
	// AuditOff records nothing.
	AuditOff AuditLevel = "off"
)

var allAuditLevels = []AuditLevel{AuditFull, AuditCommands, AuditOff}

// ParseAuditLevel parses full, commands or off.
func ParseAuditLevel(s string) (AuditLevel, error) {
	return parseEnum("audit level", s, allAuditLevels)
}

// Valid reports whether l is a known level.
func (l AuditLevel) Valid() bool { return slices.Contains(allAuditLevels, l) }

// UnmarshalText parses with ParseAuditLevel.
func (l *AuditLevel) UnmarshalText(text []byte) error {
	return unmarshalEnum(l, ParseAuditLevel, text)
}

// AuditOnFailure is audit.on_failure.
type AuditOnFailure string

// What happens to a call whose intent cannot be recorded.
const (
	// AuditRefuse does not run it (exit 126).
	AuditRefuse AuditOnFailure = "refuse"
	// AuditWarn runs it and warns on stderr and in the result.
	AuditWarn AuditOnFailure = "warn"
)

var allAuditOnFailures = []AuditOnFailure{AuditRefuse, AuditWarn}

// ParseAuditOnFailure parses refuse or warn.
func ParseAuditOnFailure(s string) (AuditOnFailure, error) {
	return parseEnum("audit on_failure", s, allAuditOnFailures)
}

// Valid reports whether f is known.
func (f AuditOnFailure) Valid() bool { return slices.Contains(allAuditOnFailures, f) }

// UnmarshalText parses with ParseAuditOnFailure.
func (f *AuditOnFailure) UnmarshalText(text []byte) error {
	return unmarshalEnum(f, ParseAuditOnFailure, text)
}

// AuditWitness is audit.witness.
type AuditWitness string

// Witnesses.
const (
	AuditWitnessNone     AuditWitness = ""
	AuditWitnessSyslog   AuditWitness = "syslog"
	AuditWitnessJournald AuditWitness = "journald"
)

var allAuditWitnesses = []AuditWitness{AuditWitnessNone, AuditWitnessSyslog, AuditWitnessJournald}

// ParseAuditWitness parses "", syslog or journald.
func ParseAuditWitness(s string) (AuditWitness, error) {
	if s == "" {
		return AuditWitnessNone, nil
	}
	return parseEnum("audit witness (empty for none)", s, allAuditWitnesses[1:])
}

// Valid reports whether w is known.
func (w AuditWitness) Valid() bool { return slices.Contains(allAuditWitnesses, w) }

// UnmarshalText parses with ParseAuditWitness.
func (w *AuditWitness) UnmarshalText(text []byte) error {
	return unmarshalEnum(w, ParseAuditWitness, text)
}

func unmarshalEnum[T ~string](dst *T, parse func(string) (T, error), text []byte) error {
	v, err := parse(string(text))
	if err != nil {
		return err
	}
	*dst = v
	return nil
}

// parseBool accepts true/false, yes/no, on/off and 1/0, case-insensitively.
func parseBool(s string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true", "yes", "on", "1":
		return true, nil
	case "false", "no", "off", "0":
		return false, nil
	}
	return false, fmt.Errorf("invalid bool %q: want true or false", s)
}

func parseInt(s string) (int64, error) {
	v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("invalid integer %q", s)
	}
	return v, nil
}

func parseFloat(s string) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("invalid number %q", s)
	}
	return v, nil
}

// formatFloat always includes a decimal point so YAML reads it back as a float.
func formatFloat(f float64) string {
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsAny(s, ".eE") {
		s += ".0"
	}
	return s
}

// suggest returns the candidate closest to s by edit distance, or "" when
// none is close enough to be a plausible typo.
func suggest(s string, candidates []string) string {
	best, bestD := "", math.MaxInt
	ls := strings.ToLower(s)
	for _, c := range candidates {
		if d := editDistance(ls, strings.ToLower(c)); d < bestD {
			best, bestD = c, d
		}
	}
	if best == "" || bestD > max(2, len([]rune(s))/3) {
		return ""
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

// Persistence is terminal.persistence: whether a session's sandbox outlives a command.
type Persistence string

// Persistence choices.
const (
	// PersistenceSession keeps each session's sandbox and shell state between commands.
	PersistenceSession Persistence = "session"
	// PersistenceEphemeral gives every command a fresh sandbox, removed when it ends.
	PersistenceEphemeral Persistence = "ephemeral"
)

var allPersistences = []Persistence{PersistenceSession, PersistenceEphemeral}

// ParsePersistence parses session or ephemeral.
func ParsePersistence(s string) (Persistence, error) {
	return parseEnum("persistence", s, allPersistences)
}

// UnmarshalText parses with ParsePersistence.
func (p *Persistence) UnmarshalText(text []byte) error {
	return unmarshalEnum(p, ParsePersistence, text)
}

// DaytonaChannel is daytona.channel: how commands reach a Daytona sandbox.
type DaytonaChannel string

// Daytona channels.
const (
	// DaytonaChannelAuto uses the helper, and toolbox sessions where the helper cannot run.
	DaytonaChannelAuto DaytonaChannel = "auto"
	// DaytonaChannelHelper uses only the helper over the toolbox PTY WebSocket.
	DaytonaChannelHelper DaytonaChannel = "helper"
	// DaytonaChannelSession runs each command in a toolbox process session of its own.
	DaytonaChannelSession DaytonaChannel = "session"
)

var allDaytonaChannels = []DaytonaChannel{DaytonaChannelAuto, DaytonaChannelHelper, DaytonaChannelSession}

// ParseDaytonaChannel parses auto, helper or session.
func ParseDaytonaChannel(s string) (DaytonaChannel, error) {
	return parseEnum("daytona channel", s, allDaytonaChannels)
}

// Valid reports whether c is auto, helper or session.
func (c DaytonaChannel) Valid() bool { return slices.Contains(allDaytonaChannels, c) }

// UnmarshalText parses with ParseDaytonaChannel.
func (c *DaytonaChannel) UnmarshalText(text []byte) error {
	return unmarshalEnum(c, ParseDaytonaChannel, text)
}

// KubernetesMode is kubernetes.mode: what the backend creates for a session.
type KubernetesMode string

// Kubernetes modes.
const (
	// KubernetesModePod creates a bare pod per session.
	KubernetesModePod KubernetesMode = "pod"
	// KubernetesModeAgentSandbox creates an agents.x-k8s.io Sandbox per session (the
	// agent-sandbox controller then makes its pod).
	KubernetesModeAgentSandbox KubernetesMode = "agent-sandbox"
)

var allKubernetesModes = []KubernetesMode{KubernetesModePod, KubernetesModeAgentSandbox}

// ParseKubernetesMode parses pod or agent-sandbox.
func ParseKubernetesMode(s string) (KubernetesMode, error) {
	return parseEnum("kubernetes mode", s, allKubernetesModes)
}

// Valid reports whether m is a known mode.
func (m KubernetesMode) Valid() bool { return slices.Contains(allKubernetesModes, m) }

// UnmarshalText parses with ParseKubernetesMode.
func (m *KubernetesMode) UnmarshalText(text []byte) error {
	return unmarshalEnum(m, ParseKubernetesMode, text)
}

// Suggest returns the candidate closest to s, or "" when none is close enough to be a typo
// (for "did you mean" hints outside this package: backend names, commands).
func Suggest(s string, candidates []string) string { return suggest(s, candidates) }
