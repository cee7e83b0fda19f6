package config

import "github.com/hermes-sandbox/hermes-sandbox/sandbox"

// BackendOptions returns base with what every backend factory takes from the configuration
// besides its own section: the terminal section's shell, cwd and env_passthrough, and which
// keys the user set explicitly.
func (c *Config) BackendOptions(base sandbox.FactoryOptions) sandbox.FactoryOptions {
	base.Shell = string(c.Terminal.Shell)
	base.Cwd = c.Terminal.Cwd
	base.EnvPassthrough = c.Terminal.EnvPassthrough
	base.EgressAllow = c.Terminal.EgressAllow
	base.Explicit = func(key string) bool { return c.Source(key) != SourceDefault }
	return base
}
