package sandbox

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestReap(t *testing.T) {
	now := time.Now()
	self := ProcessOwner()
	parts := strings.Split(self, "/")
	gone := strings.Join(parts[:3], "/") + "/1" // this pid, started at another time: gone
	if alive, known := OwnerAlive(gone); alive || !known {
		t.Skipf("OwnerAlive(%q) = %v, %v: process owners cannot be checked here", gone, alive, known)
	}
	var removed []string
	rm := func(name string, err error) func(context.Context) error {
		return func(context.Context) error { removed = append(removed, name); return err }
	}
	busy := func(reason string, err error) func(context.Context) (string, error) {
		return func(context.Context) (string, error) { return reason, err }
	}
	boom := errors.New("boom")
	cands := []GCCandidate{
		{Name: "failed", Reap: "state error", LastUsed: now, Remove: rm("failed", nil)},
		{Name: "pool", Keep: "warm pool", LastUsed: now.Add(-time.Hour), Remove: rm("pool", nil)},
		{Name: "owned", Owner: self, LastUsed: now.Add(-time.Hour), Remove: rm("owned", nil)},
		{Name: "orphan", Owner: gone, LastUsed: now, Remove: rm("orphan", nil)},
		{Name: "unknown", Remove: rm("unknown", nil)},
		{Name: "recent", LastUsed: now.Add(-time.Minute), Remove: rm("recent", nil)},
		{Name: "busy", LastUsed: now.Add(-time.Hour), Busy: busy("a job runs", nil), Remove: rm("busy", nil)},
		{Name: "unasked", LastUsed: now.Add(-time.Hour), Busy: busy("", boom), Remove: rm("unasked", nil)},
		{Name: "broken", LastUsed: now.Add(-time.Hour), Remove: rm("broken", boom)},
		{Name: "idle", LastUsed: now.Add(-time.Hour), Note: "; files kept", Busy: busy("", nil),
			Also: []GCItem{{Kind: "volume", Name: "idle-ws"}}, Remove: rm("idle", nil)},
	}
	rep, err := Reap(t.Context(), cands, GCOptions{}, 10*time.Minute, "x.idle_timeout")
	if !errors.Is(err, boom) {
		t.Errorf("Reap() error = %v; want boom", err)
	}
	names := func(items []GCItem) string {
		var s []string
		for _, it := range items {
			s = append(s, it.Name)
		}
		return strings.Join(s, ",")
	}
	for _, tt := range []struct{ what, got, want string }{
		{"removed", names(rep.Removed), "failed,orphan,idle,idle-ws"},
		{"kept", names(rep.Kept), "pool,owned,unknown,recent,busy"},
		{"failed", names(rep.Failed), "unasked,broken"},
		{"remove calls", strings.Join(removed, ","), "failed,orphan,broken,idle"},
	} {
		if tt.got != tt.want {
			t.Errorf("Reap: %s = %s; want %s", tt.what, tt.got, tt.want)
		}
	}
	for _, it := range append(append(rep.Removed, rep.Kept...), rep.Failed...) {
		if it.Name != "idle-ws" && it.Reason == "" {
			t.Errorf("Reap: %s has no reason", it.Name)
		}
	}
	if r := rep.Removed[2].Reason; !strings.Contains(r, "x.idle_timeout 10m0s") || !strings.HasSuffix(r, "; files kept") {
		t.Errorf("idle reason = %q; want the setting and the note", r)
	}
	if r := rep.Failed[1].Reason; r != "boom" {
		t.Errorf("failed reason = %q; want the error", r)
	}

	// A dry run removes nothing and reports the same; --idle overrides the default, and no
	// idle timeout at all keeps the idle.
	removed = nil
	dry, err := Reap(t.Context(), cands, GCOptions{DryRun: true, IdleTimeout: 2 * time.Hour}, 10*time.Minute, "x.idle_timeout")
	if len(removed) != 0 || names(dry.Removed) != "failed,orphan" || err != nil {
		t.Errorf("dry run with --idle 2h: removed %v, reported %s, %v; want nothing removed, failed and orphan reported, no error", removed, names(dry.Removed), err)
	}
	none, _ := Reap(t.Context(), cands[9:], GCOptions{}, 0, "")
	if len(none.Removed) != 0 || len(none.Kept) != 1 || !strings.Contains(none.Kept[0].Reason, "--idle") {
		t.Errorf("Reap without an idle timeout = %+v; want idle kept, saying --idle", none)
	}
}
