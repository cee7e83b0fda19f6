package docker

// Brokered secrets (secrets.broker) with docker.network allowlist: each session's variables
// hold placeholders, and its CA bundle (the host's system bundle plus the session's CA, never
// the CA's key) is a file in egressSockDir, which every allowlist container mounts read-only
// and nobody can list. The session's proxy (network.go) replaces the placeholders for their
// hosts (internal/egress, broker.go).

import (
	"path"
	"path/filepath"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/egress"
)

// brokerDir holds each session's placeholders and CA (host side, 0600 files).
func (b *Backend) brokerDir() string {
	return filepath.Join(filepath.Dir(b.records.Dir), "egress-broker")
}

// sessionBroker is session's broker, nil when no secret is brokered (or the network is not
// allowlist: the factory refuses secrets.broker then).
func (b *Backend) sessionBroker(session string) (*egress.Broker, error) {
	return b.extra.Brokering.SessionBroker(b.brokerDir(), session)
}

// sessionEnv is what each command of session gets besides its own variables: the
// passthrough values, and the broker's placeholders and CA variables, which win over a
// passthrough of the same name (a brokered value never goes in).
func (b *Backend) sessionEnv(session string) (map[string]string, error) {
	env := envMap(b.passEnv)
	if b.network() != config.NetworkAllowlist {
		return env, nil
	}
	br, err := b.sessionBroker(session)
	if err != nil || br == nil {
		return env, err
	}
	dir, err := b.egressSockDir()
	if err != nil {
		return nil, err
	}
	name, err := br.WriteBundle(dir, b.opts.Environ)
	if err != nil {
		return nil, err
	}
	for k, v := range br.SandboxEnv(path.Join(egressSockInCtr, name)) {
		env[k] = v
	}
	return env, nil
}

// BrokersSecrets reports whether this backend's settings let it broker secrets
// (docker.network allowlist: its proxy runs), and says so for doctor.
func (b *Backend) BrokersSecrets() (bool, string) {
	if b.network() != config.NetworkAllowlist {
		return false, "not available: docker.network is " + string(b.network()) + ", and only allowlist runs the egress proxy"
	}
	return true, "brokered at the egress proxy: " + brokeredNames(b.extra.Brokering)
}

func brokeredNames(g egress.Brokering) string {
	if len(g.Secrets) == 0 {
		return "none configured (hermes-sandbox secrets add NAME --host HOST)"
	}
	s := ""
	for i, x := range g.Secrets {
		if i > 0 {
			s += ", "
		}
		s += x.Name
	}
	return s
}

// forgetBroker removes session's placeholders, CA and CA bundle: a later session of the same
// name gets new ones.
func (b *Backend) forgetBroker(session string) {
	dir := filepath.Join(filepath.Dir(b.records.Dir), "egress-sock")
	egress.RemoveSession(b.brokerDir(), dir, session)
}
