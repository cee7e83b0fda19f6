package egress

// The secret broker. A sandbox never holds a brokered credential: its variable holds a random
// placeholder, made for its session, and the proxy puts the real value in place of the
// placeholder in request headers (and HTTP basic auth) only on requests to the secret's own
// hosts. To see headers inside HTTPS, the proxy terminates TLS for those hosts only
// (intercept.go), with a CA made for the session whose certificate the sandbox trusts and
// whose key stays in this host's state directory. A placeholder seen on its way to any other
// host goes out unchanged and the request's event says so (a possible exfiltration).

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/internal/egress/rule"
	"github.com/hermes-sandbox/hermes-sandbox/internal/flock"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// PlaceholderPrefix starts every placeholder, so that one from another session is recognised
// (and reported) although it is never replaced.
const PlaceholderPrefix = "hsbx_ph_"

// Secret is one brokered credential.
type Secret struct {
	Name  string   // the sandbox's variable
	Hosts []string // NAME or *.NAME: the hosts whose requests get Value
	Value string
	// Header and Format make the header added to a request for Hosts that carries neither the
	// placeholder nor Header (Format's %s stands for Value); Header "" adds nothing.
	Header, Format string
	// BasicAuthUser, when set, is the user sent with Value when the placeholder is a basic-auth
	// password (git over HTTPS).
	BasicAuthUser string
}

// brokered is a Secret with its parsed hosts and the session's placeholder.
type brokered struct {
	Secret
	rules       []rule.Rule
	placeholder string
}

// Broker holds one session's brokered secrets, placeholders and CA. It is safe for
// concurrent use.
type Broker struct {
	secrets []brokered
	// retired maps the placeholders the session holds for secrets no longer brokered (removed
	// from secrets.broker while it ran) to their names: never replaced, reported by name.
	retired map[string]string
	caCert  *x509.Certificate
	caKey   crypto.Signer
	caPEM   []byte

	mu     sync.Mutex
	leaves map[string]*tls.Certificate // guarded by mu; by host name
}

// brokerState is a session's placeholders and CA, kept in a 0600 file on this host so that
// every process serving the session (a later CLI call, a new session owner) uses the same
// ones the sandbox already holds.
type brokerState struct {
	Placeholders map[string]string `json:"placeholders"`
	CACert       string            `json:"ca_cert"` // PEM
	CAKey        string            `json:"ca_key"`  // PEM, PKCS#8
}

// BrokerStatePath is the file holding session's broker state in dir.
func BrokerStatePath(dir, session string) string { return filepath.Join(dir, session+".json") }

// NewBroker returns the broker of session for secrets, reading its state from dir (placeholders
// and CA made earlier for the session) or creating it there. A secret new to the session gets
// a new placeholder. dir "" keeps the state in memory only.
func NewBroker(dir, session string, secrets []Secret) (*Broker, error) {
	if err := sandbox.ValidateSessionName(session); err != nil {
		return nil, fmt.Errorf("egress broker: %w", err)
	}
	var st brokerState
	path := ""
	if dir != "" {
		path = BrokerStatePath(dir, session)
		// The processes serving a session (its owner's proxy, a CLI call opening it) add a
		// new secret's placeholder one at a time, so that they all keep the same one.
		if err := os.MkdirAll(dir, 0o700); err == nil {
			if unlock, err := flock.Lock(path + ".lock"); err == nil {
				defer unlock()
			}
		}
		data, err := os.ReadFile(path)
		switch {
		case err == nil:
			if err := json.Unmarshal(data, &st); err != nil {
				return nil, fmt.Errorf("egress broker: %s: %w (remove it; the session then gets new placeholders)", path, err)
			}
		case !errors.Is(err, os.ErrNotExist):
			return nil, fmt.Errorf("egress broker: %w", err)
		}
	}
	changed := false
	if st.Placeholders == nil {
		st.Placeholders = map[string]string{}
	}
	b := &Broker{leaves: map[string]*tls.Certificate{}}
	for _, s := range secrets {
		rules, err := rule.ParseAll(s.Hosts)
		if err != nil {
			return nil, fmt.Errorf("egress broker: secret %s: %w", s.Name, err)
		}
		if len(rules) == 0 {
			return nil, fmt.Errorf("egress broker: secret %s has no hosts", s.Name)
		}
		if s.Value == "" {
			return nil, fmt.Errorf("egress broker: secret %s has no value", s.Name)
		}
		ph := st.Placeholders[s.Name]
		if !strings.HasPrefix(ph, PlaceholderPrefix) {
			ph = PlaceholderPrefix + sandbox.RandomHex(16) + sandbox.RandomHex(8)
			st.Placeholders[s.Name] = ph
			changed = true
		}
		b.secrets = append(b.secrets, brokered{Secret: s, rules: rules, placeholder: ph})
	}
	for name, ph := range st.Placeholders {
		if !slices.ContainsFunc(b.secrets, func(s brokered) bool { return s.Name == name }) && strings.HasPrefix(ph, PlaceholderPrefix) {
			if b.retired == nil {
				b.retired = map[string]string{}
			}
			b.retired[ph] = name
		}
	}
	if st.CACert != "" {
		if err := b.loadCA(st); err != nil {
			return nil, fmt.Errorf("egress broker: %s: %w (remove it; the session then gets a new CA)", path, err)
		}
	} else {
		if err := b.newCA(session, &st); err != nil {
			return nil, fmt.Errorf("egress broker: make the session's CA: %w", err)
		}
		changed = true
	}
	if changed && path != "" {
		if err := writePrivate(path, st); err != nil {
			return nil, fmt.Errorf("egress broker: %w", err)
		}
	}
	return b, nil
}

// RemoveBrokerState forgets session's placeholders and CA (its session ended).
func RemoveBrokerState(dir, session string) {
	os.Remove(BrokerStatePath(dir, session))
	os.Remove(BrokerStatePath(dir, session) + ".lock")
}

func writePrivate(path string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp := path + ".tmp" + sandbox.RandomHex(4)
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// caLifetime is how long a session's CA and its leaf certificates are valid.
const caLifetime = 397 * 24 * time.Hour

func (b *Broker) newCA(session string, st *brokerState) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "hermes-sandbox egress CA for session " + session, Organization: []string{"hermes-sandbox"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(caLifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	st.CACert = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	st.CAKey = string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}))
	return b.loadCA(*st)
}

func (b *Broker) loadCA(st brokerState) error {
	cb, _ := pem.Decode([]byte(st.CACert))
	kb, _ := pem.Decode([]byte(st.CAKey))
	if cb == nil || kb == nil {
		return errors.New("the CA certificate or key is not PEM")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return err
	}
	k, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return err
	}
	signer, ok := k.(crypto.Signer)
	if !ok {
		return errors.New("the CA key cannot sign")
	}
	b.caCert, b.caKey, b.caPEM = cert, signer, []byte(st.CACert)
	return nil
}

// CACertPEM is the session's CA certificate, to install in the sandbox's trust. (Its key never
// leaves this host.)
func (b *Broker) CACertPEM() []byte { return slices.Clone(b.caPEM) }

// Env returns NAME=PLACEHOLDER for each secret: the sandbox's view of them.
func (b *Broker) Env() map[string]string {
	env := map[string]string{}
	for _, s := range b.secrets {
		env[s.Name] = s.placeholder
	}
	return env
}

// Names returns the secrets' names.
func (b *Broker) Names() []string {
	var n []string
	for _, s := range b.secrets {
		n = append(n, s.Name)
	}
	return n
}

// Intercepts reports whether host (normalized) is a brokered host: the proxy terminates TLS
// for it and rewrites its requests.
func (b *Broker) Intercepts(host string, port int) bool {
	if b == nil {
		return false
	}
	for _, s := range b.secrets {
		if s.allows(host, port) {
			return true
		}
	}
	return false
}

// leaf returns a certificate for host signed by the session's CA, made once per host.
func (b *Broker) leaf(host string) (*tls.Certificate, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if c := b.leaves[host]; c != nil {
		return c, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	notAfter := now.Add(caLifetime)
	if b.caCert.NotAfter.Before(notAfter) {
		notAfter = b.caCert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: host},
		DNSNames:     []string{host},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, b.caCert, key.Public(), b.caKey)
	if err != nil {
		return nil, err
	}
	c := &tls.Certificate{Certificate: [][]byte{der, b.caCert.Raw}, PrivateKey: key}
	b.leaves[host] = c
	return c, nil
}

// rewrite replaces the session's placeholders in req's headers for host: a secret whose hosts
// include host gets its value (and Basic auth its user); any other placeholder, or one of
// another session, stays as it is and is returned in leaked. brokered names the secrets used.
func (b *Broker) rewrite(h http.Header, host string, port int) (used, leaked []string) {
	if b == nil {
		return nil, nil
	}
	note := func(list *[]string, name string) {
		if !slices.Contains(*list, name) {
			*list = append(*list, name)
		}
	}
	for k, vals := range h {
		for i, v := range vals {
			if !strings.Contains(v, PlaceholderPrefix) && !strings.HasPrefix(strings.ToLower(v), "basic ") {
				continue
			}
			if nv, ok := b.basicAuth(v, host, port, &used, &leaked); ok {
				vals[i] = nv
				continue
			}
			for _, s := range b.secrets {
				if !strings.Contains(v, s.placeholder) {
					continue
				}
				if s.allows(host, port) {
					v = strings.ReplaceAll(v, s.placeholder, s.Value)
					note(&used, s.Name)
				} else {
					note(&leaked, s.Name)
				}
			}
			for ph, name := range b.retired {
				if strings.Contains(v, ph) {
					note(&leaked, name+retiredNote)
				}
			}
			if b.foreign(v) {
				note(&leaked, otherSession)
			}
			vals[i] = v
		}
		h[k] = vals
	}
	for _, s := range b.secrets {
		if s.Header == "" || !s.allows(host, port) || slices.Contains(used, s.Name) || h.Get(s.Header) != "" {
			continue
		}
		h.Set(s.Header, strings.Replace(s.Format, "%s", s.Value, 1))
		note(&used, s.Name)
	}
	return used, leaked
}

// basicAuth rewrites a "Basic base64(user:password)" value whose password or user holds a
// placeholder; ok is false when v is something else.
func (b *Broker) basicAuth(v string, host string, port int, used, leaked *[]string) (string, bool) {
	scheme, enc, found := strings.Cut(v, " ")
	if !found || !strings.EqualFold(scheme, "basic") {
		return "", false
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(enc))
	if err != nil {
		return "", false
	}
	user, pass, found := strings.Cut(string(raw), ":")
	if !found || !strings.Contains(user+":"+pass, PlaceholderPrefix) {
		return "", false
	}
	changed := false
	for _, s := range b.secrets {
		if pass != s.placeholder && user != s.placeholder {
			if strings.Contains(user+":"+pass, s.placeholder) && !slices.Contains(*leaked, s.Name) && !s.allows(host, port) {
				*leaked = append(*leaked, s.Name)
			}
			continue
		}
		if !s.allows(host, port) {
			if !slices.Contains(*leaked, s.Name) {
				*leaked = append(*leaked, s.Name)
			}
			continue
		}
		if user == s.placeholder { // a token given as the user name (some tools do)
			user = s.Value
		} else {
			pass = s.Value
			if s.BasicAuthUser != "" {
				user = s.BasicAuthUser
			}
		}
		changed = true
		if !slices.Contains(*used, s.Name) {
			*used = append(*used, s.Name)
		}
	}
	for ph, name := range b.retired {
		if strings.Contains(user+":"+pass, ph) && !slices.Contains(*leaked, name+retiredNote) {
			*leaked = append(*leaked, name+retiredNote)
		}
	}
	if b.foreign(user+":"+pass) && !slices.Contains(*leaked, otherSession) {
		*leaked = append(*leaked, otherSession)
	}
	if !changed {
		return v, true
	}
	return scheme + " " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass)), true
}

// otherSession stands for a placeholder this broker did not make in an event's reason.
const otherSession = "another session's secret"

// retiredNote follows the name of a secret no longer brokered in an event's reason.
const retiredNote = " (no longer brokered: not replaced)"

// foreign reports whether v holds a placeholder that is not one of this session's.
func (b *Broker) foreign(v string) bool {
	for _, s := range b.secrets {
		v = strings.ReplaceAll(v, s.placeholder, "")
	}
	for ph := range b.retired {
		v = strings.ReplaceAll(v, ph, "")
	}
	return strings.Contains(v, PlaceholderPrefix)
}

// allows reports whether the secret's value may go to host:port. A secret names hosts, not
// ports: which ports are reachable at all is the allowlist's decision.
func (s brokered) allows(host string, port int) bool {
	for _, r := range s.rules {
		if r.Port == 0 {
			r.Port = port
		}
		if r.Matches(host, port) {
			return true
		}
	}
	return false
}

// exfilReason is the event's reason for a request that carried placeholders to a host they
// do not belong to.
func exfilReason(leaked []string) string {
	if len(leaked) == 0 {
		return ""
	}
	return "possible exfiltration: the placeholder of " + strings.Join(leaked, ", ") +
		" was sent to a host it does not belong to (sent unchanged, without the secret)"
}
