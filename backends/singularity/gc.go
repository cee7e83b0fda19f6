//go:build !windows

package singularity

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/internal/agent"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// cacheGrace is how old an unused SIF file in the cache must be before Collect removes it,
// so that an image pulled a moment ago survives until singularity.image names it.
const cacheGrace = time.Hour

// Collect stops this state directory's instances idle longer than opts.IdleTimeout (there is
// no configured default: without one, instances are kept) by their record's last use, that
// have no helper attached and no background job running; their workspaces stay, and the next
// command starts the instance again and reports environment_recreated. It also removes SIF
// files in the image cache that neither singularity.image nor a running instance uses (made
// more than an hour ago), and conversions left unfinished by processes that are gone.
func (b *Backend) Collect(ctx context.Context, opts sandbox.GCOptions) (sandbox.GCReport, error) {
	list, err := b.instances(ctx)
	if err != nil {
		return sandbox.GCReport{}, wrap("gc", "", err)
	}
	inUse := map[string]bool{}
	var cands []sandbox.GCCandidate
	for _, inst := range list {
		inUse[inst.Image] = true
		session, name := b.sessionOf(inst.Instance), inst.Instance
		if session == "" {
			continue
		}
		_, used, _ := b.records.Read(session)
		cands = append(cands, sandbox.GCCandidate{Kind: "instance", Name: name, LastUsed: used, Note: "; its workspace stays",
			Busy: func(ctx context.Context) (string, error) {
				if b.attached(session) {
					return "a helper is attached", nil
				}
				busy, err := b.jobsRunning(ctx, session)
				if err != nil || !busy {
					return "", wrap("gc", name, err)
				}
				return "a background job is running", nil
			},
			Remove: func(ctx context.Context) error { return wrap("gc", name, b.stop(ctx, name)) }})
	}
	rep, err := sandbox.Reap(ctx, cands, opts, 0, "")
	errs := []error{err}
	if !opts.OwnerGoneOnly { // a sweep of what gone processes left keeps the cache
		b.collectCache(time.Now(), inUse, opts.DryRun, &rep, &errs)
	}
	return rep, errors.Join(errs...)
}

// collectCache removes unused SIF files and unfinished conversions from the image cache.
func (b *Backend) collectCache(now time.Time, inUse map[string]bool, dryRun bool, rep *sandbox.GCReport, errs *[]error) {
	entries, err := os.ReadDir(b.cacheDir())
	if err != nil {
		if !os.IsNotExist(err) {
			*errs = append(*errs, wrap("gc", b.cacheDir(), err))
		}
		return
	}
	for _, e := range entries {
		p := filepath.Join(b.cacheDir(), e.Name())
		fi, err := e.Info()
		if err != nil || e.IsDir() || !strings.HasSuffix(e.Name(), ".sif") {
			continue
		}
		item := sandbox.GCItem{Kind: "image", Name: p}
		if pid, ok := partialPID(e.Name()); ok {
			if processAlive(pid) {
				continue
			}
			item.Reason = "unfinished conversion of a process that is gone"
		} else {
			switch {
			case p == b.configuredSIF():
				item.Reason = "singularity.image uses it"
			case inUse[p]:
				item.Reason = "a running instance uses it"
			case now.Sub(fi.ModTime()) < cacheGrace:
				item.Reason = fmt.Sprintf("made %s ago", now.Sub(fi.ModTime()).Round(time.Second))
			}
			if item.Reason != "" {
				rep.Kept = append(rep.Kept, item)
				continue
			}
			item.Reason = "neither singularity.image nor a running instance uses it"
		}
		if !dryRun {
			if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
				*errs = append(*errs, wrap("gc", p, err))
				continue
			}
		}
		rep.Removed = append(rep.Removed, item)
	}
}

// partialPID returns the process id in an unfinished conversion's name.
func partialPID(name string) (int, bool) {
	i := strings.LastIndex(name, partialInfix)
	if i < 0 {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSuffix(name[i+len(partialInfix):], ".sif"))
	return pid, err == nil && pid > 0
}

func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// attachedPath is locked (shared) by every process whose helper is attached to the session.
func (b *Backend) attachedPath(session string) string {
	return filepath.Join(b.sessionDir(session), "attached")
}

// lockAttached takes the session's shared attachment lock; closing the file releases it.
func (b *Backend) lockAttached(session string) (*os.File, error) {
	f, err := os.OpenFile(b.attachedPath(session), os.O_CREATE|os.O_RDONLY, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// attached reports whether any process has a helper attached to the session.
func (b *Backend) attached(session string) bool {
	f, err := os.Open(b.attachedPath(session))
	if err != nil {
		return false
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return true
	}
	syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}

// jobsRunning asks a helper in the session's instance whether a background job runs.
func (b *Backend) jobsRunning(ctx context.Context, session string) (bool, error) {
	client, _, err := b.startHelper(ctx, session)
	if err != nil {
		return false, err
	}
	defer client.Close()
	var jobs []agent.JobInfo
	if err := client.Call(ctx, agent.CallRequest{Op: "job_list"}, &jobs, nil, nil); err != nil {
		return false, err
	}
	for _, j := range jobs {
		if j.Running {
			return true, nil
		}
	}
	return false, nil
}
