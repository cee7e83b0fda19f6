package config

import (
	"encoding"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// kind is how a field is parsed, formatted and written.
type kind int

const (
	kindString kind = iota
	kindText        // enum: a string type with UnmarshalText
	kindSecret
	kindBool
	kindInt
	kindFloat
	kindDuration
	kindSize
	kindList
	kindMap
	kindBroker    // secrets.broker: a list of mappings
	kindSecretMap // secrets.values: a mapping kept in secrets.yaml
)

type field struct {
	key     string // "docker.memory_limit"
	section string // "docker"
	name    string // "memory_limit"
	index   []int
	typ     reflect.Type
	kind    kind
}

func (f *field) secret() bool { return f.kind == kindSecret || f.kind == kindSecretMap }

// envName is the HERMES_SANDBOX_ variable for f.
func (f *field) envName() string {
	return envPrefix + strings.ToUpper(f.section+"_"+f.name)
}

type schemaT struct {
	fields   []*field // sorted by key
	byKey    map[string]*field
	byEnv    map[string]*field // "DOCKER_MEMORY_LIMIT"
	sections []string          // declaration order
	bySect   map[string][]*field
}

var schema = buildSchema()

// aliasKey is an alias accepted by Set, Get, the env (HERMES_SANDBOX_SANDBOX)
// and as a top-level key in config.yaml.
const (
	aliasKey  = "sandbox"
	aliasedTo = "terminal.backend"
)

var (
	durationType = reflect.TypeFor[time.Duration]()
	sizeType     = reflect.TypeFor[Size]()
	secretType   = reflect.TypeFor[Secret]()
	brokerType   = reflect.TypeFor[BrokerList]()
	secretMapTyp = reflect.TypeFor[SecretValues]()
	textType     = reflect.TypeFor[encoding.TextUnmarshaler]()
)

func buildSchema() *schemaT {
	s := &schemaT{byKey: map[string]*field{}, byEnv: map[string]*field{}, bySect: map[string][]*field{}}
	ct := reflect.TypeFor[Config]()
	for i := range ct.NumField() {
		sf := ct.Field(i)
		sect := yamlName(sf)
		if sect == "" {
			continue
		}
		s.sections = append(s.sections, sect)
		for j := range sf.Type.NumField() {
			ff := sf.Type.Field(j)
			name := yamlName(ff)
			if name == "" {
				continue
			}
			f := &field{
				key:     sect + "." + name,
				section: sect,
				name:    name,
				index:   []int{i, j},
				typ:     ff.Type,
				kind:    kindOf(ff.Type),
			}
			s.fields = append(s.fields, f)
			s.byKey[f.key] = f
			s.byEnv[strings.ToUpper(sect+"_"+name)] = f
			s.bySect[sect] = append(s.bySect[sect], f)
		}
	}
	slices.SortFunc(s.fields, func(a, b *field) int { return strings.Compare(a.key, b.key) })
	return s
}

func yamlName(sf reflect.StructField) string {
	if !sf.IsExported() {
		return ""
	}
	name, _, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
	return name
}

func kindOf(t reflect.Type) kind {
	switch {
	case t == durationType:
		return kindDuration
	case t == sizeType:
		return kindSize
	case t == secretType:
		return kindSecret
	case t == brokerType:
		return kindBroker
	case t == secretMapTyp:
		return kindSecretMap
	case t.Kind() == reflect.String && reflect.PointerTo(t).Implements(textType):
		return kindText
	}
	switch t.Kind() {
	case reflect.String:
		return kindString
	case reflect.Bool:
		return kindBool
	case reflect.Int, reflect.Int64:
		return kindInt
	case reflect.Float64:
		return kindFloat
	case reflect.Slice:
		return kindList
	case reflect.Map:
		return kindMap
	}
	panic("config: unsupported field type " + t.String())
}

func (k kind) describe() string {
	return [...]string{"a string", "a string", "a string", "a bool (true or false)", "an integer",
		"a number", "a duration (e.g. 30s)", "a size (e.g. 512m)", "a list (e.g. [a, b])",
		"a mapping (e.g. {KEY: value})", "a list of mappings (e.g. [{name: TOKEN, hosts: [api.example.com]}])",
		"a mapping (e.g. {KEY: value})"}[k]
}

// lookupField resolves a dotted key or the sandbox alias.
func lookupField(key string) (*field, bool) {
	if key == aliasKey {
		key = aliasedTo
	} else if h, ok := hermesSpelling(key); ok {
		key = h.key
	}
	f, ok := schema.byKey[key]
	return f, ok
}

// resolveKey is lookupField with an error that suggests the closest key.
func resolveKey(key string) (*field, error) {
	if f, ok := lookupField(key); ok {
		return f, nil
	}
	msg := fmt.Sprintf("unknown key %q", key)
	if sect, name, ok := strings.Cut(key, "."); ok && schema.bySect[sect] != nil {
		if s := suggest(name, fieldNames(sect)); s != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", sect+"."+s)
		}
	} else if s := suggestKey(key); s != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", s)
	}
	return nil, fmt.Errorf("%s; see hermes-sandbox config list for valid keys", msg)
}

// suggestKey finds the key closest to key, matching either the whole
// dotted key or just its last part (so "backend" suggests terminal.backend).
func suggestKey(key string) string {
	if s := suggest(key, Keys()); s != "" {
		return s
	}
	name := key[strings.LastIndex(key, ".")+1:]
	best := ""
	for _, f := range schema.fields {
		if f.name == name {
			if best != "" {
				return "" // ambiguous
			}
			best = f.key
		}
	}
	return best
}

func fieldNames(section string) []string {
	var names []string
	for _, f := range schema.bySect[section] {
		names = append(names, f.name)
	}
	return names
}

// Keys returns every valid dotted key, sorted, secrets included. The alias
// "sandbox" (for terminal.backend) is accepted too but not listed.
func Keys() []string {
	keys := make([]string, len(schema.fields))
	for i, f := range schema.fields {
		keys[i] = f.key
	}
	return keys
}

// Sections returns the section names in schema order.
func Sections() []string { return slices.Clone(schema.sections) }

// IsSecretKey reports whether key is stored in secrets.yaml.
func IsSecretKey(key string) bool {
	f, ok := lookupField(key)
	return ok && f.secret()
}

// EnvName returns the environment variable that overrides key, e.g.
// HERMES_SANDBOX_DOCKER_MEMORY_LIMIT, or "" for an unknown key.
func EnvName(key string) string {
	if f, ok := lookupField(key); ok {
		return f.envName()
	}
	return ""
}

// KV is one setting as listed by List.
type KV struct {
	Key    string
	Value  string // secrets are masked as ***
	Source Source
	Secret bool
}

// List returns every setting, sorted by key, with its effective value as
// Get would print it.
func List(cfg *Config) []KV {
	out := make([]KV, len(schema.fields))
	for i, f := range schema.fields {
		out[i] = KV{Key: f.key, Value: formatValue(cfg.fieldValue(f)), Source: cfg.Source(f.key), Secret: f.secret()}
	}
	return out
}

// Get returns key's effective value in the form Set accepts; secrets are
// masked as *** (or "" when unset). Lists print as a,b,c and maps as K=V,K2=V2
// (or YAML flow syntax when an item contains a comma).
func Get(cfg *Config, key string) (string, error) {
	f, err := resolveKey(key)
	if err != nil {
		return "", &Error{Op: "get config", Key: key, Err: err}
	}
	return formatValue(cfg.fieldValue(f)), nil
}

// SetValue parses value for key and assigns it in memory, recording the
// source as SourceFlag. It is for command-line overrides; call Validate
// afterwards. It does not touch any file (see Set for that).
func (c *Config) SetValue(key, value string) error {
	key, value, err := resolveAlias(key, value)
	if err != nil {
		return &Error{Op: "set value", Key: key, Err: err}
	}
	f, err := resolveKey(key)
	if err != nil {
		return &Error{Op: "set value", Key: key, Err: err}
	}
	v, err := parseString(f, value)
	if err != nil {
		return &Error{Op: "set value", Key: f.key, Err: fmt.Errorf("%s: %w", f.key, err)}
	}
	c.fieldValue(f).Set(v)
	c.setOrigin(f.key, origin{source: SourceFlag})
	return nil
}

func (c *Config) fieldValue(f *field) reflect.Value {
	return reflect.ValueOf(c).Elem().FieldByIndex(f.index)
}

// parseString parses a value given as a string (env, Set, SetValue).
func parseString(f *field, s string) (reflect.Value, error) {
	switch f.kind {
	case kindList:
		items, err := parseList(s)
		if err != nil {
			return reflect.Value{}, err
		}
		return reflect.ValueOf(items).Convert(f.typ), nil
	case kindMap, kindSecretMap:
		m, err := parseMap(s)
		if err != nil {
			return reflect.Value{}, err
		}
		return reflect.ValueOf(m).Convert(f.typ), nil
	case kindBroker:
		l := BrokerList{}
		if t := strings.TrimSpace(s); t != "" {
			if err := yaml.Unmarshal([]byte(t), &l); err != nil {
				return reflect.Value{}, fmt.Errorf("invalid secrets.broker %q: want a YAML list like [{name: TOKEN, hosts: [api.example.com]}]: %v", s, err)
			}
		}
		return reflect.ValueOf(l), nil
	}
	return parseScalar(f, s)
}

func parseScalar(f *field, s string) (reflect.Value, error) {
	v := reflect.New(f.typ).Elem()
	switch f.kind {
	case kindString, kindSecret:
		v.SetString(s)
	case kindText:
		if err := v.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(strings.TrimSpace(s))); err != nil {
			return v, err
		}
	case kindBool:
		b, err := parseBool(s)
		if err != nil {
			return v, err
		}
		v.SetBool(b)
	case kindInt:
		n, err := parseInt(s)
		if err != nil {
			return v, err
		}
		if v.OverflowInt(n) {
			return v, fmt.Errorf("integer %s out of range", s)
		}
		v.SetInt(n)
	case kindFloat:
		x, err := parseFloat(s)
		if err != nil {
			return v, err
		}
		v.SetFloat(x)
	case kindDuration:
		d, err := ParseDuration(s)
		if err != nil {
			return v, err
		}
		v.SetInt(int64(d))
	case kindSize:
		n, err := ParseSize(s)
		if err != nil {
			return v, err
		}
		v.SetInt(int64(n))
	default:
		return v, fmt.Errorf("want %s", f.kind.describe())
	}
	return v, nil
}

// parseList accepts "a,b,c" or a YAML flow list "[a, b]"; "" is empty.
func parseList(s string) ([]string, error) {
	t := strings.TrimSpace(s)
	if strings.HasPrefix(t, "[") {
		var items []string
		if err := yaml.Unmarshal([]byte(t), &items); err != nil {
			return nil, fmt.Errorf("invalid list %q: want a,b,c or [a, b, c]", s)
		}
		if items == nil {
			items = []string{}
		}
		return items, nil
	}
	items := []string{}
	for p := range strings.SplitSeq(t, ",") {
		if p = strings.TrimSpace(p); p != "" {
			items = append(items, p)
		}
	}
	return items, nil
}

// parseMap accepts "K=V,K2=V2" or a YAML flow map "{K: V}"; "" is empty.
func parseMap(s string) (map[string]string, error) {
	t := strings.TrimSpace(s)
	m := map[string]string{}
	if strings.HasPrefix(t, "{") {
		if err := yaml.Unmarshal([]byte(t), &m); err != nil {
			return nil, fmt.Errorf("invalid map %q: want K=V,K2=V2 or {K: V, K2: V2}", s)
		}
		if m == nil {
			m = map[string]string{}
		}
		return m, nil
	}
	for p := range strings.SplitSeq(t, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		k, v, ok := strings.Cut(p, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("invalid map entry %q: want KEY=VALUE", p)
		}
		m[strings.TrimSpace(k)] = v
	}
	return m, nil
}

// formatValue prints a field value the way Get shows it and Set reads it.
func formatValue(v reflect.Value) string {
	switch x := v.Interface().(type) {
	case Secret:
		return x.String()
	case SecretValues:
		return x.String()
	case BrokerList:
		if len(x) == 0 {
			return ""
		}
		return flowString(brokerNode(x))
	case time.Duration:
		return FormatDuration(x)
	case Size:
		return x.String()
	case float64:
		return formatFloat(x)
	case bool:
		return strconv.FormatBool(x)
	case []string:
		if slices.ContainsFunc(x, needsFlow) {
			return flowString(seqNode(x))
		}
		return strings.Join(x, ",")
	case map[string]string:
		keys := slices.Sorted(maps.Keys(x))
		parts := make([]string, len(keys))
		flow := false
		for i, k := range keys {
			parts[i] = k + "=" + x[k]
			flow = flow || needsFlow(k) || needsFlow(x[k]) || strings.Contains(k, "=")
		}
		if flow {
			return flowString(mapNode(x))
		}
		return strings.Join(parts, ",")
	}
	switch v.Kind() {
	case reflect.String:
		return v.String()
	case reflect.Int, reflect.Int64:
		return strconv.FormatInt(v.Int(), 10)
	}
	return fmt.Sprint(v.Interface())
}

func needsFlow(s string) bool {
	return strings.ContainsAny(s, ",[]{}") || s != strings.TrimSpace(s) || s == ""
}

func flowString(n *yaml.Node) string {
	out, err := yaml.Marshal(n)
	if err != nil {
		return fmt.Sprint(n.Value)
	}
	return strings.TrimSpace(string(out))
}

// valueNode builds the YAML node written to a file for v. Secrets are
// written revealed: the node goes into secrets.yaml.
func valueNode(f *field, v reflect.Value) *yaml.Node {
	switch f.kind {
	case kindList:
		return seqNode(v.Convert(reflect.TypeFor[[]string]()).Interface().([]string))
	case kindMap, kindSecretMap:
		return mapNode(v.Convert(reflect.TypeFor[map[string]string]()).Interface().(map[string]string))
	case kindBroker:
		n := brokerNode(v.Interface().(BrokerList))
		n.Style = 0 // one entry per line in the file
		return n
	case kindSecret:
		return strNode(v.String())
	case kindBool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: formatValue(v)}
	case kindInt:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: formatValue(v)}
	case kindFloat:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!float", Value: formatValue(v)}
	case kindSize:
		if s := formatValue(v); strings.Trim(s, "0123456789") == "" {
			return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: s}
		}
	}
	return strNode(formatValue(v))
}

func strNode(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s} }

func seqNode(items []string) *yaml.Node {
	n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Style: yaml.FlowStyle}
	for _, it := range items {
		n.Content = append(n.Content, strNode(it))
	}
	return n
}

func mapNode(m map[string]string) *yaml.Node {
	n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Style: yaml.FlowStyle}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		n.Content = append(n.Content, strNode(k), strNode(m[k]))
	}
	return n
}

// brokerNode is secrets.broker as a YAML flow list of flow mappings.
func brokerNode(l BrokerList) *yaml.Node {
	n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Style: yaml.FlowStyle}
	for _, e := range l {
		m := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Style: yaml.FlowStyle}
		add := func(k string, v *yaml.Node) { m.Content = append(m.Content, strNode(k), v) }
		add("name", strNode(e.Name))
		add("hosts", seqNode(e.Hosts))
		for _, kv := range [][2]string{{"value_from", e.ValueFrom}, {"header", e.Header}, {"format", e.Format}, {"basic_auth_user", e.BasicAuthUser}} {
			if kv[1] != "" {
				add(kv[0], strNode(kv[1]))
			}
		}
		n.Content = append(n.Content, m)
	}
	return n
}
