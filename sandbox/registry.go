package sandbox

import (
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sort"
	"strings"
)

// FactoryOptions is what every backend factory gets besides its own config section: the
// settings of the terminal section that every backend honours, and the process
// surroundings it may use. The contract does not know the configuration's shape.
type FactoryOptions struct {
	// Shell is terminal.shell: auto, bash, sh or an absolute path ("" = auto).
	Shell string
	// Cwd is terminal.cwd, for backends whose commands run on this host ("" = unset).
	Cwd string
	// EnvPassthrough is terminal.env_passthrough: names whose values in Environ reach commands.
	EnvPassthrough []string
	// EgressAllow is terminal.egress_allow: the hosts commands may reach, for backends that
	// can enforce an allowlist (see EgressReporter).
	EgressAllow []string
	// Explicit reports whether the user set a configuration key (in a file, the environment or
	// a flag) rather than leaving its default; nil means nothing was set explicitly.
	Explicit func(key string) bool

	// Logger may be nil (discard).
	Logger *slog.Logger
	// Progress receives human progress output for long work (image pulls, uploads); may be nil.
	Progress io.Writer
	// Environ is the caller's environment (credentials, passthrough names); nil means none.
	Environ []string
	// StateDir is where host-side state lives (sessions, spill files).
	StateDir string
	// Ephemeral says this process removes the sessions it opens when it is done with them
	// (an MCP server without --keep-sessions). Backends record this process as their
	// sandboxes' owner, so that `gc` removes them if it dies first.
	Ephemeral bool
}

// Getenv looks a name up in Environ.
func (o FactoryOptions) Getenv(name string) (string, bool) {
	for i := len(o.Environ) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(o.Environ[i], "="); ok && k == name {
			return v, true
		}
	}
	return "", false
}

// IsExplicit reports whether the user set key; see Explicit.
func (o FactoryOptions) IsExplicit(key string) bool { return o.Explicit != nil && o.Explicit(key) }

// Passthrough returns NAME=VALUE for each name in extra and then in EnvPassthrough that
// Environ has, once each, in the order listed.
func (o FactoryOptions) Passthrough(extra ...string) []string {
	var out []string
	seen := map[string]bool{}
	for _, n := range slices.Concat(extra, o.EnvPassthrough) {
		if v, ok := o.Getenv(n); ok && !seen[n] {
			seen[n] = true
			out = append(out, n+"="+v)
		}
	}
	return out
}

// PassthroughMap is Passthrough as a map of NAME to VALUE.
func (o FactoryOptions) PassthroughMap() map[string]string {
	env := map[string]string{}
	for _, kv := range o.Passthrough() {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	return env
}

// RemoteCwd is where commands start in a remote sandbox: terminal.cwd when the user set
// an absolute one (a local path means nothing there), else def.
func (o FactoryOptions) RemoteCwd(def string) string {
	if o.IsExplicit("terminal.cwd") && strings.HasPrefix(o.Cwd, "/") {
		return o.Cwd
	}
	return def
}

// Log returns the logger, or one that discards.
func (o FactoryOptions) Log() *slog.Logger {
	if o.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return o.Logger
}

// AsBackend returns b as a Backend, or a nil Backend (not one holding a nil B) with err:
// a backend's New is `return sandbox.AsBackend(NewWith(cfg, opts, Options{}))`.
func AsBackend[B Backend](b B, err error) (Backend, error) {
	if err != nil {
		return nil, err
	}
	return b, nil
}

// CheckOpen is what a backend's Open checks first, in order: the session's name, that the
// backend is not closed, then validate (nil: nothing more). Its error is backend's "open NAME".
func CheckOpen(backend, name string, closed bool, validate func() error) error {
	err := ValidateSessionName(name)
	if err == nil && closed {
		err = ErrClosed
	}
	if err == nil && validate != nil {
		err = validate()
	}
	if err != nil {
		return &Error{Backend: backend, Op: "open", ID: name, Err: err}
	}
	return nil
}

// Factory builds a backend from the whole configuration C (the caller's type; the contract
// does not import it). A backend's own constructor takes only its typed section, and its
// one-line registration (see backends/all) picks the section out. A factory does no I/O
// that can hang; a backend reaches its engine or host in Open.
type Factory[C any] func(cfg C, opts FactoryOptions) (Backend, error)

// Registry maps backend names to factories. Build it explicitly (see backends/all); a
// duplicate name panics.
type Registry[C any] struct {
	factories map[string]Factory[C]
}

// NewRegistry returns an empty registry.
func NewRegistry[C any]() *Registry[C] { return &Registry[C]{factories: map[string]Factory[C]{}} }

// Register adds a backend factory. It panics on a duplicate or empty name.
func (r *Registry[C]) Register(name string, f Factory[C]) {
	if name == "" || f == nil {
		panic("sandbox: Register with empty name or nil factory")
	}
	if _, dup := r.factories[name]; dup {
		panic("sandbox: backend registered twice: " + name)
	}
	r.factories[name] = f
}

// Names lists the registered backends in order.
func (r *Registry[C]) Names() []string {
	names := make([]string, 0, len(r.factories))
	for n := range r.factories {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Has reports whether name is registered.
func (r *Registry[C]) Has(name string) bool { _, ok := r.factories[name]; return ok }

// New builds the named backend. An unknown name is an error that lists every valid name.
func (r *Registry[C]) New(name string, cfg C, opts FactoryOptions) (Backend, error) {
	f, ok := r.factories[name]
	if !ok {
		names := r.Names()
		return nil, fmt.Errorf("unknown backend %q: valid backends are %s: %w",
			name, strings.Join(names, ", "), ErrInvalidConfig)
	}
	return f(cfg, opts)
}

// ValidName reports whether name is one of the seven built-in backend names.
func ValidName(name string) bool { return slices.Contains(BuiltinNames, name) }

// BuiltinNames are the backends Hermes Sandbox ships, in the order the docs list them.
var BuiltinNames = []string{"local", "docker", "ssh", "singularity", "modal", "daytona", "vercel", "kubernetes"}
