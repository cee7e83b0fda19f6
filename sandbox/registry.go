package sandbox

import (
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sort"
	"strings"

	"github.com/hermes-sandbox/hermes-sandbox/config"
)

// FactoryOptions is what a backend factory gets: the validated configuration and the process
// surroundings it may use.
type FactoryOptions struct {
	Config *config.Config
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

// Log returns the logger, or one that discards.
func (o FactoryOptions) Log() *slog.Logger {
	if o.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return o.Logger
}

// Factory builds a backend from the loaded configuration. It does no I/O that can hang; a
// backend reaches its engine or host in Open.
type Factory func(opts FactoryOptions) (Backend, error)

// Registry maps backend names to factories. Build it explicitly (see backends/all); a
// duplicate name panics.
type Registry struct {
	factories map[string]Factory
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{factories: map[string]Factory{}} }

// Register adds a backend factory. It panics on a duplicate or empty name.
func (r *Registry) Register(name string, f Factory) {
	if name == "" || f == nil {
		panic("sandbox: Register with empty name or nil factory")
	}
	if _, dup := r.factories[name]; dup {
		panic("sandbox: backend registered twice: " + name)
	}
	r.factories[name] = f
}

// Names lists the registered backends in order.
func (r *Registry) Names() []string {
	names := make([]string, 0, len(r.factories))
	for n := range r.factories {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Has reports whether name is registered.
func (r *Registry) Has(name string) bool { _, ok := r.factories[name]; return ok }

// New builds the named backend. An unknown name is an error that lists every valid name.
func (r *Registry) New(name string, opts FactoryOptions) (Backend, error) {
	f, ok := r.factories[name]
	if !ok {
		names := r.Names()
		return nil, fmt.Errorf("unknown backend %q: valid backends are %s: %w",
			name, strings.Join(names, ", "), ErrInvalidConfig)
	}
	return f(opts)
}

// ValidName reports whether name is one of the seven built-in backend names.
func ValidName(name string) bool { return slices.Contains(BuiltinNames, name) }

// BuiltinNames are the seven backends Hermes Sandbox ships, in the order the docs list them.
var BuiltinNames = []string{"local", "docker", "ssh", "singularity", "modal", "daytona", "vercel"}
