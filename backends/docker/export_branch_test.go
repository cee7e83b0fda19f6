//go:build unix

package docker

import (
	"testing"

	"github.com/hermes-sandbox/hermes-sandbox/config"
)

// For the external tests (cli_branch_test.go), which cannot be in this package: they import
// the CLI, which imports this package.
var (
	TestImageForCLI   = testImage
	TestEnvironForCLI = testEnviron
	SnapshotIDForCLI  = snapshotID
)

// CleanStateForCLI removes, when the test ends, whatever a process using the state directory
// made on the engine (cleanScope of a backend on it).
func CleanStateForCLI(t *testing.T, state, img string) {
	newBackendWith(t, state, func(c *config.Config) { c.Docker.Image = img })
}
