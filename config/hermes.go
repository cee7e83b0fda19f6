package config

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Hermes Agent users bring their own spellings: flat keys in `hermes config set`, TERMINAL_*
// variables in the environment or ~/.hermes/.env, and ~/.hermes/config.yaml. This file maps
// each of them onto our keys, converting units where Hermes uses bare numbers (seconds for
// timeouts, MB for memory).

// conv turns a Hermes value into one our parser accepts; note says how, for people.
type conv struct {
	fn   func(string) (string, error)
	note string
	// explain, if set, says why a particular value was mapped as it was ("" = nothing to say).
	explain func(in, out string) string
}

var (
	seconds     = conv{fn: secondsFn, note: "a bare number is seconds"}
	megabytes   = conv{fn: megabytesFn, note: "a bare number is MB"}
	backendName = conv{fn: backendFn, note: "vercel_sandbox means vercel"}
	persistent  = conv{fn: persistentFn, note: "true is session, false is ephemeral"}
	netSwitch   = conv{fn: networkFn, note: "true is open, false is none", explain: networkExplain}
	approvalMd  = conv{fn: approvalModeFn, note: "smart is manual", explain: approvalExplain}
	asIs        = conv{}
)

// apply converts v; the zero conv keeps it as it is.
func (c conv) apply(v string) (string, error) {
	if c.fn == nil {
		return v, nil
	}
	return c.fn(v)
}

// why says why in was mapped to out, or "".
func (c conv) why(in, out string) string {
	if c.explain == nil {
		return ""
	}
	return c.explain(in, out)
}

// networkFn maps Hermes's terminal.docker_network (a bool, default true) onto docker.network.
func networkFn(s string) (string, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true", "1", "yes":
		return string(NetworkOpen), nil
	case "false", "0", "no":
		return string(NetworkNone), nil
	}
	return s, nil
}

func networkExplain(in, out string) string {
	if out == string(NetworkOpen) {
		return "Hermes's docker_network: true gives the sandbox the open network; hermes-sandbox's default is none " +
			"(set docker.network none, or allowlist with docker.egress_allow, to keep it closed)"
	}
	return ""
}

// SmartApprovalNote says how Hermes's approvals.mode smart is mapped, and why.
const SmartApprovalNote = "Hermes's smart mode asks a model to judge each flagged command; hermes-sandbox never lets a " +
	"model approve commands, so smart becomes manual: the policy's dangerous findings ask a person " +
	"(deny when nobody is at a terminal), and hardline commands are refused as before"

// approvalModeFn maps Hermes's approvals.mode values: smart (its default) is manual here; the
// spellings that mean "approve everything" get a pointer to off instead of a silent mapping.
func approvalModeFn(s string) (string, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "smart":
		return string(ApprovalManual), nil
	case "yolo", "always":
		return "", fmt.Errorf("%q is not an approvals mode here: the equivalent of Hermes's --yolo is "+
			"approvals.mode off (hardline commands are still refused); valid modes: manual, deny, off", s)
	}
	return s, nil
}

func approvalExplain(in, out string) string {
	if strings.EqualFold(strings.TrimSpace(in), "smart") {
		return SmartApprovalNote
	}
	return ""
}

// secondsFn accepts a bare number of seconds (Hermes's unit) or a duration with a unit.
func secondsFn(s string) (string, error) {
	t := strings.TrimSpace(s)
	if n, err := strconv.ParseFloat(t, 64); err == nil {
		if n < 0 {
			return "", fmt.Errorf("invalid number of seconds %q: must not be negative", s)
		}
		return strconv.FormatFloat(n, 'f', -1, 64) + "s", nil
	}
	return t, nil
}

// megabytes accepts a bare number of MB (Hermes's unit for container_memory) or a size.
func megabytesFn(s string) (string, error) {
	t := strings.TrimSpace(s)
	if _, err := strconv.ParseFloat(t, 64); err == nil {
		return t + "m", nil
	}
	return t, nil
}

// persistentFn maps Hermes's container_persistent (a bool) onto terminal.persistence.
func persistentFn(s string) (string, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true", "1", "yes":
		return string(PersistenceSession), nil
	case "false", "0", "no":
		return string(PersistenceEphemeral), nil
	}
	return s, nil
}

// backendFn accepts Hermes's backend names (vercel_sandbox is our vercel).
func backendFn(s string) (string, error) {
	if strings.TrimSpace(s) == "vercel_sandbox" {
		return "vercel", nil
	}
	return s, nil
}

// hermesKey is one Hermes spelling of one of our keys.
type hermesKey struct {
	key  string
	conv conv
}

// hermesValued are our own keys whose values Hermes spells differently; config set and the
// config file accept the Hermes value through the same conversion as an import.
var hermesValued = map[string]conv{
	"terminal.backend": backendName,
	"approvals.mode":   approvalMd,
}

// hermesFlat are Hermes's flat key names, accepted by config set/get/unset and listed by
// `config list --aliases`. The prefix-less forms (docker_image, ssh_host…) are the keys of
// Hermes's terminal section.
var hermesFlat = map[string]hermesKey{
	"terminal_backend":              {"terminal.backend", backendName},
	"terminal_env":                  {"terminal.backend", backendName},
	"terminal_cwd":                  {"terminal.cwd", asIs},
	"terminal_timeout":              {"terminal.timeout", seconds},
	"terminal_docker_image":         {"docker.image", asIs},
	"terminal_singularity_image":    {"singularity.image", asIs},
	"terminal_modal_image":          {"modal.image", asIs},
	"terminal_daytona_image":        {"daytona.image", asIs},
	"terminal_ssh_host":             {"ssh.host", asIs},
	"terminal_ssh_user":             {"ssh.user", asIs},
	"terminal_ssh_port":             {"ssh.port", asIs},
	"terminal_ssh_key":              {"ssh.key", asIs},
	"terminal_container_cpu":        {"docker.cpu_quota", asIs},
	"terminal_container_memory":     {"docker.memory_limit", megabytes},
	"singularity_readonly":          {"singularity.readonly", asIs},
	"terminal_container_persistent": {"terminal.persistence", persistent},
	"modal_token_id":                {"modal.token_id", asIs},
	"modal_token_secret":            {"modal.token_secret", asIs},
	"daytona_api_key":               {"daytona.api_key", asIs},
	"vercel_token":                  {"vercel.token", asIs},
}

// hermesEnv are the TERMINAL_* variables Hermes reads, mapped onto our keys. They rank below
// HERMES_SANDBOX_* and above the config files; ~/.hermes/.env ranks below the process env.
var hermesEnv = map[string]hermesKey{
	"TERMINAL_ENV":                  {"terminal.backend", backendName},
	"TERMINAL_BACKEND":              {"terminal.backend", backendName},
	"TERMINAL_CWD":                  {"terminal.cwd", asIs},
	"TERMINAL_TIMEOUT":              {"terminal.timeout", seconds},
	"TERMINAL_DOCKER_IMAGE":         {"docker.image", asIs},
	"TERMINAL_SINGULARITY_IMAGE":    {"singularity.image", asIs},
	"TERMINAL_MODAL_IMAGE":          {"modal.image", asIs},
	"TERMINAL_DAYTONA_IMAGE":        {"daytona.image", asIs},
	"TERMINAL_SSH_HOST":             {"ssh.host", asIs},
	"TERMINAL_SSH_USER":             {"ssh.user", asIs},
	"TERMINAL_SSH_PORT":             {"ssh.port", asIs},
	"TERMINAL_SSH_KEY":              {"ssh.key", asIs},
	"TERMINAL_CONTAINER_CPU":        {"docker.cpu_quota", asIs},
	"TERMINAL_CONTAINER_MEMORY":     {"docker.memory_limit", megabytes},
	"TERMINAL_CONTAINER_PERSISTENT": {"terminal.persistence", persistent},
	"TERMINAL_DOCKER_FORWARD_ENV":   {"terminal.env_passthrough", asIs},
	"TERMINAL_DOCKER_VOLUMES":       {"docker.volumes", asIs},
	"TERMINAL_DOCKER_ENV":           {"docker.env", asIs},
}

// Alias is one accepted alternative spelling of a key.
type Alias struct {
	Name string // as typed: terminal_docker_image
	Key  string // what it sets: docker.image
	Note string // unit conversion, if any
}

// Aliases lists every alternative key spelling, sorted by name: `sandbox` and Hermes's flat keys.
func Aliases() []Alias {
	out := []Alias{{Name: aliasKey, Key: aliasedTo}}
	for name, h := range hermesFlat {
		out = append(out, Alias{Name: name, Key: h.key, Note: h.conv.note})
	}
	for name, h := range hermesYAML {
		if _, ours := schema.byKey[name]; !ours {
			out = append(out, Alias{Name: name, Key: h.key, Note: h.conv.note})
		}
	}
	slices.SortFunc(out, func(a, b Alias) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// hermesSpelling finds key among Hermes's spellings: the flat keys of `hermes config set`
// and the dotted paths of Hermes's config.yaml that are not our own keys.
func hermesSpelling(key string) (hermesKey, bool) {
	if h, ok := hermesFlat[key]; ok {
		return h, true
	}
	if _, ours := schema.byKey[key]; ours {
		return hermesKey{}, false
	}
	h, ok := hermesYAML[key]
	return h, ok
}

// HermesSpelling says which of our keys a Hermes key spelling sets ("" and false if it is none).
func HermesSpelling(key string) (string, bool) {
	h, ok := hermesSpelling(key)
	return h.key, ok
}

// resolveAlias maps an alias to its key and converts value for it. A key that is no alias
// comes back unchanged, its value converted when Hermes spells that key's values its own way.
func resolveAlias(key, value string) (string, string, error) {
	if key == aliasKey {
		key = aliasedTo
	}
	h, ok := hermesSpelling(key)
	if !ok {
		if c, ok := hermesValued[key]; ok {
			v, err := c.apply(value)
			if err != nil {
				return key, value, fmt.Errorf("%s: %w", key, err)
			}
			return key, v, nil
		}
		return key, value, nil
	}
	v, err := h.conv.apply(value)
	if err != nil {
		return h.key, value, fmt.Errorf("%s (alias of %s): %w", key, h.key, err)
	}
	return h.key, v, nil
}

// hermesHome is Hermes's own directory: $HERMES_HOME, else ~/.hermes. It is "" when the
// environment names no home, so tests with an empty environment never read the real one.
func hermesHome(env envMap) string {
	if h, _ := env.lookup("HERMES_HOME"); h != "" {
		return h
	}
	if h, _ := env.lookup("HOME"); h != "" {
		return filepath.Join(h, ".hermes")
	}
	return ""
}

// readDotenv parses a .env file: NAME=value lines, optional `export `, quotes stripped,
// comments and blank lines skipped. A missing file is no error.
func readDotenv(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		line = strings.TrimPrefix(line, "export ")
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if len(v) >= 2 && (v[0] == '"' && v[len(v)-1] == '"' || v[0] == '\'' && v[len(v)-1] == '\'') {
			v = v[1 : len(v)-1]
		} else if i := strings.Index(v, " #"); i >= 0 {
			v = strings.TrimSpace(v[:i])
		}
		out[k] = v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return out, nil
}

// HermesDir is Hermes Agent's directory for this environment ($HERMES_HOME, else ~/.hermes),
// or "" when the environment names no home. Its .env is read as configuration, so the gate
// protects it like our own files.
func HermesDir(environ []string) string { return hermesHome(newEnvMap(environ)) }

// hermesFileHint is the pointer for a Hermes key pasted into our config file: section.name
// (or a top-level name) that is a Hermes spelling of one of our keys. "" when it is none.
func hermesFileHint(path string) string {
	h, ok := hermesSpelling(path)
	if !ok {
		return ""
	}
	sect, name, _ := strings.Cut(h.key, ".")
	hint := fmt.Sprintf("%s is Hermes Agent's spelling of %s: write %s: under %s: here", path, h.key, name, sect)
	if h.conv.note != "" {
		hint += " (" + h.conv.note + ")"
	}
	return hint + ", or import a whole Hermes config with `hermes-sandbox config import-hermes`"
}

// hermesValueHint is the pointer for a Hermes value of one of our keys (approvals.mode smart,
// terminal.backend vercel_sandbox) written into our config file; "" when value is none.
func hermesValueHint(key, value string) string {
	c, ok := hermesValued[key]
	if !ok {
		return ""
	}
	out, err := c.apply(value)
	if err != nil {
		return err.Error()
	}
	if out == value {
		return ""
	}
	hint := fmt.Sprintf("%s is Hermes Agent's spelling: write %s", value, out)
	if why := c.why(value, out); why != "" {
		hint += " (" + why + ")"
	}
	return hint
}

// HermesPointer is the one-line pointer for a Hermes Agent command or flag that has no
// equivalent of the same name here (chat, approvals, --yolo); "" for any other name.
func HermesPointer(name string) string { return hermesPointers[name] }

// hermesPointers are Hermes Agent's commands and flags that new users type here.
var hermesPointers = map[string]string{
	"chat": "hermes-sandbox has no chat: it is the sandbox an agent drives, not the agent. " +
		"Connect your agent (Hermes Agent, Claude, any MCP client) to `hermes-sandbox mcp`; see the README's MCP section",
	"approvals": "hermes-sandbox has no approvals command: approvals are settings, " +
		"`hermes-sandbox config set approvals.mode manual|deny|off` and approvals.command_allowlist " +
		"(see `hermes-sandbox config list`); a prompt answered \"always\" adds to that list",
	"--yolo": "hermes-sandbox has no --yolo: for the same effect run with HERMES_SANDBOX_APPROVALS_MODE=off " +
		"(or `config set approvals.mode off`); hardline commands are still refused",
	"model":   "hermes-sandbox has no model: it runs an agent's commands; the model belongs to the agent (see the README's MCP section)",
	"gateway": "hermes-sandbox has no gateway: expose it to agents with `hermes-sandbox mcp` (stdio or --http); see the README's MCP section",
}

// SpellingNote says what `config set key value` stored when key or value is a Hermes spelling
// ("terminal.docker_image is docker.image here"; approvals.mode smart is manual, and why), or
// "" when both are ours.
func SpellingNote(key, value string) string {
	var parts []string
	c := hermesValued[key]
	if h, ok := hermesSpelling(key); ok {
		parts = append(parts, fmt.Sprintf("%s is Hermes's spelling of %s", key, h.key))
		c = h.conv
	}
	if out, err := c.apply(value); err == nil && out != value {
		p := fmt.Sprintf("%s is stored as %s", value, out)
		if why := c.why(value, out); why != "" {
			p += ": " + why
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, "; ")
}
