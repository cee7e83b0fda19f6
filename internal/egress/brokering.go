package egress

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// Brokering is what a backend whose proxy brokers secrets takes from the configuration:
// secrets.broker with the values resolved, egress.hosts and egress.allow_private.
type Brokering struct {
	Secrets      []Secret
	Hosts        map[string]netip.Addr
	AllowPrivate []netip.Prefix
	// UpstreamRoots verifies intercepted hosts' servers (nil: this host's trust); tests set it.
	UpstreamRoots *x509.CertPool
	// Live, if set, is the configuration the proxies follow while sessions run (NewLive):
	// the allowlist and Secrets as they are now, not as they were when the backend was built.
	Live *Live
}

// BrokeringOf resolves the configuration's brokered secrets (values from secrets.yaml or
// environ) and egress settings. A secret without a value is an error that says how to give it.
func BrokeringOf(c *config.Config, environ []string) (Brokering, error) {
	var g Brokering
	for _, s := range c.Secrets.Broker {
		s = s.Resolved()
		v, err := c.BrokerValue(s, environ)
		if err != nil {
			return g, fmt.Errorf("%w: %w", err, sandbox.ErrInvalidConfig)
		}
		g.Secrets = append(g.Secrets, Secret{Name: s.Name, Hosts: s.Hosts, Value: v, Header: s.Header, Format: s.Format,
			BasicAuthUser: s.BasicAuthUser})
	}
	for name, a := range c.Egress.Hosts {
		addr, err := netip.ParseAddr(a)
		if err != nil {
			return g, fmt.Errorf("egress.hosts %s: %w: %w", name, err, sandbox.ErrInvalidConfig)
		}
		if g.Hosts == nil {
			g.Hosts = map[string]netip.Addr{}
		}
		if h, ok := NormalizeHost(name); ok {
			g.Hosts[h] = addr
		}
	}
	for _, p := range c.Egress.AllowPrivate {
		pr, err := netip.ParsePrefix(p)
		if err != nil {
			return g, fmt.Errorf("egress.allow_private %q: %w: %w", p, err, sandbox.ErrInvalidConfig)
		}
		g.AllowPrivate = append(g.AllowPrivate, pr.Masked())
	}
	return g, nil
}

// RefuseBrokering is the error of a backend where no egress proxy runs (or where it does not
// broker yet) when secrets.broker has entries: a brokered secret is never passed in as a
// plain variable instead. nil when there are none.
func RefuseBrokering(c *config.Config, backend, why string) error {
	if len(c.Secrets.Broker) == 0 {
		return nil
	}
	return fmt.Errorf("%s: secrets.broker has entries (%s) but %s, so they cannot be brokered; "+
		"they are not passed in as plain variables either: use docker with docker.network allowlist, local with "+
		"local.network allowlist or kubernetes with kubernetes.network allowlist, or remove them (hermes-sandbox secrets rm NAME): %w",
		backend, c.Secrets.Broker[0].Name, why, sandbox.ErrInvalidConfig)
}

// Apply sets the proxy options that come from the egress section.
func (g Brokering) Apply(o *Options) {
	o.Hosts, o.AllowPrivate, o.UpstreamRoots = g.Hosts, g.AllowPrivate, g.UpstreamRoots
}

// Broker returns session's broker, its state kept in dir; nil when no secret is brokered.
func (g Brokering) Broker(dir, session string) (*Broker, error) {
	if len(g.Secrets) == 0 {
		return nil, nil
	}
	return NewBroker(dir, session, g.Secrets)
}

// SessionBroker is session's broker for the secrets in force now (Live's, else Secrets).
func (g Brokering) SessionBroker(dir, session string) (*Broker, error) {
	return Brokering{Secrets: g.Live.SecretsOr(g.Secrets)}.Broker(dir, session)
}

// ApplySession sets the options of o.Session's proxy that come from the egress section and
// the secrets: its brokers (state in dir) and the live configuration they follow. A broker
// that cannot be made now is an error.
func (g Brokering) ApplySession(o *Options, dir string) error {
	g.Apply(o)
	if _, err := g.SessionBroker(dir, o.Session); err != nil {
		return err
	}
	o.Live = g.Live
	o.Brokers = g.Live.Brokers(dir, o.Session, g.Secrets, o.Logger)
	return nil
}

// CAEnv are the variables that point the usual TLS clients at a CA bundle.
var CAEnv = []string{"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "GIT_SSL_CAINFO", "CURL_CA_BUNDLE"}

// systemBundles are the usual places of a system's CA bundle.
var systemBundles = []string{"/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt",
	"/etc/ssl/ca-bundle.pem", "/etc/ssl/cert.pem"}

// WriteBundle writes a CA bundle for the sandbox into dir, readable by anyone: this host's
// system bundle (or SSL_CERT_FILE in environ) followed by the session's CA certificate (never
// its key). The file's name is derived from the CA, so every process serving the session
// writes the same file, and a sandbox that cannot list dir cannot find another session's.
// It returns the file's name.
func (b *Broker) WriteBundle(dir string, environ []string) (string, error) {
	name := bundleName(b.caPEM)
	data := b.Bundle(environ)
	tmp := filepath.Join(dir, name+".tmp"+sandbox.RandomHex(4))
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return "", fmt.Errorf("egress broker: write the session's CA bundle: %w", err)
	}
	if err := os.Chmod(tmp, 0o644); err != nil { // whatever the umask
		os.Remove(tmp)
		return "", err
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("egress broker: write the session's CA bundle: %w", err)
	}
	return name, nil
}

// Bundle is the CA bundle for the sandbox: this host's system bundle (or SSL_CERT_FILE in
// environ) followed by the session's CA certificate (never its key).
func (b *Broker) Bundle(environ []string) []byte {
	var data []byte
	cands := systemBundles
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, "SSL_CERT_FILE="); ok && v != "" {
			cands = append([]string{v}, cands...)
		}
	}
	for _, p := range cands {
		if d, err := os.ReadFile(p); err == nil {
			data = append(d, '\n')
			break
		}
	}
	return append(data, b.caPEM...)
}

// BundleName is the file name of the session's CA bundle (WriteBundle's), derived from its CA.
func (b *Broker) BundleName() string { return bundleName(b.caPEM) }

// SandboxEnv is the sandbox's view of the broker: each secret's placeholder, and the CA
// variables pointing at bundle (the path of WriteBundle's file as the sandbox sees it).
func (b *Broker) SandboxEnv(bundle string) map[string]string {
	env := b.Env()
	for _, k := range CAEnv {
		env[k] = bundle
	}
	return env
}

// RemoveSession forgets session's broker: its placeholders and CA in dir, and its CA bundle in
// bundleDir (WriteBundle's), so that a later session of the same name gets new ones.
func RemoveSession(dir, bundleDir, session string) {
	path := BrokerStatePath(dir, session)
	if data, err := os.ReadFile(path); err == nil && bundleDir != "" {
		var st brokerState
		if json.Unmarshal(data, &st) == nil && st.CACert != "" {
			os.Remove(filepath.Join(bundleDir, bundleName([]byte(st.CACert))))
		}
	}
	os.Remove(path)
	os.Remove(path + ".lock")
}

// bundleName is the file name of a CA bundle for the CA certificate caPEM.
func bundleName(caPEM []byte) string {
	sum := sha256.Sum256(caPEM)
	return "ca-" + hex.EncodeToString(sum[:12]) + ".pem"
}
