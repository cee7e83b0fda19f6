package kubeapi

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// credentials are the files the apiserver is started with, and what clients need of them.
type credentials struct {
	caPEM                    []byte
	serverCert, serverKey    string
	saPub, saKey             string
	tokens                   string
	adminToken, limitedToken string
}

// writeCredentials writes, in dir, a CA and the serving certificate it signs (127.0.0.1 and
// localhost), the service-account signing key pair and the static token file.
func writeCredentials(dir string) (*credentials, error) {
	c := &credentials{
		serverCert:   filepath.Join(dir, "serving.crt"),
		serverKey:    filepath.Join(dir, "serving.key"),
		saPub:        filepath.Join(dir, "sa.pub"),
		saKey:        filepath.Join(dir, "sa.key"),
		tokens:       filepath.Join(dir, "tokens.csv"),
		adminToken:   randomToken(),
		limitedToken: randomToken(),
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "hermes-sandbox test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	c.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(7 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback, net.IPv4(10, 96, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	if err := writePEM(c.serverCert, "CERTIFICATE", der); err != nil {
		return nil, err
	}
	if err := writeKey(c.serverKey, key); err != nil {
		return nil, err
	}

	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	if err := writeKey(c.saKey, saKey); err != nil {
		return nil, err
	}
	pub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, err
	}
	if err := writePEM(c.saPub, "PUBLIC KEY", pub); err != nil {
		return nil, err
	}

	// token,user,uid,"group,..."
	tokens := fmt.Sprintf("%s,%s,%s,\"system:masters\"\n%s,%s,%s\n",
		c.adminToken, AdminUser, AdminUser, c.limitedToken, LimitedUser, LimitedUser)
	if err := os.WriteFile(c.tokens, []byte(tokens), 0o600); err != nil {
		return nil, err
	}
	return c, nil
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	return writePEM(path, "EC PRIVATE KEY", der)
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}
