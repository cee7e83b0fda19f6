package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// File names inside the config directory.
const (
	ConfigFileName  = "config.yaml"
	SecretsFileName = "secrets.yaml"
)

// EnvConfigPath names the env var that overrides the default config path.
const EnvConfigPath = "HERMES_SANDBOX_CONFIG"

// Options controls LoadWith.
type Options struct {
	// Path is an explicit config file (the CLI's --config). "" means the
	// default location: $HERMES_SANDBOX_CONFIG, else
	// $XDG_CONFIG_HOME/hermes-sandbox/config.yaml, else
	// ~/.config/hermes-sandbox/config.yaml.
	Path string
	// Environ is the environment as KEY=VALUE pairs, as from os.Environ.
	// nil means an empty environment, so tests never see the process env.
	Environ []string
	// IgnoreEnv lists HERMES_SANDBOX_* variables that belong to someone
	// else and must not be reported as unknown settings. An entry ending in
	// "*" matches by prefix.
	IgnoreEnv []string
}

// DefaultPath returns the config file path used when none is given,
// honouring HERMES_SANDBOX_CONFIG and XDG_CONFIG_HOME from the process
// environment.
func DefaultPath() string { return defaultPath(newEnvMap(os.Environ())) }

// DefaultPathFrom is DefaultPath for an explicit environment given as
// KEY=VALUE pairs (HOME, XDG_CONFIG_HOME and HERMES_SANDBOX_CONFIG are used).
func DefaultPathFrom(environ []string) string { return defaultPath(newEnvMap(environ)) }

func defaultPath(env envMap) string {
	home := env.home()
	if p, _ := env.lookup(EnvConfigPath); p != "" {
		return expandHomeWith(p, home)
	}
	if x, _ := env.lookup("XDG_CONFIG_HOME"); filepath.IsAbs(x) {
		return filepath.Join(x, appName, ConfigFileName)
	}
	return filepath.Join(home, ".config", appName, ConfigFileName)
}

// SecretsPathFor returns the secrets file that goes with config file path.
func SecretsPathFor(path string) string {
	return filepath.Join(filepath.Dir(path), SecretsFileName)
}

// Load loads the configuration from path ("" = DefaultPath) and the process
// environment, then validates it. A missing file is not an error: the
// defaults apply.
func Load(path string) (*Config, error) {
	return LoadWith(Options{Path: path, Environ: os.Environ()})
}

// LoadWith resolves defaults → config file → secrets file → env, then runs
// Validate. Errors point at the file and line, or env var, that holds the
// bad value.
func LoadWith(opts Options) (*Config, error) {
	env := newEnvMap(opts.Environ)
	path := opts.Path
	if path == "" {
		path = defaultPath(env)
	} else {
		path = expandHomeWith(path, env.home())
	}
	c, err := loadFiles(path, true)
	if err != nil {
		return nil, err
	}
	c.env, c.ignoreEnv = env, opts.IgnoreEnv
	if err := c.applyEnv(env, opts.IgnoreEnv); err != nil {
		return nil, err
	}
	if errs := c.validate(); len(errs) > 0 {
		for _, e := range errs {
			c.locate(e)
		}
		return nil, joinErrors(errs)
	}
	return c, nil
}

// Reload loads the configuration again as LoadWith loaded c: the same files and environment.
// A process that outlives a change to the files (a session owner, an MCP server) uses it to
// follow them. A Config that was not loaded from a file (NewConfig) is returned as it is.
func (c *Config) Reload() (*Config, error) {
	if c.path == "" {
		return c, nil
	}
	n, err := loadFiles(c.path, true)
	if err != nil {
		return nil, err
	}
	n.env, n.ignoreEnv = c.env, c.ignoreEnv
	if err := n.applyEnv(n.env, n.ignoreEnv); err != nil {
		return nil, err
	}
	if errs := n.validate(); len(errs) > 0 {
		for _, e := range errs {
			n.locate(e)
		}
		return nil, joinErrors(errs)
	}
	return n, nil
}

// loadFiles returns defaults overlaid with the config file and, if
// withSecrets, the secrets file. It does not validate.
func loadFiles(path string, withSecrets bool) (*Config, error) {
	c := NewConfig()
	c.path = path
	c.secretsPath = SecretsPathFor(path)
	root, found, err := readDoc(path, false)
	if err != nil {
		return nil, err
	}
	c.fileLoaded = found
	if err := c.decodeRoot(path, root, false); err != nil {
		return nil, err
	}
	if withSecrets {
		root, _, err := readDoc(c.secretsPath, true)
		if err != nil {
			return nil, err
		}
		if err := c.decodeRoot(c.secretsPath, root, true); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// readDoc reads and parses a YAML file into its document node. A missing
// file yields (nil, false, nil). Secrets files must not be accessible to
// group or others.
func readDoc(path string, secrets bool) (*yaml.Node, bool, error) {
	op := "load config"
	if secrets {
		op = "load secrets"
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", op, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", op, err)
	}
	if st.IsDir() {
		return nil, false, fmt.Errorf("%s: %s is a directory, not a YAML file", op, path)
	}
	if secrets && runtime.GOOS != "windows" && st.Mode().Perm()&0o077 != 0 {
		return nil, false, fmt.Errorf("%s: %s is accessible by group or others (mode %04o); it holds credentials, so fix it with: chmod 600 %s",
			op, path, st.Mode().Perm(), path)
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", op, err)
	}
	doc, err := parseDoc(data)
	if err != nil {
		line, msg := yamlErrLine(err), yamlErrMsg(err)
		if lines := strings.Split(string(data), "\n"); line > 0 && line <= len(lines) && strings.Contains(lines[line-1], "\t") {
			msg += " (YAML does not allow tabs for indentation; use spaces)"
		}
		return nil, false, &Error{Op: op, File: path, Line: line, Err: errors.New(msg)}
	}
	return doc, true, nil
}

// parseDoc parses exactly one YAML document. It always returns a
// DocumentNode whose single child is a mapping (possibly empty).
func parseDoc(data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, fmt.Errorf("yaml: line %d: a second YAML document (---) is not allowed", extra.Line)
	} else if !errors.Is(err, io.EOF) {
		return nil, err
	}
	if doc.Kind == 0 {
		doc = yaml.Node{Kind: yaml.DocumentNode}
	}
	if len(doc.Content) == 0 || isNull(doc.Content[0]) {
		m := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		if len(doc.Content) > 0 {
			m.HeadComment = doc.Content[0].HeadComment
			m.FootComment = doc.Content[0].FootComment
		}
		doc.Content = []*yaml.Node{m}
	}
	if root := doc.Content[0]; root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("yaml: line %d: the top level must be a mapping of sections (terminal:, docker:, ...)", root.Line)
	}
	return &doc, nil
}

// yamlErrLine and yamlErrMsg reformat the "yaml: line N: msg" errors of the
// YAML parser as file:N: msg.
func yamlErrLine(err error) int {
	rest, ok := strings.CutPrefix(err.Error(), "yaml: line ")
	if !ok {
		return 0
	}
	n, _, _ := strings.Cut(rest, ":")
	line, _ := strconv.Atoi(n)
	return line
}

func yamlErrMsg(err error) string {
	msg := err.Error()
	if rest, ok := strings.CutPrefix(msg, "yaml: line "); ok {
		if _, m, ok := strings.Cut(rest, ": "); ok {
			return "invalid YAML: " + m
		}
	}
	return "invalid YAML: " + strings.TrimPrefix(msg, "yaml: ")
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" }

func deref(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

// decodeRoot overlays the settings in doc onto c. secrets selects the
// secrets file, which holds only secret keys (and config.yaml none).
func (c *Config) decodeRoot(path string, doc *yaml.Node, secrets bool) error {
	if doc == nil {
		return nil
	}
	op, src := "load config", SourceFile
	if secrets {
		op, src = "load secrets", SourceSecrets
	}
	var errs []error
	fail := func(line int, key string, format string, args ...any) {
		errs = append(errs, &Error{Op: op, File: path, Line: line, Key: key, Err: fmt.Errorf(format, args...)})
	}
	root := doc.Content[0]
	seen := map[string]int{}
	var aliasLine int
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := deref(root.Content[i]), deref(root.Content[i+1])
		if k.Kind != yaml.ScalarNode {
			fail(k.Line, "", "a section name must be a plain string")
			continue
		}
		name := k.Value
		if prev, dup := seen[name]; dup {
			fail(k.Line, name, "duplicate section %q (first defined on line %d)", name, prev)
			continue
		}
		seen[name] = k.Line
		if name == aliasKey && !secrets {
			if !isNull(v) {
				aliasLine = k.Line
			}
			f := schema.byKey[aliasedTo]
			if err := c.decodeField(f, v, origin{source: src, file: path, line: v.Line}); err != nil {
				fail(v.Line, f.key, "%s (alias of %s): %v", aliasKey, aliasedTo, err)
			}
			continue
		}
		if schema.bySect[name] == nil {
			msg := fmt.Sprintf("unknown section %q", name)
			if h := hermesFileHint(name); h != "" {
				msg += ": " + h
			} else if s := suggest(name, schema.sections); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			} else if s := suggestKey(name); s != "" {
				msg += fmt.Sprintf(" (did you mean %s, inside the %s section?)", s, strings.Split(s, ".")[0])
			} else {
				msg += " (valid sections: " + strings.Join(schema.sections, ", ") + ")"
			}
			fail(k.Line, name, "%s", msg)
			continue
		}
		if isNull(v) {
			continue
		}
		if v.Kind != yaml.MappingNode {
			fail(v.Line, name, "section %s must be a mapping of keys, not %s", name, nodeKind(v))
			continue
		}
		errs = append(errs, c.decodeSection(op, path, name, v, src, secrets)...)
	}
	if aliasLine > 0 {
		if hasKey(root, "terminal", "backend") {
			fail(aliasLine, aliasedTo, "both %s and %s are set; keep only one", aliasKey, aliasedTo)
		}
	}
	return joinErrors(errs)
}

func hasKey(root *yaml.Node, section, key string) bool {
	sect := deref(mappingValue(root, section))
	return sect != nil && sect.Kind == yaml.MappingNode && mappingValue(sect, key) != nil
}

func (c *Config) decodeSection(op, path, section string, m *yaml.Node, src Source, secrets bool) []error {
	var errs []error
	fail := func(line int, key string, format string, args ...any) {
		errs = append(errs, &Error{Op: op, File: path, Line: line, Key: key, Err: fmt.Errorf(format, args...)})
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := deref(m.Content[i]), deref(m.Content[i+1])
		if k.Kind != yaml.ScalarNode {
			fail(k.Line, section, "a key in section %s must be a plain string", section)
			continue
		}
		if prev, dup := seen[k.Value]; dup {
			fail(k.Line, section+"."+k.Value, "duplicate key %q in section %s (first defined on line %d)", k.Value, section, prev)
			continue
		}
		seen[k.Value] = k.Line
		f, ok := schema.byKey[section+"."+k.Value]
		if !ok {
			msg := fmt.Sprintf("unknown key %q in section %s", k.Value, section)
			if h := hermesFileHint(section + "." + k.Value); h != "" {
				msg += ": " + h
			} else if s := suggest(k.Value, fieldNames(section)); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			} else {
				msg += " (valid keys: " + strings.Join(fieldNames(section), ", ") + ")"
			}
			fail(k.Line, section+"."+k.Value, "%s", msg)
			continue
		}
		switch {
		case f.secret() && !secrets:
			fail(k.Line, f.key, "%s is a secret and must not be in %s: move it to %s (hermes-sandbox config set %s VALUE stores it there)",
				f.key, filepath.Base(path), SecretsFileName, f.key)
			continue
		case !f.secret() && secrets:
			fail(k.Line, f.key, "%s is not a secret: move it to %s", f.key, ConfigFileName)
			continue
		}
		if err := c.decodeField(f, v, origin{source: src, file: path, line: v.Line}); err != nil {
			if h := hermesValueHint(f.key, v.Value); h != "" && v.Kind == yaml.ScalarNode {
				fail(v.Line, f.key, "%s: %s", f.key, h)
				continue
			}
			fail(errLine(err, v.Line), f.key, "%s: %v", f.key, err)
		}
	}
	return errs
}

// lineError carries the line of a list item or map entry that failed.
type lineError struct {
	line int
	err  error
}

func (e *lineError) Error() string { return e.err.Error() }

func errLine(err error, def int) int {
	var le *lineError
	if errors.As(err, &le) && le.line > 0 {
		return le.line
	}
	return def
}

// decodeField decodes node n into f. A null value leaves the default in
// place, except that an unquoted ~ in a string field means the literal "~"
// (ssh.cwd: ~ is the remote home, not "no value").
func (c *Config) decodeField(f *field, n *yaml.Node, o origin) error {
	v, skip, err := nodeValue(f, n)
	if err != nil || skip {
		return err
	}
	c.fieldValue(f).Set(v)
	c.setOrigin(f.key, o)
	return nil
}

func nodeValue(f *field, n *yaml.Node) (reflect.Value, bool, error) {
	if isNull(n) {
		if n.Value == "~" && f.kind == kindString {
			v, err := parseScalar(f, "~")
			return v, false, err
		}
		return reflect.Value{}, true, nil
	}
	switch f.kind {
	case kindList:
		if n.Kind != yaml.SequenceNode {
			return reflect.Value{}, false, fmt.Errorf("want a list, e.g. [a, b], not %s", nodeKind(n))
		}
		items := []string{}
		for _, it := range n.Content {
			it = deref(it)
			if it.Kind != yaml.ScalarNode || isNull(it) {
				return reflect.Value{}, false, &lineError{it.Line, fmt.Errorf("list items must be strings, not %s", nodeKind(it))}
			}
			items = append(items, it.Value)
		}
		return reflect.ValueOf(items).Convert(f.typ), false, nil
	case kindBroker:
		if n.Kind != yaml.SequenceNode {
			return reflect.Value{}, false, fmt.Errorf("want a list of mappings, e.g. [{name: TOKEN, hosts: [api.example.com]}], not %s", nodeKind(n))
		}
		l := BrokerList{}
		for _, it := range n.Content {
			var e BrokerSecret
			if err := e.UnmarshalYAML(it); err != nil {
				if _, ok := err.(*lineError); !ok {
					err = &lineError{deref(it).Line, err}
				}
				return reflect.Value{}, false, err
			}
			l = append(l, e)
		}
		return reflect.ValueOf(l), false, nil
	case kindMap, kindSecretMap:
		if n.Kind != yaml.MappingNode {
			return reflect.Value{}, false, fmt.Errorf("want a mapping, e.g. {KEY: value}, not %s", nodeKind(n))
		}
		m := map[string]string{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := deref(n.Content[i]), deref(n.Content[i+1])
			if k.Kind != yaml.ScalarNode || v.Kind != yaml.ScalarNode {
				return reflect.Value{}, false, &lineError{k.Line, errors.New("map keys and values must be strings")}
			}
			if _, dup := m[k.Value]; dup {
				return reflect.Value{}, false, &lineError{k.Line, fmt.Errorf("duplicate key %q", k.Value)}
			}
			val := v.Value
			if isNull(v) {
				val = ""
			}
			m[k.Value] = val
		}
		return reflect.ValueOf(m).Convert(f.typ), false, nil
	}
	if n.Kind != yaml.ScalarNode {
		return reflect.Value{}, false, fmt.Errorf("want %s, not %s", f.kind.describe(), nodeKind(n))
	}
	if f.kind == kindInt && n.ShortTag() == "!!float" {
		return reflect.Value{}, false, fmt.Errorf("want a whole number, not %s", n.Value)
	}
	v, err := parseScalar(f, n.Value)
	return v, false, err
}

func nodeKind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	case yaml.ScalarNode:
		if isNull(n) {
			return "null"
		}
		return fmt.Sprintf("%q", n.Value)
	}
	return "an unsupported YAML node"
}

// locate fills in where a validation error's key was set.
func (c *Config) locate(e *Error) {
	o, ok := c.origins[e.Key]
	if !ok {
		return
	}
	e.File, e.Line, e.Env = o.file, o.line, o.env
}

func joinErrors[E error](errs []E) error {
	if len(errs) == 0 {
		return nil
	}
	if len(errs) == 1 {
		return errs[0]
	}
	all := make([]error, len(errs))
	for i, e := range errs {
		all[i] = e
	}
	return errors.Join(all...)
}

// mappingValue returns the value node for key in mapping m, or nil.
func mappingValue(m *yaml.Node, key string) *yaml.Node {
	if i := mappingIndex(m, key); i >= 0 {
		return m.Content[i+1]
	}
	return nil
}

func mappingIndex(m *yaml.Node, key string) int {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if k := deref(m.Content[i]); k.Kind == yaml.ScalarNode && k.Value == key {
			return i
		}
	}
	return -1
}
