package mcpserver_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/mcpserver"
)

// testCA makes a CA and a server certificate for 127.0.0.1 signed by it, writes the
// server's certificate and key as PEM files, and returns the pool that trusts the CA.
func testCA(t *testing.T) (roots *x509.CertPool, certFile, keyFile string) {
	t.Helper()
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "hermes-sandbox test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "hermes-sandbox test server"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	roots = x509.NewCertPool()
	roots.AddCert(ca)
	return roots, certFile, keyFile
}

// TestTLSServing: with mcp.tls_cert and mcp.tls_key the server speaks HTTPS only. The SDK
// client that trusts the CA connects with its key and runs a command; plain HTTP to the same
// port gets no MCP (nor a health answer), and a client that does not trust the CA is refused.
func TestTLSServing(t *testing.T) {
	roots, certFile, keyFile := testCA(t)
	keys := filepath.Join(t.TempDir(), mcpserver.KeysFileName)
	alice, err := mcpserver.AddKey(keys, mcpserver.Key{Name: "alice"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, envOptions{keysFile: keys, configure: func(c *config.Config) {
		c.MCP.TLSCert, c.MCP.TLSKey = certFile, keyFile
	}})
	ctx, cancel := context.WithCancel(t.Context())
	addrc := make(chan net.Addr, 1)
	served := make(chan error, 1)
	go func() {
		served <- e.srv.ListenAndServe(ctx, "127.0.0.1:0", adminToken, func(a net.Addr) { addrc <- a })
	}()
	var addr string
	select {
	case a := <-addrc:
		addr = a.String()
	case err := <-served:
		t.Fatalf("ListenAndServe: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("ListenAndServe: %v", err)
		}
	})

	trusting := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}
	defer trusting.CloseIdleConnections()
	connect := func(url string, rt http.RoundTripper) (*mcp.ClientSession, error) {
		return mcp.NewClient(&mcp.Implementation{Name: "tls-test", Version: "1"}, nil).Connect(t.Context(),
			&mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearer{alice, rt}}, MaxRetries: -1}, nil)
	}

	cs, err := connect("https://"+addr+mcpserver.HTTPPath, trusting)
	if err != nil {
		t.Fatalf("connect over https with the CA: %v", err)
	}
	defer cs.Close()
	var out mcpserver.TerminalResult
	ok(t, cs, "terminal", map[string]any{"command": "echo over-tls"}, &out)
	if out.Stdout != "over-tls\n" {
		t.Errorf("terminal over https: %q; want over-tls", out.Stdout)
	}
	resp, err := (&http.Client{Transport: trusting}).Get("https://" + addr + mcpserver.HealthPath)
	if err != nil {
		t.Fatalf("GET https %s: %v", mcpserver.HealthPath, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.TLS == nil || resp.TLS.Version < tls.VersionTLS12 {
		t.Errorf("GET https %s: %d %+v; want 200 over TLS 1.2 or later", mcpserver.HealthPath, resp.StatusCode, resp.TLS)
	}

	// Plain HTTP to the same port: no MCP session, no health answer.
	if cs, err := connect("http://"+addr+mcpserver.HTTPPath, http.DefaultTransport); err == nil {
		cs.Close()
		t.Error("an MCP client connected over plain http to the TLS listener")
	}
	if resp, err := http.Get("http://" + addr + mcpserver.HealthPath); err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK || strings.Contains(string(body), "ok") {
			t.Errorf("plain http GET %s = %d %q; want no answer from the server", mcpserver.HealthPath, resp.StatusCode, body)
		}
	}
	// A client that does not trust the CA does not connect (nor send its key).
	if cs, err := connect("https://"+addr+mcpserver.HTTPPath, &http.Transport{}); err == nil {
		cs.Close()
		t.Error("a client without the CA connected")
	} else if !strings.Contains(err.Error(), "certificate") {
		t.Errorf("a client without the CA: %v; want a certificate error", err)
	}
}
