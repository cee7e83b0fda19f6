package ssh

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/hermes-sandbox/hermes-sandbox/internal/agent"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// helperStartError says the helper did not come up on its channel (not installed there,
// not executable, or it failed at once), as opposed to a connection problem.
type helperStartError struct {
	stderr string
	err    error
}

func (e *helperStartError) Error() string {
	if e.stderr != "" {
		return fmt.Sprintf("%v (stderr: %s)", e.err, e.stderr)
	}
	return e.err.Error()
}

func (e *helperStartError) Unwrap() error { return e.err }

// stateExpr is the session's remote state directory as a shell word. "$HOME" is expanded
// by the remote shell, so no probe is needed to learn the home directory.
func stateExpr(name string) string { return `"$HOME"/` + remoteSessions + "/" + name }

// startHelper runs the helper for session name on a new SSH channel. The command goes to
// the remote user's shell as `exec HELPER serve …` (no login or interactive shell); anything
// an rc file prints before the helper's greeting is skipped by agent.NewClient.
func (b *Backend) startHelper(ctx context.Context, h *host, name string, p *placement) (*agent.Client, error) {
	sess, release, err := h.newSession(ctx)
	if err != nil {
		return nil, err
	}
	stdin, err := sess.StdinPipe()
	if err != nil {
		sess.Close()
		release()
		return nil, err
	}
	stdout, err := sess.StdoutPipe()
	if err != nil {
		sess.Close()
		release()
		return nil, err
	}
	stderr := &sandbox.TailWriter{Max: 4 << 10}
	sess.Stderr = stderr
	// Bash reads ~/.bashrc even when not interactive if SSH_CLIENT is set and it is not
	// nested (Debian and others build it that way): the helper's bash commands would pay for
	// the rc file, and print its noise, on every command. Commands do not get SSH_CLIENT;
	// SSH_CONNECTION still says where the connection comes from.
	words := []string{"unset SSH_CLIENT SSH2_CLIENT;", "exec", p.pathExpr}
	for _, a := range p.args {
		words = append(words, shq(a))
	}
	words = append(words, "--state", stateExpr(name), "--cwd", shq(b.s.remoteCwd))
	if sh := b.s.shell; sh != "" && sh != "auto" {
		words = append(words, "--shell", shq(sh))
	}
	if err := sess.Start(strings.Join(words, " ")); err != nil {
		sess.Close()
		release()
		return nil, err
	}
	var once sync.Once
	closeFn := func() error {
		once.Do(func() {
			// Closing the channel (not just its stdin, which would race with a write in
			// progress) ends the helper's input; it then kills what it runs and exits.
			sess.Close()
			release()
		})
		return nil
	}
	c, err := agent.NewClient(ctx, stdout, stdin, closeFn)
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		return nil, &helperStartError{stderr: oneLine([]byte(stderr.String()), 500), err: err}
	}
	return c, nil
}
