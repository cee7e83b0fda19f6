package cli_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hermes-sandbox/hermes-sandbox/internal/channel"
)

// stopOwners retires every session owner of a test's state directory and waits for them to
// exit, so none outlives its test.
func stopOwners(t *testing.T, stateDir string) {
	socks, _ := filepath.Glob(filepath.Join(stateDir, "hermes-sandbox", "owners", "*.sock"))
	for _, sock := range socks {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		r, err := channel.DialOwner(ctx, sock)
		cancel()
		if err != nil {
			continue
		}
		pid := r.Hello().PID
		_ = r.Retire()
		r.Close()
		deadline := time.Now().Add(30 * time.Second)
		for unix.Kill(pid, 0) == nil {
			if time.Now().After(deadline) {
				t.Errorf("session owner %d did not exit after it was retired", pid)
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}
