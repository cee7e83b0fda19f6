package kubernetes

// Brokered secrets (secrets.broker) with kubernetes.network allowlist. The proxy runs in this
// process, where the relay exec brings the pod's connections (egress.go), so it brokers them
// as docker's does: each session's variables hold placeholders, and the proxy puts the real
// value in requests to the secret's hosts only, terminating TLS for those hosts with the
// session's CA. The CA's certificate goes into the pod, in a bundle with this host's trust (the
// pod's root filesystem is read-only, so its system bundle cannot change: the usual CA
// variables point at the bundle instead); the CA's key and the values stay on this host.

import (
	"bytes"
	"context"
	"maps"
	"path"
	"path/filepath"
	"strings"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/agent"
	"github.com/hermes-sandbox/hermes-sandbox/internal/egress"
)

// brokerDir holds each session's placeholders and CA (host side, 0600 files).
func (b *Backend) brokerDir() string {
	return filepath.Join(b.opts.StateDir, "kubernetes", "egress-broker")
}

// sessionBroker is session's broker for the secrets in force, nil when none is brokered (or
// the network is not allowlist: the factory refuses secrets.broker then).
func (b *Backend) sessionBroker(session string) (*egress.Broker, error) {
	if b.network() != config.NetworkAllowlist {
		return nil, nil
	}
	return b.extra.Egress.SessionBroker(b.brokerDir(), session)
}

// bundlePath is where a session's CA bundle lives in its pod: the helper's own emptyDir.
func bundlePath(br *egress.Broker) string { return path.Join(hermesDir, br.BundleName()) }

// sessionEnv is what each command of session gets besides its own variables: the passthrough
// values, and the broker's placeholders and CA variables, which win over a passthrough of the
// same name (a brokered value never goes in).
func (b *Backend) sessionEnv(session string) (map[string]string, error) {
	env := maps.Clone(b.passEnv)
	br, err := b.sessionBroker(session)
	if err != nil || br == nil {
		return env, err
	}
	if env == nil {
		env = map[string]string{}
	}
	maps.Copy(env, br.SandboxEnv(bundlePath(br)))
	return env, nil
}

// installBundle writes session's CA bundle into the pod through its helper, where the CA
// variables point (every start: a recreated pod has an empty emptyDir).
func (b *Backend) installBundle(ctx context.Context, session string, client *agent.Client) error {
	br, err := b.sessionBroker(session)
	if err != nil || br == nil {
		return err
	}
	return client.Call(ctx, agent.CallRequest{Op: "write_file", Path: bundlePath(br), Mode: 0o644}, nil, nil,
		bytes.NewReader(br.Bundle(b.opts.Environ)))
}

// BrokersSecrets reports whether this backend's settings let it broker secrets
// (kubernetes.network allowlist: its proxy runs), and says so for doctor.
func (b *Backend) BrokersSecrets() (bool, string) {
	if b.network() != config.NetworkAllowlist {
		return false, "not available: kubernetes.network is " + string(b.network()) + ", and only allowlist runs the egress proxy"
	}
	var names []string
	for _, s := range b.extra.Egress.Secrets {
		names = append(names, s.Name)
	}
	if len(names) == 0 {
		return true, "brokered at the egress proxy (in this process, reached through the relay exec): none configured (hermes-sandbox secrets add NAME --host HOST)"
	}
	return true, "brokered at the egress proxy (in this process, reached through the relay exec): " + strings.Join(names, ", ")
}

// forgetBroker removes session's placeholders and CA: a later session of the same name gets
// new ones.
func (b *Backend) forgetBroker(session string) { egress.RemoveSession(b.brokerDir(), "", session) }
