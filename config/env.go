package config

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

const envPrefix = "HERMES_SANDBOX_"

// envAlias is HERMES_SANDBOX_SANDBOX, an alias of terminal.backend.
const envAlias = envPrefix + "SANDBOX"

// ignoredEnv are HERMES_SANDBOX_* variables owned by other packages.
var ignoredEnv = []string{EnvConfigPath, envPrefix + "TEST_*", envPrefix + "MCP_TOKEN", EnvAuditKey}

// EnvAuditKey holds the audit log's verification key for `audit verify`; it is not a setting.
const EnvAuditKey = envPrefix + "AUDIT_KEY"

// providerEnv are the providers' own credential variables. They are
// fallbacks: used only when secrets.yaml and HERMES_SANDBOX_* left the
// secret empty.
var providerEnv = []struct{ name, key string }{
	{"MODAL_TOKEN_ID", "modal.token_id"},
	{"MODAL_TOKEN_SECRET", "modal.token_secret"},
	{"DAYTONA_API_KEY", "daytona.api_key"},
	{"VERCEL_TOKEN", "vercel.token"},
	{"VERCEL_OIDC_TOKEN", "vercel.oidc_token"},
}

// envMap is an environment given as KEY=VALUE pairs.
type envMap struct {
	m     map[string]string
	names []string // sorted
}

func newEnvMap(environ []string) envMap {
	e := envMap{m: map[string]string{}}
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			continue
		}
		if _, dup := e.m[k]; !dup {
			e.names = append(e.names, k)
		}
		e.m[k] = v // the last one wins, as with os.Getenv
	}
	slices.Sort(e.names)
	return e
}

func (e envMap) lookup(name string) (string, bool) {
	v, ok := e.m[name]
	return v, ok
}

func (e envMap) home() string {
	if h, _ := e.lookup("HOME"); h != "" {
		return h
	}
	h, _ := os.UserHomeDir()
	return h
}

func envIgnored(name string, extra []string) bool {
	for _, pat := range slices.Concat(ignoredEnv, extra) {
		if p, ok := strings.CutSuffix(pat, "*"); ok {
			if strings.HasPrefix(name, p) {
				return true
			}
		} else if name == pat {
			return true
		}
	}
	return false
}

// applyEnv overlays the environment. Empty values are treated as unset.
func (c *Config) applyEnv(env envMap, ignore []string) error {
	var errs []*Error
	apply := func(name, key, value string) {
		f := schema.byKey[key]
		v, err := parseString(f, value)
		if err != nil {
			errs = append(errs, &Error{Op: "load config", Env: name, Key: key, Err: fmt.Errorf("%s: %w", key, err)})
			return
		}
		c.fieldValue(f).Set(v)
		c.setOrigin(key, origin{source: SourceEnv, env: name})
	}
	// Hermes's TERMINAL_* names: ~/.hermes/.env first, then the process env, both below
	// HERMES_SANDBOX_* (applied after them).
	dotenvPath := ""
	if h := hermesHome(env); h != "" {
		dotenvPath = filepath.Join(h, ".env")
	}
	dotenv, err := readDotenv(dotenvPath)
	if err != nil {
		return &Error{Op: "load config", File: dotenvPath, Err: err}
	}
	hermesNames := slices.Sorted(maps.Keys(hermesEnv))
	applyHermes := func(from, name, value string) {
		h := hermesEnv[name]
		v, err := h.conv.apply(value)
		if err != nil {
			errs = append(errs, &Error{Op: "load config", Env: from, Key: h.key, Err: fmt.Errorf("%s: %w", h.key, err)})
			return
		}
		apply(from, h.key, v)
	}
	for _, name := range hermesNames {
		if v := dotenv[name]; v != "" {
			applyHermes(name+" in "+dotenvPath, name, v)
		}
	}
	for _, name := range hermesNames {
		if v, _ := env.lookup(name); v != "" {
			applyHermes(name, name, v)
		}
	}
	if v, _ := env.lookup(envAlias); v != "" {
		apply(envAlias, aliasedTo, v)
	}
	for _, name := range env.names {
		rest, ok := strings.CutPrefix(name, envPrefix)
		if !ok || name == envAlias || envIgnored(name, ignore) {
			continue
		}
		value := env.m[name]
		f, ok := schema.byEnv[rest]
		if !ok {
			if msg := unknownEnv(rest); msg != "" {
				errs = append(errs, &Error{Op: "load config", Env: name, Err: fmt.Errorf("%s", msg)})
			}
			continue
		}
		if value != "" {
			apply(name, f.key, value)
		}
	}
	for _, p := range providerEnv {
		f := schema.byKey[p.key]
		if v, _ := env.lookup(p.name); v != "" && c.fieldValue(f).String() == "" {
			apply(p.name, p.key, v)
		} else if v := dotenv[p.name]; v != "" && c.fieldValue(f).String() == "" {
			apply(p.name+" in "+dotenvPath, p.key, v)
		}
	}
	return joinErrors(errs)
}

// unknownEnv explains an unknown HERMES_SANDBOX_<rest> variable, or returns
// "" when it does not look like a setting (it may belong to another tool).
func unknownEnv(rest string) string {
	names := make([]string, 0, len(schema.byEnv))
	for n := range schema.byEnv {
		names = append(names, n)
	}
	slices.Sort(names)
	sug := suggest(rest, names)
	inSection := false
	for _, s := range schema.sections {
		inSection = inSection || strings.HasPrefix(rest, strings.ToUpper(s)+"_")
	}
	if sug == "" && !inSection {
		return ""
	}
	msg := "unknown setting"
	if sug != "" {
		msg += fmt.Sprintf(" (did you mean %s?)", envPrefix+sug)
	}
	return msg + "; each key has a variable HERMES_SANDBOX_<SECTION>_<KEY>, see hermes-sandbox config list"
}
