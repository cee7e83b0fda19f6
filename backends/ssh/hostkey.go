package ssh

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"

	gossh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/flock"
)

// hostKeys checks server keys against a known_hosts file: a known key must match, a changed
// key is refused, and an unknown host is recorded (accept-new) or refused (yes).
type hostKeys struct {
	path     string
	policy   config.HostKeyPolicy
	progress io.Writer
}

// knownHostsMu serialises this process's appends to known_hosts files; flock covers other
// processes.
var knownHostsMu sync.Mutex

// load reads the known_hosts database; a missing file is an empty one.
func (h *hostKeys) load() (gossh.HostKeyCallback, error) {
	if _, err := os.Stat(h.path); errors.Is(err, os.ErrNotExist) {
		return func(string, net.Addr, gossh.PublicKey) error { return &knownhosts.KeyError{} }, nil
	}
	cb, err := knownhosts.New(h.path)
	if err != nil {
		return nil, fmt.Errorf("read known_hosts %s: %w", h.path, err)
	}
	return cb, nil
}

// algorithms returns the host key algorithms to ask for, so a host known by (say) its
// ed25519 key is not offered as RSA and then reported as changed. nil means the defaults.
func (h *hostKeys) algorithms(hostport string) []string {
	cb, err := h.load()
	if err != nil {
		return nil
	}
	pub, _, _ := ed25519.GenerateKey(nil)
	probe, err := gossh.NewPublicKey(pub)
	if err != nil {
		return nil
	}
	var ke *knownhosts.KeyError
	if err := cb(hostport, &net.TCPAddr{IP: net.IPv4zero}, probe); !errors.As(err, &ke) || len(ke.Want) == 0 {
		return nil
	}
	var algs []string
	seen := map[string]bool{}
	for _, k := range ke.Want {
		for _, a := range algorithmsForKeyType(k.Key.Type()) {
			if !seen[a] {
				seen[a] = true
				algs = append(algs, a)
			}
		}
	}
	return algs
}

func algorithmsForKeyType(t string) []string {
	if t == gossh.KeyAlgoRSA {
		return []string{gossh.KeyAlgoRSASHA512, gossh.KeyAlgoRSASHA256, gossh.KeyAlgoRSA}
	}
	return []string{t}
}

// callback returns the HostKeyCallback for one hop. verified is set once the key passed.
func (h *hostKeys) callback(hostport string, verified *bool) gossh.HostKeyCallback {
	return func(_ string, remote net.Addr, key gossh.PublicKey) error {
		cb, err := h.load()
		if err != nil {
			return err
		}
		err = cb(hostport, remote, key)
		if err == nil {
			*verified = true
			return nil
		}
		var ke *knownhosts.KeyError
		var re *knownhosts.RevokedError
		switch {
		case errors.As(err, &re):
			return &HostKeyError{Host: knownhosts.Normalize(hostport), Got: key, KnownHosts: h.path, Revoked: true}
		case errors.As(err, &ke) && len(ke.Want) > 0:
			return &HostKeyError{Host: knownhosts.Normalize(hostport), Got: key, Want: ke.Want, KnownHosts: h.path}
		case errors.As(err, &ke):
			if h.policy != config.HostKeyAcceptNew {
				return &HostKeyError{Host: knownhosts.Normalize(hostport), Got: key, KnownHosts: h.path, Unknown: true}
			}
			if err := h.record(hostport, key); err != nil {
				return err
			}
			*verified = true
			return nil
		default:
			return err
		}
	}
}

// record appends the host's key to known_hosts and says so on the progress writer.
func (h *hostKeys) record(hostport string, key gossh.PublicKey) error {
	knownHostsMu.Lock()
	defer knownHostsMu.Unlock()
	if err := os.MkdirAll(filepath.Dir(h.path), 0o700); err != nil {
		return fmt.Errorf("record host key: %w", err)
	}
	f, err := os.OpenFile(h.path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("record host key: %w", err)
	}
	defer f.Close()
	if err := flock.LockFile(f, true, true); err != nil {
		return fmt.Errorf("record host key: lock %s: %w", h.path, err)
	}
	defer flock.UnlockFile(f)
	// Another process may have recorded it meanwhile; check again under the lock.
	if cb, err := knownhosts.New(h.path); err == nil {
		if err := cb(hostport, &net.TCPAddr{IP: net.IPv4zero}, key); err == nil {
			return nil
		} else if ke := (*knownhosts.KeyError)(nil); errors.As(err, &ke) && len(ke.Want) > 0 {
			return &HostKeyError{Host: knownhosts.Normalize(hostport), Got: key, Want: ke.Want, KnownHosts: h.path}
		}
	}
	line := knownhosts.Line([]string{knownhosts.Normalize(hostport)}, key) + "\n"
	if fi, err := f.Stat(); err == nil && fi.Size() > 0 {
		last := make([]byte, 1)
		if _, err := f.ReadAt(last, fi.Size()-1); err == nil && last[0] != '\n' {
			line = "\n" + line
		}
	}
	if _, err := f.WriteString(line); err != nil {
		return fmt.Errorf("record host key in %s: %w", h.path, err)
	}
	if h.progress != nil {
		fmt.Fprintf(h.progress, "ssh: first connection to %s: trusting its %s host key %s (recorded in %s)\n",
			knownhosts.Normalize(hostport), keyTypeName(key), gossh.FingerprintSHA256(key), h.path)
	}
	return nil
}

// keyTypeName is OpenSSH's short name for a key type (ED25519, RSA, ECDSA).
func keyTypeName(k gossh.PublicKey) string {
	t := k.Type()
	switch {
	case strings.Contains(t, "ed25519"):
		return "ED25519"
	case strings.Contains(t, "rsa"):
		return "RSA"
	case strings.Contains(t, "ecdsa"):
		return "ECDSA"
	}
	return strings.ToUpper(t)
}

// HostKeyError is a host key that cannot be trusted: changed, revoked, or unknown while
// ssh.strict_host_key_checking is yes. It is never resolved automatically.
type HostKeyError struct {
	Host       string // as in known_hosts: host or [host]:port
	Got        gossh.PublicKey
	Want       []knownhosts.KnownKey // the recorded keys, when the key changed
	KnownHosts string
	Unknown    bool
	Revoked    bool
}

func (e *HostKeyError) Error() string {
	got := keyTypeName(e.Got) + " " + gossh.FingerprintSHA256(e.Got)
	hostArg := e.Host
	switch {
	case e.Revoked:
		return fmt.Sprintf("host key for %s (%s) is marked revoked in %s: refusing to connect", e.Host, got, e.KnownHosts)
	case e.Unknown:
		host, port := splitNormalized(e.Host)
		return fmt.Sprintf("host %s is not in %s and ssh.strict_host_key_checking is yes; the server offers %s. "+
			"Verify that fingerprint with the host's administrator, then add it with `ssh-keyscan -p %s %s >> %s`, "+
			"or allow first-use recording with `hermes-sandbox config set ssh.strict_host_key_checking accept-new`",
			e.Host, e.KnownHosts, got, port, host, e.KnownHosts)
	}
	var old []string
	for _, w := range e.Want {
		old = append(old, fmt.Sprintf("%s %s (%s line %d)", keyTypeName(w.Key), gossh.FingerprintSHA256(w.Key), w.Filename, w.Line))
	}
	return fmt.Sprintf("HOST KEY FOR %s HAS CHANGED: known_hosts has %s, but the server now offers %s. "+
		"Someone could be intercepting the connection (man-in-the-middle), or the host was reinstalled. "+
		"Nothing was sent. If you have verified the new key, remove the old one with `ssh-keygen -R '%s' -f %s` and connect again",
		e.Host, strings.Join(old, ", "), got, hostArg, e.KnownHosts)
}

// splitNormalized splits "[host]:port" or "host" into host and port.
func splitNormalized(h string) (string, string) {
	if strings.HasPrefix(h, "[") {
		if host, port, err := net.SplitHostPort(h); err == nil {
			return host, port
		}
	}
	return h, "22"
}
