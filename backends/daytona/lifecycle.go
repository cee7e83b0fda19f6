package daytona

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// Sandbox states (the SandboxState enum of the control-plane document) grouped by what the
// backend does about them.
var (
	// statesStartable are asleep: a start wakes them with their files.
	statesStartable = map[string]bool{"stopped": true, "archived": true, "paused": true}
	// statesGone are on their way out: once deleted, a new sandbox is made.
	statesGone = map[string]bool{"destroyed": true, "destroying": true}
	// statesFailed need a person.
	statesFailed = map[string]bool{"error": true, "build_failed": true}
)

// ensure returns the session's sandbox in the started state: found by name, woken from
// stopped or archived, or created. recreated says a sandbox this session had before is gone
// and this one is new. knownID is the sandbox this process last used for the session.
func (b *Backend) ensure(ctx context.Context, session, knownID string) (sb sandboxInfo, recreated bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, b.extra.StateTimeout)
	defer cancel()
	name := b.sandboxName(session)
	_, _, hadRecord := b.records.Read(session)
	had := hadRecord || knownID != ""
	created := false
	last := ""
	for {
		sb, err = b.api.get(ctx, name)
		switch {
		case statusOf(err) == http.StatusNotFound:
			sb, err = b.create(ctx, session)
			if statusOf(err) == http.StatusConflict {
				// Made meanwhile by another process (or by someone else: checked below).
				b.log.Debug("create: name taken; looking again", "sandbox", name)
				if werr := b.pause(ctx, "sandbox "+name+" to appear"); werr != nil {
					return sb, false, werr
				}
				continue
			}
			if err != nil {
				return sb, false, b.apiErr("create", name, err)
			}
			created = true
			recreated = had
			b.log.Info("created sandbox", "sandbox", name, "id", sb.ID, "recreated", recreated)
		case err != nil:
			return sb, false, b.apiErr("get", name, err)
		}
		if !b.ours(sb, session) {
			return sb, false, &sandbox.Error{Backend: Name, Op: "open", ID: name, Err: sandbox.WithHint(sandbox.ErrDenied,
				fmt.Errorf("a sandbox named %s exists but this tool did not create it for this session here (its labels: %v)", name, sb.Labels),
				"it is never reused: delete or rename that sandbox in Daytona, or use another session name (--session)")}
		}
		if knownID != "" && sb.ID != knownID && !created {
			recreated = true
		}
		if sb.State != last {
			b.log.Debug("sandbox state", "sandbox", name, "state", sb.State)
			last = sb.State
		}
		switch {
		case sb.State == "started":
			rec, _, _ := b.records.Read(session)
			rec.ID = sb.ID
			b.records.Save(session, rec)
			return sb, recreated, nil
		case statesStartable[sb.State]:
			if _, err := b.api.action(ctx, sb.ID, "start"); err != nil && statusOf(err) != http.StatusConflict {
				return sb, false, b.apiErr("start", name, err)
			}
		case statesGone[sb.State]:
			// Wait until the name is free, then create anew.
		case statesFailed[sb.State]:
			return sb, false, &sandbox.Error{Backend: Name, Op: "start", ID: name, Err: sandbox.WithHint(sandbox.ErrUnavailable,
				fmt.Errorf("the sandbox is in state %s: %s", sb.State, orNone(sb.ErrorReason)),
				"remove it with `hermes-sandbox sessions rm "+session+"` and run again to get a new one")}
		}
		if err := b.pause(ctx, "sandbox "+name+" ("+sb.State+") to start"); err != nil {
			return sb, false, err
		}
	}
}

func orNone(s string) string {
	if s == "" {
		return "no reason given"
	}
	return s
}

// pause waits one poll interval, or fails with a clear message at the deadline.
func (b *Backend) pause(ctx context.Context, what string) error {
	select {
	case <-time.After(b.extra.PollInterval):
		return nil
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return &sandbox.Error{Backend: Name, Op: "wait", Err: fmt.Errorf("gave up waiting for %s after %s: %w", what, b.extra.StateTimeout, sandbox.ErrTimeout)}
		}
		return &sandbox.Error{Backend: Name, Op: "wait", Err: ctx.Err()}
	}
}

// create asks for the session's sandbox. Create is not retried blindly: a lost answer is
// settled by looking the name up (the name is unique), never by creating twice.
func (b *Backend) create(ctx context.Context, session string) (sandboxInfo, error) {
	return b.createFrom(ctx, session, "")
}

// createFrom is create with the sandbox made from snapshot (a session's snapshot, for
// Restore) instead of daytona.snapshot or daytona.image; "" means as configured.
func (b *Backend) createFrom(ctx context.Context, session, snapshot string) (sandboxInfo, error) {
	c := b.cfg
	body := createSandbox{
		Name:             b.sandboxName(session),
		Labels:           b.labels(session),
		NetworkBlockAll:  c.NetworkBlockAll,
		NetworkAllowList: strings.Join(c.NetworkAllowList, ","),
		Target:           c.Target,
		CPU:              c.CPU,
		Memory:           c.MemoryGiB,
		Disk:             c.DiskGiB,
		AutoStopInterval: minutesCeil(c.AutoStop),
		// Negative disables auto-delete; 0 would delete the sandbox the moment it stops.
		AutoDeleteInterval: -1,
		Snapshot:           c.Snapshot,
	}
	if c.AutoArchive > 0 {
		m := minutesCeil(c.AutoArchive)
		body.AutoArchiveInterval = &m
	}
	if c.AutoDelete > 0 {
		body.AutoDeleteInterval = minutesCeil(c.AutoDelete)
	}
	if snapshot != "" {
		body.Snapshot = snapshot
	} else if c.Image != "" {
		body.BuildInfo = &buildInfo{DockerfileContent: "FROM " + c.Image + "\n"}
	}
	sb, err := b.api.create(ctx, body)
	if err != nil && isNetErr(err) {
		// The request may or may not have reached the service: look, rather than create
		// a second sandbox.
		if got, gerr := b.api.get(ctx, body.Name); gerr == nil {
			return got, nil
		}
	}
	return sb, err
}

// minutesCeil rounds d up to whole minutes, at least 1: auto-stop is never sent as 0 (which
// Daytona reads as "never stop").
func minutesCeil(d time.Duration) int {
	return max(1, int((d+time.Minute-1)/time.Minute))
}

// stopAndWait stops a sandbox, waiting out a state change in progress.
func (b *Backend) stopSandbox(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, b.extra.StateTimeout)
	defer cancel()
	for {
		_, err := b.api.action(ctx, id, "stop")
		if statusOf(err) != http.StatusConflict {
			return b.apiErr("stop", id, err)
		}
		if err := b.pause(ctx, "sandbox "+id+" to finish changing state"); err != nil {
			return err
		}
	}
}

// deleteSandbox deletes a sandbox, waiting out a state change in progress. A sandbox already
// gone is not an error.
func (b *Backend) deleteSandbox(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, b.extra.StateTimeout)
	defer cancel()
	for {
		err := b.api.remove(ctx, id)
		switch statusOf(err) {
		case http.StatusNotFound:
			return nil
		case http.StatusConflict:
			if err := b.pause(ctx, "sandbox "+id+" to finish changing state"); err != nil {
				return err
			}
			continue
		}
		return b.apiErr("delete", id, err)
	}
}
