package local

import (
	"runtime"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// New refuses: Windows runs no local sessions (see unsupported).
func New(opts sandbox.FactoryOptions) (sandbox.Backend, error) { return nil, unsupported(runtime.GOOS) }

// NewWith refuses: Windows runs no local sessions (see unsupported).
func NewWith(sec Section, opts sandbox.FactoryOptions) (sandbox.Backend, error) {
	return nil, unsupported(runtime.GOOS)
}
