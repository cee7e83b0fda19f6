package daytona

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/agentbin"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// Check tells quickly whether daytona sessions can run here: a key is configured, the
// control plane answers at daytona.api_url and accepts the key, and a helper binary exists
// to upload.
func (b *Backend) Check(ctx context.Context) error {
	if err := b.validate(); err != nil {
		return &sandbox.Error{Backend: Name, Op: "check", Err: err}
	}
	if _, err := url.Parse(b.apiURL); err != nil {
		return &sandbox.Error{Backend: Name, Op: "check", Err: fmt.Errorf("daytona.api_url %q: %v: %w", b.apiURL, err, sandbox.ErrInvalidConfig)}
	}
	var page listSandboxes
	if err := b.api.call(ctx, "GET", "/sandbox", true, nil, &page, url.Values{"limit": {"1"}}); err != nil {
		return b.apiErr("check", b.apiURL, err)
	}
	if _, _, err := agentbin.Path("amd64"); err != nil && b.cfg.Channel != config.DaytonaChannelSession {
		return &sandbox.Error{Backend: Name, Op: "check", Err: fmt.Errorf("%v: %w", err, sandbox.ErrUnavailable)}
	}
	return nil
}

// Warnings lists settings that weaken isolation or leave sandboxes running.
func (b *Backend) Warnings() []string {
	var w []string
	if !b.cfg.NetworkBlockAll {
		w = append(w, "daytona.network_block_all is false: commands can reach the network")
	}
	if b.cfg.AutoStop > 24*time.Hour {
		w = append(w, fmt.Sprintf("daytona.auto_stop is %s: an idle sandbox keeps running (and costing) that long", b.cfg.AutoStop))
	}
	if fb, why := b.sessionsOnly(); fb && b.cfg.Channel != config.DaytonaChannelSession {
		w = append(w, "daytona: the sandbox helper cannot run ("+why+"); each command runs in a toolbox process session of its own: slower, no background jobs "+
			"or terminal, stdin uploaded before the command")
	}
	if len(b.opts.EnvPassthrough) > 0 {
		w = append(w, fmt.Sprintf("terminal.env_passthrough sends %v from this machine into Daytona sandboxes", b.opts.EnvPassthrough))
	}
	return w
}

// Baseline runs `true` n times the raw way, one toolbox /process/execute per command, in the
// named session's sandbox (which must be started).
func (b *Backend) Baseline(ctx context.Context, session string, n int) (string, []time.Duration, error) {
	sb, err := b.api.get(ctx, b.sandboxName(session))
	if err != nil {
		return "", nil, b.apiErr("baseline", session, err)
	}
	tb := b.api.toolbox(sb)
	ds := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		t := time.Now()
		res, err := tb.execute(ctx, "true", "", 30*time.Second)
		if err != nil {
			return "", nil, b.apiErr("baseline", session, err)
		}
		if res.ExitCode != 0 {
			return "", nil, &sandbox.Error{Backend: Name, Op: "baseline", ID: session, Err: fmt.Errorf("`true` exited %d", res.ExitCode)}
		}
		ds = append(ds, time.Since(t))
	}
	return "one toolbox /process/execute per command", ds, nil
}
