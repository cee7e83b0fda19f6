package egress

import (
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/hermes-sandbox/hermes-sandbox/config"
)

// Live is the part of the configuration a backend's proxies follow while sessions run: the
// allowlist (the backend's own egress_allow, else terminal.egress_allow) and the brokered
// secrets (secrets.broker, with their values). Get reads the configuration again whenever
// config.yaml or secrets.yaml changed (by size, modification time and inode), and every proxy
// asks at each new connection, so a person's change reaches every live session on its next
// connection, in whichever process serves it (the session owner, an MCP server, a CLI call).
// Each proxy records the change it sees in its session's audit trail (Options.Live).
//
// A configuration that cannot be read again (a half-saved edit) allows nothing and adds no
// secret until it can: a person revoking a host must never find it still open because the
// edit had a typo.
type Live struct {
	cfg     *config.Config // as first loaded; nil: the settings never change
	environ []string       // where value_from env secrets come from
	section string         // the backend's section, e.g. docker
	own     func(*config.Config) []string

	mu    sync.Mutex
	stamp string    // guarded by mu; the files' identity when cur was read
	cur   *Snapshot // guarded by mu
}

// Snapshot is the live settings at one time. A Snapshot is never modified.
type Snapshot struct {
	// Gen counts the changes Live has seen; a new Snapshot has a new Gen.
	Gen uint64
	// Own is the section's egress_allow, Shared terminal.egress_allow.
	Own, Shared []string
	// Secrets are the brokered secrets with their values.
	Secrets []Secret
	// Err says why the configuration could not be read again: nothing is allowed and no
	// secret is added while it is set.
	Err error

	section string
}

// NewLive follows c (as loaded by config.LoadWith) for a backend's section; own returns the
// section's egress_allow from a configuration. secrets are c's brokered secrets as resolved
// already (BrokeringOf), so that the first Snapshot is exactly what the backend was built
// with.
func NewLive(c *config.Config, environ []string, section string, own func(*config.Config) []string, secrets []Secret) *Live {
	l := &Live{cfg: c, environ: environ, section: section, own: own}
	if c.Path() == "" {
		l.cfg = nil
	}
	l.stamp = l.fileStamp()
	l.cur = &Snapshot{Own: slices.Clone(own(c)), Shared: slices.Clone(c.Terminal.EgressAllow), Secrets: secrets, section: section}
	return l
}

// fileStamp identifies the configuration files' current versions.
func (l *Live) fileStamp() string {
	if l.cfg == nil {
		return ""
	}
	var b strings.Builder
	for _, p := range []string{l.cfg.Path(), l.cfg.SecretsPath()} {
		fi, err := os.Stat(p)
		if err != nil {
			b.WriteString("-;")
			continue
		}
		fmt.Fprintf(&b, "%d/%d/%s;", fi.Size(), fi.ModTime().UnixNano(), fileID(fi))
	}
	return b.String()
}

// Get returns the settings in force, reading the configuration again if its files changed
// since the last call. A nil Live has none (nil).
func (l *Live) Get() *Snapshot {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cfg == nil {
		return l.cur
	}
	st := l.fileStamp()
	if st == l.stamp {
		return l.cur
	}
	l.stamp = st
	next := &Snapshot{Gen: l.cur.Gen + 1, section: l.section}
	c, err := l.cfg.Reload()
	if err == nil {
		var g Brokering
		if g, err = BrokeringOf(c, l.environ); err == nil {
			next.Own, next.Shared, next.Secrets = slices.Clone(l.own(c)), slices.Clone(c.Terminal.EgressAllow), g.Secrets
		}
	}
	if err != nil {
		next.Err = fmt.Errorf("the configuration cannot be read again, so nothing is allowed until it can: %w", err)
	}
	if next.same(l.cur) {
		return l.cur // the files were touched, not changed
	}
	l.cur = next
	return next
}

// same reports whether s and o hold the same settings.
func (s *Snapshot) same(o *Snapshot) bool {
	if (s.Err == nil) != (o.Err == nil) || (s.Err != nil && s.Err.Error() != o.Err.Error()) {
		return false
	}
	return slices.Equal(s.Own, o.Own) && slices.Equal(s.Shared, o.Shared) &&
		slices.EqualFunc(s.Secrets, o.Secrets, func(a, b Secret) bool {
			return a.Name == b.Name && slices.Equal(a.Hosts, b.Hosts) && a.Value == b.Value && a.Header == b.Header &&
				a.Format == b.Format && a.BasicAuthUser == b.BasicAuthUser
		})
}

// Base is the allowlist the snapshot puts in force before a session's own change (the
// section's list when it has one, else terminal.egress_allow), and the setting it comes from.
func (s *Snapshot) Base() ([]string, string) {
	if len(s.Own) > 0 {
		return s.Own, s.section + ".egress_allow"
	}
	if len(s.Shared) > 0 {
		return s.Shared, "terminal.egress_allow"
	}
	return nil, s.section + ".egress_allow"
}

// Changes describes what differs from prev to s, naming settings and secrets, never values.
func (s *Snapshot) Changes(prev *Snapshot) string {
	var parts []string
	if s.Err != nil {
		return s.Err.Error()
	}
	if prev != nil && prev.Err != nil {
		parts = append(parts, "the configuration can be read again")
	}
	var pb []string
	if prev != nil {
		pb, _ = prev.Base()
	}
	nb, key := s.Base()
	if d := listDiff(pb, nb); d != "" {
		parts = append(parts, key+": "+d)
	}
	var before []Secret
	if prev != nil {
		before = prev.Secrets
	}
	var added, removed, changed []string
	for _, x := range s.Secrets {
		i := slices.IndexFunc(before, func(y Secret) bool { return y.Name == x.Name })
		switch {
		case i < 0:
			added = append(added, x.Name)
		case !(&Snapshot{Secrets: []Secret{x}}).same(&Snapshot{Secrets: []Secret{before[i]}}):
			changed = append(changed, x.Name)
		}
	}
	for _, y := range before {
		if !slices.ContainsFunc(s.Secrets, func(x Secret) bool { return x.Name == y.Name }) {
			removed = append(removed, y.Name)
		}
	}
	var sd []string
	if len(removed) > 0 {
		sd = append(sd, "removed "+strings.Join(removed, ", "))
	}
	if len(added) > 0 {
		sd = append(sd, "added "+strings.Join(added, ", "))
	}
	if len(changed) > 0 {
		sd = append(sd, "changed "+strings.Join(changed, ", ")+" (value, hosts or header)")
	}
	if len(sd) > 0 {
		parts = append(parts, "secrets.broker: "+strings.Join(sd, "; "))
	}
	if len(parts) == 0 {
		return "no change"
	}
	return strings.Join(parts, "; ")
}

// listDiff says which entries left and joined a list.
func listDiff(before, after []string) string {
	var add, rm []string
	for _, a := range after {
		if !slices.Contains(before, a) {
			add = append(add, a)
		}
	}
	for _, b := range before {
		if !slices.Contains(after, b) {
			rm = append(rm, b)
		}
	}
	var p []string
	if len(rm) > 0 {
		p = append(p, "removed "+strings.Join(rm, ", "))
	}
	if len(add) > 0 {
		p = append(p, "added "+strings.Join(add, ", "))
	}
	return strings.Join(p, ", ")
}

// SecretsOr returns the brokered secrets in force, or fallback for a nil Live.
func (l *Live) SecretsOr(fallback []Secret) []Secret {
	s := l.Get()
	if s == nil {
		return fallback
	}
	if s.Err != nil {
		return nil
	}
	return s.Secrets
}

// Brokers returns the Options.Brokers of session's proxy: its broker for the secrets in force,
// made again (with the placeholders and CA the session already has, from dir) when they
// change. fallback are the secrets of a nil Live. A broker that cannot be made is logged and
// none is used: the sandbox holds placeholders only, so nothing secret goes out.
func (l *Live) Brokers(dir, session string, fallback []Secret, log *slog.Logger) func() *Broker {
	var mu sync.Mutex
	var gen uint64
	var made bool
	var cur *Broker
	return func() *Broker {
		s := l.Get()
		mu.Lock()
		defer mu.Unlock()
		g := uint64(0)
		if s != nil {
			g = s.Gen
		}
		if made && g <= gen { // unchanged (or an older snapshot than the one in use)
			return cur
		}
		secrets := fallback
		if s != nil {
			secrets = s.Secrets
			if s.Err != nil {
				secrets = nil
			}
		}
		var err error
		if len(secrets) == 0 && dir != "" {
			// None is brokered now; a session that had some keeps a broker without secrets,
			// which still recognises its old placeholders (and reports them where they go).
			if _, serr := os.Stat(BrokerStatePath(dir, session)); serr == nil {
				cur, err = NewBroker(dir, session, nil)
			} else {
				cur = nil
			}
		} else {
			cur, err = Brokering{Secrets: secrets}.Broker(dir, session)
		}
		if err != nil && log != nil {
			log.Warn("egress broker unavailable; no secret is added", "session", session, "err", err)
		}
		gen, made = g, true
		return cur
	}
}
