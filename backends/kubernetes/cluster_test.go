package kubernetes

import (
	"testing"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv"
)

// TestFirstCommand: a session's first command makes a pod, uploads the helper and runs.
func TestFirstCommand(t *testing.T) {
	c := newCluster(t)
	b := c.backend(t, "", nil)
	sess := testenv.Open(t, b, "first")
	start := time.Now()
	res := testenv.Run(t, sess, "echo hi; id -u; pwd")
	t.Logf("first command took %s", time.Since(start))
	if res.Stdout != "hi\n1000\n/workspace\n" {
		t.Errorf("stdout = %q", res.Stdout)
	}
}
