//go:build !embedhelpers

package agentbin

// embeddedHelper is the helper for arch that this build carries: none (only make dist's
// release builds, tag embedhelpers, embed them).
func embeddedHelper(string) []byte { return nil }
