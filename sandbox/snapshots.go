package sandbox

import (
	"fmt"
	"log/slog"
	"sort"
	"time"
)

// SnapshotRecord is a backend's record of one snapshot it stored at a service (modal's
// images, vercel's snapshots); the record's name is the snapshot's id.
type SnapshotRecord struct {
	Session string    `json:"session"`
	Created time.Time `json:"created"`
	Size    int64     `json:"size,omitempty"`
	// ForkOf names the session a fork's snapshot was made for ("" = a snapshot asked for).
	ForkOf string `json:"fork,omitempty"`
}

// SnapshotRecords keeps a backend's SnapshotRecords in one directory of its state.
type SnapshotRecords struct {
	Records[SnapshotRecord]
	Backend string
}

// NewSnapshotRecords returns the records of backend's snapshots kept in dir.
func NewSnapshotRecords(backend, dir string, log *slog.Logger) *SnapshotRecords {
	return &SnapshotRecords{Records: Records[SnapshotRecord]{Dir: dir, Ext: ".json", Logger: log}, Backend: backend}
}

// Ref describes the snapshot id recorded as rec.
func (r *SnapshotRecords) Ref(id string, rec SnapshotRecord) SnapshotRef {
	return SnapshotRef{ID: id, Backend: r.Backend, Session: rec.Session, Created: rec.Created, Size: rec.Size}
}

// Lookup returns the record of snapshot id, if it is listed here. Ids are checked as session
// names are (the vendors' ids use the same alphabet), so no id reaches outside the directory.
func (r *SnapshotRecords) Lookup(id string) (SnapshotRecord, bool) {
	if ValidateSessionName(id) != nil {
		return SnapshotRecord{}, false
	}
	rec, _, ok := r.Read(id)
	return rec, ok
}

// Refs lists the recorded snapshots, oldest first.
func (r *SnapshotRecords) Refs() ([]SnapshotRef, error) {
	entries, err := r.List()
	if err != nil {
		return nil, err
	}
	out := make([]SnapshotRef, 0, len(entries))
	for _, e := range entries {
		out = append(out, r.Ref(e.Session, e.Record))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out, nil
}

// Snapshots is a backend's Snapshots over these records: oldest first, or why they cannot be
// read.
func (r *SnapshotRecords) Snapshots() ([]SnapshotRef, error) {
	out, err := r.Refs()
	if err != nil {
		return nil, &Error{Backend: r.Backend, Op: "snapshots", Err: err}
	}
	return out, nil
}

// Known returns the record of snapshot id for op (restore, snapshot rm), or an error wrapping
// ErrNotFound when it is not listed here.
func (r *SnapshotRecords) Known(op, id string) (SnapshotRecord, error) {
	rec, ok := r.Lookup(id)
	if !ok {
		return rec, &Error{Backend: r.Backend, Op: op, ID: id,
			Err: fmt.Errorf("no such snapshot here (sessions snapshots lists them): %w", ErrNotFound)}
	}
	return rec, nil
}
