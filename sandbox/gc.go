package sandbox

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// GCCandidate is one thing a backend's Collect may remove, described for Reap.
type GCCandidate struct {
	Kind, Name string
	// Reap, when set, says why the backend's own state condemns it whatever its idle time
	// (it failed or ended, no session of this state directory uses it).
	Reap string
	// Keep, when set, says why it stays whatever its idle time (a warm pool, another owner's).
	Keep string
	// Owner is the process that removes the session when done (ProcessOwner's form), if any:
	// while it runs the candidate stays, once it is gone the candidate goes.
	Owner string
	// LastUsed is the backend's idle clock (config's package doc lists each one). Zero means
	// unknown: the candidate is kept.
	LastUsed time.Time
	// Busy, if set, is asked before an idle candidate goes: a reason keeps it.
	Busy func(ctx context.Context) (reason string, err error)
	// Note is added to the reason when it goes for being idle ("; its workspace stays").
	Note string
	// Also lists what goes with it (a container's volumes), reported removed after it.
	Also []GCItem
	// Remove removes it; a dry run never calls it.
	Remove func(ctx context.Context) error
}

// Reap is the one gc decision. The idle timeout is opts.IdleTimeout, else def (setting names
// where def comes from, "docker.idle_timeout"; "" when the backend has none); 0 keeps idle
// candidates. In order: a Reap reason removes, a Keep reason keeps, a live Owner keeps and a
// gone one removes, then an unknown last use, a recent one or a Busy reason keeps, and
// anything else, idle past the timeout, goes. With opts.OwnerGoneOnly only a gone Owner
// removes, and everything else stays. A failed removal is reported in Failed and
// joined into the error, and the others go on.
func Reap(ctx context.Context, cands []GCCandidate, opts GCOptions, def time.Duration, setting string) (GCReport, error) {
	idle, source := def, setting+" "+def.String()
	if opts.IdleTimeout > 0 {
		idle, source = opts.IdleTimeout, "--idle "+opts.IdleTimeout.String()
	}
	var rep GCReport
	var errs []error
	now := time.Now()
	for _, c := range cands {
		var reason string
		var keep bool
		var err error
		if opts.OwnerGoneOnly {
			reason, keep, err = decideOwnerGone(c)
		} else {
			reason, keep, err = decide(ctx, c, now, idle, source, setting)
		}
		switch {
		case err == nil && !keep && !opts.DryRun && c.Remove != nil:
			err = c.Remove(ctx)
		case err == nil && keep:
			rep.Kept = append(rep.Kept, GCItem{Kind: c.Kind, Name: c.Name, Reason: reason})
			continue
		}
		if err != nil {
			errs = append(errs, err)
			rep.Failed = append(rep.Failed, GCItem{Kind: c.Kind, Name: c.Name, Reason: err.Error()})
			continue
		}
		rep.Removed = append(rep.Removed, GCItem{Kind: c.Kind, Name: c.Name, Reason: reason})
		rep.Removed = append(rep.Removed, c.Also...)
	}
	return rep, errors.Join(errs...)
}

// decideOwnerGone says whether c goes in a sweep of what owner processes that are gone left.
func decideOwnerGone(c GCCandidate) (reason string, keep bool, err error) {
	if alive, known := OwnerAlive(c.Owner); known && !alive {
		return fmt.Sprintf("its owner (process %s) is gone, and it removes its sessions when done", c.Owner), false, nil
	}
	return "not left by a process that is gone", true, nil
}

// decide says whether c goes, and why.
func decide(ctx context.Context, c GCCandidate, now time.Time, idle time.Duration, source, setting string) (reason string, keep bool, err error) {
	alive, known := OwnerAlive(c.Owner)
	idleFor := now.Sub(c.LastUsed).Round(time.Second)
	switch {
	case c.Reap != "":
		return c.Reap, false, nil
	case c.Keep != "":
		return c.Keep, true, nil
	case known && !alive:
		return fmt.Sprintf("its owner (process %s) is gone, and it removes its sessions when done", c.Owner), false, nil
	case known:
		return fmt.Sprintf("its owner (process %s) still runs", c.Owner), true, nil
	case idle <= 0 && setting != "":
		return "no idle timeout (" + setting + " is 0)", true, nil
	case idle <= 0:
		return "no idle timeout given (--idle DURATION)", true, nil
	case c.LastUsed.IsZero():
		return "its last use is unknown", true, nil
	case now.Sub(c.LastUsed) <= idle:
		return fmt.Sprintf("used %s ago", idleFor), true, nil
	}
	if c.Busy != nil {
		busy, err := c.Busy(ctx)
		if err != nil || busy != "" {
			return busy, true, err
		}
	}
	return fmt.Sprintf("idle for %s (%s)%s", idleFor, source, c.Note), false, nil
}
