//go:build unix

package vercel

import "testing"

// FakeAPI starts the fake Vercel API for tests outside the package (the CLI end-to-end
// test) and returns its URL and credentials.
func FakeAPI(t *testing.T) (url, token, team, project string) {
	s := newSetup(t)
	return s.f.url(), s.f.token, s.f.team, s.f.project
}
