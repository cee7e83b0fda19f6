//go:build unix

package docker

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/hermes-sandbox/hermes-sandbox/config"
)

// waitOnlyPool polls, with a deadline, until b's scope holds no container but pool members.
func waitOnlyPool(t *testing.T, b *Backend) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var left []string
		for _, n := range containerNames(t, b) {
			if !strings.HasPrefix(n, "hermes-pool-") {
				left = append(left, n)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("ephemeral sandboxes left after their sessions closed: %v", left)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestPoolEphemeralSessionsLeaveNothing: more ephemeral sessions at once than the pool holds
// (each gets a member as it is, one coming back from a reset, or a container of its own,
// whichever comes first), and closing them leaves no container but the pool's; Close leaves
// none.
func TestPoolEphemeralSessionsLeaveNothing(t *testing.T) {
	b := newBackend(t, func(c *config.Config) { c.Docker.PoolSize = 1 })
	if err := b.Prewarm(ctxT(t, 2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	const n = 6
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := b.OpenEphemeral(ctxT(t, time.Minute), fmt.Sprintf("eph-%d", i))
			if err != nil {
				errs <- err
				return
			}
			defer s.Close()
			if res := run(t, s, "echo ok"); res.Stdout != "ok\n" {
				errs <- fmt.Errorf("session %d: %+v", i, res)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	waitOnlyPool(t, b)
	b.Close()
	if left := containerNames(t, b); len(left) != 0 {
		t.Errorf("after Close: %v; want nothing", left)
	}
}

// TestPoolEphemeralRenamedIsRemoved: an ephemeral session's own container is removed when the
// session closes even when its name no longer finds it (renamed behind the session's back):
// the backend removes what the session made by id.
func TestPoolEphemeralRenamedIsRemoved(t *testing.T) {
	b := newBackend(t, nil)
	s, err := b.OpenEphemeral(ctxT(t, time.Minute), "eph-renamed")
	if err != nil {
		t.Fatal(err)
	}
	if res := run(t, s, "echo ok"); res.Stdout != "ok\n" {
		t.Fatalf("run: %+v", res)
	}
	other := b.containerName("eph-renamed") + "-moved"
	if _, err := b.cli.ContainerRename(ctxT(t, 30*time.Second), b.containerName("eph-renamed"), client.ContainerRenameOptions{NewName: other}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	waitOnlyPool(t, b)
}
