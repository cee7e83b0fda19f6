package config

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// HermesImport is what `config import-hermes` found in a Hermes Agent directory: the settings
// it maps onto ours, and every Hermes key it could not, so nothing is dropped silently.
type HermesImport struct {
	Dir     string     // the Hermes directory read
	Read    []string   // the files that existed and were read
	Set     []Imported // in the order they apply; a later entry for the same key wins
	Ignored []string   // Hermes keys (dotted, or variable names) with no equivalent here
	Failed  []Skipped  // Hermes keys with an equivalent whose value could not be taken over
}

// Skipped is a Hermes setting that has an equivalent here but was not imported, and why.
type Skipped struct {
	From   string // as in Imported.From
	Key    string // our key ("" if the failure came before mapping)
	Reason string
}

// Imported is one setting taken from Hermes.
type Imported struct {
	Key    string // our key
	Value  string // in the form Set accepts
	From   string // "config.yaml: terminal.docker.memory_limit" or ".env: TERMINAL_ENV"
	Secret bool
	Note   string // why the value was mapped as it was (approvals.mode smart), or ""
}

// hermesYAML maps the dotted paths of Hermes's config.yaml onto our keys: the flat terminal
// keys of Hermes's template and the nested terminal.docker.* of the hardened one.
var hermesYAML = map[string]hermesKey{
	"terminal.backend":                 {"terminal.backend", backendName},
	"terminal.env":                     {"terminal.backend", backendName},
	"terminal.cwd":                     {"terminal.cwd", asIs},
	"terminal.timeout":                 {"terminal.timeout", seconds},
	"terminal.docker_image":            {"docker.image", asIs},
	"terminal.docker_forward_env":      {"terminal.env_passthrough", asIs},
	"terminal.container_persistent":    {"terminal.persistence", persistent},
	"terminal.docker_network":          {"docker.network", netSwitch},
	"command_allowlist":                {"approvals.command_allowlist", asIs},
	"terminal.env_passthrough":         {"terminal.env_passthrough", asIs},
	"terminal.docker_volumes":          {"docker.volumes", asIs},
	"terminal.docker_env":              {"docker.env", asIs},
	"terminal.singularity_image":       {"singularity.image", asIs},
	"terminal.modal_image":             {"modal.image", asIs},
	"terminal.daytona_image":           {"daytona.image", asIs},
	"terminal.ssh_host":                {"ssh.host", asIs},
	"terminal.ssh_user":                {"ssh.user", asIs},
	"terminal.ssh_port":                {"ssh.port", asIs},
	"terminal.ssh_key":                 {"ssh.key", asIs},
	"terminal.container_cpu":           {"docker.cpu_quota", asIs},
	"terminal.container_memory":        {"docker.memory_limit", megabytes},
	"terminal.docker.timeout":          {"terminal.timeout", seconds},
	"terminal.docker.image":            {"docker.image", asIs},
	"terminal.docker.network_enabled":  {"docker.network_enabled", asIs},
	"terminal.docker.memory_limit":     {"docker.memory_limit", megabytes},
	"terminal.docker.cpu_quota":        {"docker.cpu_quota", asIs},
	"terminal.docker.pids_limit":       {"docker.pids_limit", asIs},
	"terminal.docker.read_only_rootfs": {"docker.read_only_rootfs", asIs},
	"terminal.docker.privileged":       {"docker.privileged", asIs},
	"terminal.docker.security_opt":     {"docker.security_opt", asIs},
	"terminal.docker.user":             {"docker.user", asIs},
	"terminal.docker.cwd":              {"docker.cwd", asIs},
	"terminal.docker.volumes":          {"docker.volumes", asIs},
	"terminal.docker.env":              {"docker.env", asIs},
	"terminal.docker.gpus":             {"docker.gpus", asIs},
	"terminal.singularity.image":       {"singularity.image", asIs},
	"terminal.singularity.readonly":    {"singularity.readonly", asIs},
	"terminal.ssh.host":                {"ssh.host", asIs},
	"terminal.ssh.user":                {"ssh.user", asIs},
	"terminal.ssh.port":                {"ssh.port", asIs},
	"terminal.ssh.key":                 {"ssh.key", asIs},
	"terminal.modal.image":             {"modal.image", asIs},
	"terminal.modal.gpu":               {"modal.gpu", asIs},
	"modal_token_id":                   {"modal.token_id", asIs},
	"modal_token_secret":               {"modal.token_secret", asIs},
	"singularity_readonly":             {"singularity.readonly", asIs},
	"approvals.mode":                   {"approvals.mode", approvalMd},
	"approvals.timeout":                {"approvals.timeout", seconds},
	"approvals.command_allowlist":      {"approvals.command_allowlist", asIs},
	"loop.max_tool_calls":              {"loop.max_tool_calls", asIs},
	"audit.enabled":                    {"audit.enabled", asIs},
	"audit.level":                      {"audit.level", asIs},
	"audit.log_destination":            {"audit.log_destination", asIs},
	"tools.shell_execute":              {"tools.shell_execute", asIs},
	"tools.code_execution":             {"tools.code_execution", asIs},
	"tools.file_write":                 {"tools.file_write", asIs},
	"tools.file_system":                {"tools.file_system", asIs},
	"terminal.docker.extra_hosts":      {"docker.extra_hosts", asIs},
	"terminal.docker.runtime":          {"docker.runtime", asIs},
	"terminal.singularity.executable":  {"singularity.executable", asIs},
	"terminal.singularity.binds":       {"singularity.binds", asIs},
	"terminal.docker.env_passthrough":  {"docker.env_passthrough", asIs},
	"terminal.ssh.known_hosts":         {"ssh.known_hosts", asIs},
	"terminal.ssh.connect_timeout":     {"ssh.connect_timeout", seconds},
}

// ReadHermes reads dir/config.yaml and dir/.env (dir "" = $HERMES_HOME or ~/.hermes from
// environ) and maps what it can. Values from config.yaml win over .env, as in Hermes.
func ReadHermes(dir string, environ []string) (*HermesImport, error) {
	if dir == "" {
		dir = hermesHome(newEnvMap(environ))
	}
	if dir == "" {
		return nil, fmt.Errorf("no Hermes directory: HOME is not set; name one (hermes-sandbox config import-hermes DIR)")
	}
	imp := &HermesImport{Dir: dir}
	// add maps one Hermes value; one that cannot be taken over is listed in Failed and the
	// rest of the import goes on.
	add := func(from string, h hermesKey, raw string) {
		v, err := h.conv.apply(raw)
		if err != nil {
			imp.Failed = append(imp.Failed, Skipped{From: from, Key: h.key, Reason: err.Error()})
			return
		}
		f := schema.byKey[h.key]
		if _, err := parseString(f, v); err != nil {
			imp.Failed = append(imp.Failed, Skipped{From: from, Key: h.key, Reason: err.Error()})
			return
		}
		imp.Set = append(imp.Set, Imported{Key: h.key, Value: v, From: from, Secret: f.secret(), Note: h.conv.why(raw, v)})
	}

	envPath := filepath.Join(dir, ".env")
	dotenv, err := readDotenv(envPath)
	if err != nil {
		return nil, err
	}
	if dotenv != nil {
		imp.Read = append(imp.Read, envPath)
	}
	for _, name := range slices.Sorted(maps.Keys(dotenv)) {
		v := dotenv[name]
		if h, ok := hermesEnv[name]; ok {
			add(".env: "+name, h, v)
			continue
		}
		if i := slices.IndexFunc(providerEnv, func(p struct{ name, key string }) bool { return p.name == name }); i >= 0 {
			add(".env: "+name, hermesKey{providerEnv[i].key, asIs}, v)
			continue
		}
		imp.Ignored = append(imp.Ignored, ".env: "+name)
	}

	cfgPath := filepath.Join(dir, "config.yaml")
	data, err := os.ReadFile(cfgPath)
	switch {
	case os.IsNotExist(err):
	case err != nil:
		return nil, fmt.Errorf("read %s: %w", cfgPath, err)
	default:
		imp.Read = append(imp.Read, cfgPath)
		var root map[string]any
		if err := yaml.Unmarshal(data, &root); err != nil {
			return nil, fmt.Errorf("read %s: %w", cfgPath, err)
		}
		leaves := map[string]any{}
		flatten("", root, leaves)
		for _, path := range slices.Sorted(maps.Keys(leaves)) {
			h, ok := hermesYAML[path]
			if !ok {
				imp.Ignored = append(imp.Ignored, "config.yaml: "+path)
				continue
			}
			raw, err := scalarString(leaves[path])
			if err != nil {
				imp.Failed = append(imp.Failed, Skipped{From: "config.yaml: " + path, Key: h.key, Reason: err.Error()})
				continue
			}
			add("config.yaml: "+path, h, raw)
		}
	}
	if len(imp.Read) == 0 {
		return nil, fmt.Errorf("no Hermes configuration in %s (looked for config.yaml and .env)", dir)
	}
	return imp, nil
}

// Final returns the settings to write, one per key, the last source winning.
func (h *HermesImport) Final() []Imported {
	idx := map[string]int{}
	var out []Imported
	for _, s := range h.Set {
		if i, ok := idx[s.Key]; ok {
			out[i] = s
			continue
		}
		idx[s.Key] = len(out)
		out = append(out, s)
	}
	return out
}

// flatten turns nested mappings into dotted leaves; lists and scalars are leaves, and so is a
// mapping that is itself the value of a known Hermes key (terminal.docker_env).
func flatten(prefix string, v any, out map[string]any) {
	m, ok := v.(map[string]any)
	if _, known := hermesYAML[prefix]; !ok || known {
		out[prefix] = v
		return
	}
	if len(m) == 0 && prefix != "" {
		out[prefix] = v
		return
	}
	for k, sub := range m {
		p := k
		if prefix != "" {
			p = prefix + "." + k
		}
		flatten(p, sub, out)
	}
}

// scalarString renders a YAML value in the form Set accepts (lists and maps as JSON, which
// is YAML flow syntax).
func scalarString(v any) (string, error) {
	switch t := v.(type) {
	case nil:
		return "", nil
	case string:
		return t, nil
	case bool:
		return strconv.FormatBool(t), nil
	case int:
		return strconv.Itoa(t), nil
	case float64:
		return strconv.FormatFloat(t, 'f', -1, 64), nil
	case []any, map[string]any:
		b, err := json.Marshal(t)
		return string(b), err
	}
	return fmt.Sprint(v), nil
}

// Change is one imported setting compared with a configuration: Old and New as Get prints
// them (secrets masked), Changed when the value differs (secrets compared unmasked).
type Change struct {
	Imported
	Old, New string
	Changed  bool
}

// Changes compares Final() with cur.
func (h *HermesImport) Changes(cur *Config) []Change {
	var out []Change
	for _, s := range h.Final() {
		f := schema.byKey[s.Key]
		oldV := cur.fieldValue(f)
		newV, err := parseString(f, s.Value)
		if err != nil { // ReadHermes parsed it already
			continue
		}
		out = append(out, Change{
			Imported: s,
			Old:      formatValue(oldV),
			New:      formatValue(newV),
			Changed:  formatValue(reflect.ValueOf(revealed(oldV))) != formatValue(reflect.ValueOf(revealed(newV))),
		})
	}
	return out
}

// revealed unmasks a Secret for comparison; other values pass through.
func revealed(v reflect.Value) any {
	if s, ok := v.Interface().(Secret); ok {
		return s.Reveal()
	}
	return v.Interface()
}
