//go:build unix

package modal

import "testing"

// FakeForCLI starts a fake Modal for tests in package modal_test (the CLI imports this
// package, so they cannot live inside it) and returns its URL and token, and a count of its
// running sandboxes.
func FakeForCLI(t testing.TB) (url, tokenID, tokenSecret string, running func() int) {
	f := newFake(t)
	return f.url(), f.tokenID, f.tokenSecret, func() int { return len(f.running()) }
}
