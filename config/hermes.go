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
}

var (
	seconds     = conv{secondsFn, "a bare number is seconds"}
	megabytes   = conv{megabytesFn, "a bare number is MB"}
	backendName = conv{backendFn, "vercel_sandbox means vercel"}
	persistent  = conv{persistentFn, "true is session, false is ephemeral"}
	asIs        = conv{}
)

// apply converts v; the zero conv keeps it as it is.
func (c conv) apply(v string) (string, error) {
	if c.fn == nil {
		return v, nil
	}
	return c.fn(v)
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
	slices.SortFunc(out, func(a, b Alias) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// resolveAlias maps an alias to its key and converts value for it. A key that is no alias
// comes back unchanged.
func resolveAlias(key, value string) (string, string, error) {
	if key == aliasKey {
		return aliasedTo, value, nil
	}
	h, ok := hermesFlat[key]
	if !ok {
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
