package config

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/hermes-sandbox/hermes-sandbox/internal/egress/rule"
)

// SecretsConfig is the secrets section: credentials the egress proxy adds to requests for
// their hosts, so that the sandbox only ever holds a placeholder (secrets.broker), and the
// values of those stored with `hermes-sandbox secrets add` (secrets.values, kept in
// secrets.yaml only).
type SecretsConfig struct {
	Broker BrokerList   `yaml:"broker"`
	Values SecretValues `yaml:"values"` // secrets.yaml
}

// EgressConfig is the egress section: settings of the filtering proxy shared by every
// backend that runs it.
type EgressConfig struct {
	// Hosts maps a host name to the address the proxy connects to for it, as curl --resolve
	// (a split-horizon mirror, a test server). The allowlist still decides on the name.
	Hosts map[string]string `yaml:"hosts"`
	// AllowPrivate lists the networks (CIDR) the proxy may connect to although they are
	// loopback, link-local or private; any other such address is refused.
	AllowPrivate []string `yaml:"allow_private"`
}

// Where a brokered secret's value comes from.
const (
	ValueFromSecrets = "secrets.yaml"
	ValueFromEnv     = "env"
)

// Defaults of a brokered secret.
const (
	DefaultBrokerHeader = "Authorization"
	DefaultBrokerFormat = "Bearer %s"
)

// BrokerSecret is one secrets.broker entry.
type BrokerSecret struct {
	// Name is the variable the sandbox sees (holding a placeholder) and, for value_from env,
	// the variable of this process that holds the value.
	Name string `yaml:"name"`
	// Hosts are the host names (exact, or *.domain) whose requests get the real value.
	Hosts []string `yaml:"hosts"`
	// ValueFrom is secrets.yaml (secrets.values.NAME, the default) or env.
	ValueFrom string `yaml:"value_from,omitempty"`
	// Header is the request header the proxy fills in when the client sent the placeholder
	// nowhere (default Authorization). A placeholder found in any header is replaced.
	Header string `yaml:"header,omitempty"`
	// Format makes the header's value from the secret (default "Bearer %s").
	Format string `yaml:"format,omitempty"`
	// BasicAuthUser, when set, also accepts the placeholder as the password of HTTP basic
	// auth (git over HTTPS) and sends this user with the real value.
	BasicAuthUser string `yaml:"basic_auth_user,omitempty"`
}

// BrokerList is secrets.broker.
type BrokerList []BrokerSecret

// brokerKeys are the keys a secrets.broker entry may have.
var brokerKeys = []string{"name", "hosts", "value_from", "header", "format", "basic_auth_user"}

// UnmarshalYAML decodes one entry strictly: an unknown key is an error naming the closest.
func (s *BrokerSecret) UnmarshalYAML(n *yaml.Node) error {
	n = deref(n)
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("a secrets.broker entry must be a mapping like {name: GITHUB_TOKEN, hosts: [github.com]}, not %s", nodeKind(n))
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := deref(n.Content[i])
		if !slices.Contains(brokerKeys, k.Value) {
			msg := fmt.Sprintf("unknown key %q in a secrets.broker entry", k.Value)
			if s := suggest(k.Value, brokerKeys); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			} else {
				msg += " (valid: " + strings.Join(brokerKeys, ", ") + ")"
			}
			return &lineError{k.Line, errors.New(msg)}
		}
	}
	type plain BrokerSecret
	var p plain
	if err := n.Decode(&p); err != nil {
		return err
	}
	*s = BrokerSecret(p)
	return nil
}

// Resolved returns s with its defaults filled in.
func (s BrokerSecret) Resolved() BrokerSecret {
	if s.ValueFrom == "" {
		s.ValueFrom = ValueFromSecrets
	}
	if s.Header == "" {
		s.Header = DefaultBrokerHeader
	}
	if s.Format == "" {
		s.Format = DefaultBrokerFormat
	}
	return s
}

// Find returns the entry named name.
func (l BrokerList) Find(name string) (BrokerSecret, bool) {
	for _, s := range l {
		if s.Name == name {
			return s, true
		}
	}
	return BrokerSecret{}, false
}

// SecretValues maps a brokered secret's name to its value; it lives in secrets.yaml and
// prints its names only.
type SecretValues map[string]string

// String lists the names with masked values.
func (v SecretValues) String() string {
	keys := slices.Sorted(maps.Keys(v))
	for i, k := range keys {
		keys[i] = k + "=***"
	}
	return strings.Join(keys, ",")
}

// Format implements fmt.Formatter so that no verb prints a value.
func (v SecretValues) Format(f fmt.State, _ rune) { _, _ = fmt.Fprint(f, v.String()) }

// GoString keeps %#v (Fingerprint) from printing values.
func (v SecretValues) GoString() string { return v.String() }

// BrokerValue returns the value of brokered secret s, from secrets.values or from environ
// (KEY=VALUE pairs), with an error that says how to provide it.
func (c *Config) BrokerValue(s BrokerSecret, environ []string) (string, error) {
	s = s.Resolved()
	switch s.ValueFrom {
	case ValueFromEnv:
		for i := len(environ) - 1; i >= 0; i-- {
			if k, v, ok := strings.Cut(environ[i], "="); ok && k == s.Name {
				if v == "" {
					break
				}
				return v, nil
			}
		}
		return "", fmt.Errorf("secrets.broker %s: value_from is env but %s is not set in this process's environment", s.Name, s.Name)
	default:
		if v := c.Secrets.Values[s.Name]; v != "" {
			return v, nil
		}
		return "", fmt.Errorf("secrets.broker %s: no value in %s: store one with `printf %%s \"$%s\" | hermes-sandbox secrets add %s --host HOST`",
			s.Name, SecretsFileName, s.Name, s.Name)
	}
}

// validateSecrets checks secrets.broker entries and the egress section.
func (c *Config) validateSecrets(v *validator) {
	seen := map[string]bool{}
	for i, s := range c.Secrets.Broker {
		where := fmt.Sprintf("entry %d", i+1)
		if s.Name != "" {
			where = s.Name
		}
		switch {
		case !isIdentifier(s.Name):
			v.failf("secrets.broker", "%s: name %q is not a valid environment variable name (letters, digits and _, not starting with a digit)", where, s.Name)
		case seen[s.Name]:
			v.failf("secrets.broker", "%s is listed twice", s.Name)
		}
		seen[s.Name] = true
		if len(s.Hosts) == 0 {
			v.failf("secrets.broker", "%s: hosts is empty: name the hosts that get the real value (e.g. hosts: [api.github.com])", where)
		}
		for _, h := range s.Hosts {
			r, err := rule.Parse(h)
			if err != nil {
				v.failf("secrets.broker", "%s: host %q: %v", where, h, err)
			} else if r.Port != 0 {
				v.failf("secrets.broker", "%s: host %q: name a host without a port", where, h)
			}
		}
		if s.ValueFrom != "" && s.ValueFrom != ValueFromEnv && s.ValueFrom != ValueFromSecrets {
			v.failf("secrets.broker", "%s: value_from %q: want %s or %s", where, s.ValueFrom, ValueFromSecrets, ValueFromEnv)
		}
		if s.Header != "" && !validHeaderName(s.Header) {
			v.failf("secrets.broker", "%s: header %q is not a valid HTTP header name", where, s.Header)
		}
		if s.Format != "" && (strings.Count(s.Format, "%s") != 1 || strings.Count(s.Format, "%") != 1) {
			v.failf("secrets.broker", "%s: format %q must contain %%s exactly once and no other %%", where, s.Format)
		}
		if strings.ContainsAny(s.Format+s.BasicAuthUser, "\r\n") || strings.Contains(s.BasicAuthUser, ":") {
			v.failf("secrets.broker", "%s: format and basic_auth_user must not contain line breaks (nor the user a colon)", where)
		}
	}
	for name := range c.Secrets.Values {
		if !isIdentifier(name) {
			v.failf("secrets.values", "%q is not a valid environment variable name", name)
		}
	}
	for name, addr := range c.Egress.Hosts {
		if h := strings.ToLower(strings.TrimSuffix(name, ".")); !rule.ValidName(h) {
			v.failf("egress.hosts", "%q is not a host name", name)
		}
		if _, err := netip.ParseAddr(addr); err != nil {
			v.failf("egress.hosts", "%s: %q is not an IP address (egress.hosts maps a name to an address, as curl --resolve)", name, addr)
		}
	}
	for _, p := range c.Egress.AllowPrivate {
		if _, err := netip.ParsePrefix(p); err != nil {
			v.failf("egress.allow_private", "%q is not a CIDR network (e.g. 127.0.0.1/32 or 10.0.0.0/8)", p)
		}
	}
}

// validHeaderName reports whether s is an HTTP field name (RFC 9110 token).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// AddBrokerSecret stores entry in secrets.broker of the config file at path ("" =
// DefaultPath), replacing an entry of the same name, and, when value is not empty, its value
// in secrets.values of secrets.yaml beside it (mode 0600). Both files are validated first and
// the secrets file is written first.
func AddBrokerSecret(path string, entry BrokerSecret, value string) error {
	if path == "" {
		path = DefaultPath()
	}
	c, err := loadFiles(path, true)
	if err != nil {
		return err
	}
	list := slices.Clone(c.Secrets.Broker)
	if i := slices.IndexFunc(list, func(s BrokerSecret) bool { return s.Name == entry.Name }); i >= 0 {
		list[i] = entry
	} else {
		list = append(list, entry)
	}
	kvs := []KV{{Key: "secrets.broker", Value: flowString(brokerNode(list))}}
	if value != "" {
		vals := maps.Clone(c.Secrets.Values)
		if vals == nil {
			vals = SecretValues{}
		}
		vals[entry.Name] = value
		kvs = append(kvs, KV{Key: "secrets.values", Value: flowString(mapNode(vals))})
	}
	return SetMany(path, kvs)
}

// RemoveBrokerSecret removes name from secrets.broker and its value from secrets.values. It
// reports whether either held it.
func RemoveBrokerSecret(path, name string) (bool, error) {
	if path == "" {
		path = DefaultPath()
	}
	c, err := loadFiles(path, true)
	if err != nil {
		return false, err
	}
	list := slices.DeleteFunc(slices.Clone(c.Secrets.Broker), func(s BrokerSecret) bool { return s.Name == name })
	_, hadValue := c.Secrets.Values[name]
	if len(list) == len(c.Secrets.Broker) && !hadValue {
		return false, nil
	}
	var kvs []KV
	if len(list) != len(c.Secrets.Broker) {
		kvs = append(kvs, KV{Key: "secrets.broker", Value: flowString(brokerNode(list))})
	}
	if hadValue {
		vals := maps.Clone(c.Secrets.Values)
		delete(vals, name)
		kvs = append(kvs, KV{Key: "secrets.values", Value: flowString(mapNode(vals))})
	}
	return true, SetMany(path, kvs)
}
