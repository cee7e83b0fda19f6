//go:build !windows

package local

// Brokered secrets (secrets.broker) with local.network allowlist: each session's variables
// hold placeholders, and its CA bundle (this host's system bundle plus the session's CA,
// never the CA's key) is a file in a directory of this user's under the temporary directory
// that nobody can list. The session's proxy (ns.go) replaces the placeholders for their
// hosts (internal/egress, broker.go).

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/egress"
)

// brokerDir holds each session's placeholders and CA (0600 files in the state directory,
// which commands cannot see).
func (b *Backend) brokerDir() string { return filepath.Join(b.opts.StateDir, "local-egress-broker") }

func (b *Backend) sessionBroker(session string) (*egress.Broker, error) {
	return b.brokering.SessionBroker(b.brokerDir(), session)
}

// bundleDir is where sessions' CA bundles go: outside the state directory, which commands
// cannot read, in a directory only its owner can list.
func bundleDir() (string, error) {
	dir := filepath.Join(os.TempDir(), "hermes-sandbox-ca-"+strconv.Itoa(os.Getuid()))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	st, err := os.Lstat(dir)
	if err != nil {
		return "", err
	}
	if !st.IsDir() || !ownedByMe(st) {
		return "", fmt.Errorf("%s is not a directory of this user's", dir)
	}
	return dir, os.Chmod(dir, 0o711)
}

// sessionEnv is what each command of session gets besides its own variables: the
// passthrough values, and the broker's placeholders and CA variables, which win over a
// passthrough of the same name (a brokered value never goes in).
func (b *Backend) sessionEnv(session string) (map[string]string, error) {
	env := b.opts.PassthroughMap()
	if b.network != config.LocalNetworkAllowlist {
		return env, nil
	}
	br, err := b.sessionBroker(session)
	if err != nil || br == nil {
		return env, err
	}
	dir, err := bundleDir()
	if err != nil {
		return nil, fmt.Errorf("egress broker: %w", err)
	}
	name, err := br.WriteBundle(dir, b.opts.Environ)
	if err != nil {
		return nil, err
	}
	for k, v := range br.SandboxEnv(filepath.Join(dir, name)) {
		env[k] = v
	}
	return env, nil
}

// ownedByMe reports whether st belongs to this process's user (a directory another user made
// first under a shared temporary directory must not hold the bundle).
func ownedByMe(st os.FileInfo) bool {
	s, ok := st.Sys().(*syscall.Stat_t)
	return !ok || int(s.Uid) == os.Getuid()
}

// BrokersSecrets reports whether this backend's settings let it broker secrets
// (local.network allowlist: its proxy runs), and says so for doctor.
func (b *Backend) BrokersSecrets() (bool, string) {
	if b.network != config.LocalNetworkAllowlist {
		return false, "not available: local.network is " + string(b.network) + ", and only allowlist runs the egress proxy"
	}
	if len(b.brokering.Secrets) == 0 {
		return true, "brokered at the egress proxy: none configured (hermes-sandbox secrets add NAME --host HOST)"
	}
	names := ""
	for i, x := range b.brokering.Secrets {
		if i > 0 {
			names += ", "
		}
		names += x.Name
	}
	return true, "brokered at the egress proxy: " + names
}

// forgetBroker removes session's placeholders, CA and CA bundle: a later session of the same
// name gets new ones.
func (b *Backend) forgetBroker(session string) {
	dir := filepath.Join(os.TempDir(), "hermes-sandbox-ca-"+strconv.Itoa(os.Getuid()))
	egress.RemoveSession(b.brokerDir(), dir, session)
}
