package egress

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/hermes-sandbox/hermes-sandbox/internal/egress/rule"
	"github.com/hermes-sandbox/hermes-sandbox/internal/flock"
)

// Overrides is a backend's configured allowlist plus each live session's change to it
// (`sessions network NAME --allow/--deny`), kept as one JSON file per session in Dir so that
// every process serving the session sees it. Backends that filter egress with a Proxy
// (docker, kubernetes) share it.
type Overrides struct {
	// Dir holds one SESSION.json per session whose allowlist was changed.
	Dir string
	// Base is the configured allowlist (e.g. docker.egress_allow, else terminal.egress_allow).
	Base []string
	// ConfigKey is the setting Base comes from, for messages.
	ConfigKey string
	// Logger receives a warning when a session's allowlist cannot be read; nil discards.
	Logger *slog.Logger
	// Live, if set, replaces Base with the configured allowlist in force now, read again
	// when the configuration changes (see Live).
	Live *Live

	section string // the backend's config section (NewOverrides), for messages
	own     bool   // Base is the section's own list, not terminal.egress_allow
}

// sessionChange is the file's content: hosts added to and removed from Base.
type sessionChange struct {
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
}

// Path is the file holding session's change.
func (o Overrides) Path(session string) string {
	return filepath.Join(o.Dir, session+".json")
}

// Remove forgets session's change (its session ended).
func (o Overrides) Remove(session string) { os.Remove(o.Path(session)) }

func readChange(path string) (sessionChange, error) {
	var c sessionChange
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, err
	}
	if err := json.Unmarshal(data, &c); err != nil {
		return c, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Allowlist returns the allowlist in force for session: Base with the session's change
// applied. A broken change file is an error (the caller allows nothing).
func (o Overrides) Allowlist(session string) (Allowlist, error) {
	return o.allowlist(session, o.Live.Get())
}

// allowlist is Allowlist with the live settings snap (nil: Base).
func (o Overrides) allowlist(session string, snap *Snapshot) (Allowlist, error) {
	list, key := o.Base, o.ConfigKey
	if snap != nil {
		if snap.Err != nil {
			return Allowlist{}, snap.Err
		}
		list, key = snap.Base()
	}
	base, err := ParseAllowlist(list)
	if err != nil {
		return Allowlist{}, fmt.Errorf("%s: %w", key, err)
	}
	c, err := readChange(o.Path(session))
	if err != nil {
		return Allowlist{}, err
	}
	add, err := ParseRules(c.Allow)
	if err != nil {
		return Allowlist{}, err
	}
	rm, err := ParseRules(c.Deny)
	if err != nil {
		return Allowlist{}, err
	}
	return base.With(add, rm), nil
}

// ParseRules parses each entry with ParseRule.
func ParseRules(entries []string) ([]Rule, error) { return rule.ParseAll(entries) }

// AllowFunc is a Proxy's Options.Allow for session: the allowlist in force, read again
// whenever the session's change file changes. An unreadable one allows nothing.
func (o Overrides) AllowFunc(session string) func() Allowlist {
	var mu sync.Mutex
	var stamp string
	var cur Allowlist
	path := o.Path(session)
	return func() Allowlist {
		st := "absent"
		if fi, err := os.Stat(path); err == nil {
			st = fmt.Sprintf("%d/%d/%s", fi.ModTime().UnixNano(), fi.Size(), fileID(fi))
		}
		snap := o.Live.Get()
		if snap != nil {
			st += fmt.Sprintf("/g%d", snap.Gen)
		}
		mu.Lock()
		defer mu.Unlock()
		if st != stamp {
			a, err := o.allowlist(session, snap)
			if err != nil && o.Logger != nil {
				o.Logger.Warn("egress allowlist unreadable; allowing nothing", "session", session, "err", err)
			}
			cur, stamp = a, st
		}
		return cur
	}
}

// Change adds allow to session's allowlist and removes deny from it (a denied host stays
// denied even where Base lists it), under a lock shared with other processes. Entries must
// have passed ParseRules. It returns the allowlist now in force.
func (o Overrides) Change(session string, allow, deny []string) ([]string, error) {
	if _, err := ParseRules(slices.Concat(allow, deny)); err != nil {
		return nil, err
	}
	path := o.Path(session)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	unlock, err := flock.Lock(path + ".lock")
	if err != nil {
		return nil, err
	}
	defer unlock()
	c, err := readChange(path)
	if err != nil {
		return nil, err
	}
	norm := func(s string) string { r, _ := ParseRule(s); return r.String() }
	for _, a := range allow {
		a = norm(a)
		c.Deny = slices.DeleteFunc(c.Deny, func(s string) bool { return s == a })
		if !slices.Contains(c.Allow, a) {
			c.Allow = append(c.Allow, a)
		}
	}
	for _, d := range deny {
		d = norm(d)
		c.Allow = slices.DeleteFunc(c.Allow, func(s string) bool { return s == d })
		if !slices.Contains(c.Deny, d) {
			c.Deny = append(c.Deny, d)
		}
	}
	data, _ := json.MarshalIndent(c, "", "  ")
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o600); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, path); err != nil {
		return nil, err
	}
	a, err := o.Allowlist(session)
	if err != nil {
		return nil, err
	}
	return a.Strings(), nil
}
