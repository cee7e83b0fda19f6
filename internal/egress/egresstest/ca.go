package egresstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/egress"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// CA is a test certificate authority for stand-in HTTPS servers under made-up names.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	PEM  []byte
}

// NewCA makes a CA.
func NewCA(t testing.TB) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "egresstest CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &CA{cert: cert, key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// Pool is a pool holding the CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// Recorder is a handler that keeps the headers of every request and answers "ok" (it never
// echoes them: what a sandbox receives back must not carry what the proxy added).
type Recorder struct {
	mu   sync.Mutex
	seen []http.Header // guarded by mu
}

func (r *Recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	io.Copy(io.Discard, req.Body)
	r.mu.Lock()
	r.seen = append(r.seen, req.Header.Clone())
	r.mu.Unlock()
	io.WriteString(w, "ok\n")
}

// Seen returns the headers of the requests received so far.
func (r *Recorder) Seen() []http.Header {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]http.Header(nil), r.seen...)
}

// Server starts an HTTPS server on loopback (all interfaces, as New's) with a certificate
// for name signed by ca; it stops when the test ends.
func (ca *CA) Server(t testing.TB, name string, h http.Handler) *httptest.Server {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		DNSNames: []string{name}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		t.Fatal(err)
	}
	s := &httptest.Server{Listener: listenAll(t), Config: &http.Server{Handler: h}}
	s.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	s.StartTLS()
	t.Cleanup(s.Close)
	return s
}

// BrokerToken brokers GITHUB_TOKEN in cfg as entry says (its name is set here), for a test:
// egress.hosts points entry's hosts at loopback, where ca's servers listen, and
// egress.allow_private lets the proxy reach them. The real value is made now, so that the test
// binary does not hold it. It returns that value and cfg's brokering, trusting ca upstream.
func BrokerToken(t testing.TB, cfg *config.Config, ca *CA, entry config.BrokerSecret) (string, egress.Brokering) {
	t.Helper()
	real := "ghp_" + sandbox.RandomHex(16)
	entry.Name = "GITHUB_TOKEN"
	cfg.Secrets.Broker = config.BrokerList{entry}
	cfg.Secrets.Values = config.SecretValues{entry.Name: real}
	cfg.Egress.Hosts = map[string]string{}
	for _, h := range entry.Hosts {
		cfg.Egress.Hosts[h] = "127.0.0.1"
	}
	cfg.Egress.AllowPrivate = []string{"127.0.0.0/8"}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	g, err := egress.BrokeringOf(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	g.UpstreamRoots = ca.Pool()
	return real, g
}
