package sandbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// Records keeps what this machine remembers about each session, one small file per session
// (at Dir/<session><Ext>), so a later process can tell a sandbox that was lost (recreate it,
// and say so) from one that never existed. A record is written as JSON through
// WriteFileAtomic, so processes sharing the state directory never see a torn one, and its
// modification time is the session's last use (Touch). A corrupt record reads as absent,
// with a warning.
type Records[T any] struct {
	Dir string
	// Ext follows the session's name in its record's path: ".json", "" or "/instance" (a
	// file inside a per-session directory).
	Ext string
	// Legacy decodes a record written before records were JSON (one not starting with '{'),
	// so sessions survive an upgrade; nil means such a record is corrupt.
	Legacy func(data []byte) (T, bool)
	Logger *slog.Logger // nil discards
	// TouchEvery, when set, makes Touch mark a session used at most once per this interval
	// (by this process): a busy session then costs no write per command.
	TouchEvery time.Duration

	mu      sync.Mutex
	touched map[string]time.Time // guarded by mu; when Touch last marked each session
}

// RecordEntry is one session's record, as List returns it.
type RecordEntry[T any] struct {
	Session string
	Record  T
	Used    time.Time
}

// Path is where the session's record lives.
func (r *Records[T]) Path(session string) string { return filepath.Join(r.Dir, session+r.Ext) }

func (r *Records[T]) log() *slog.Logger {
	if r.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return r.Logger
}

// Read returns the session's record and its last use; ok is false when there is none (or it
// is corrupt).
func (r *Records[T]) Read(session string) (rec T, used time.Time, ok bool) {
	p := r.Path(session)
	data, err := os.ReadFile(p)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			r.log().Warn("session record unreadable", "session", session, "err", err)
		}
		return rec, used, false
	}
	if trimmed := bytes.TrimSpace(data); bytes.HasPrefix(trimmed, []byte("{")) {
		err = json.Unmarshal(trimmed, &rec)
		ok = err == nil
	} else if r.Legacy != nil {
		rec, ok = r.Legacy(data)
	}
	if !ok {
		var zero T
		if err == nil {
			err = errors.New("not a record of this backend")
		}
		r.log().Warn("session record is corrupt: treated as absent", "session", session, "path", p, "err", err)
		return zero, used, false
	}
	if fi, err := os.Stat(p); err == nil {
		used = fi.ModTime()
	}
	return rec, used, true
}

// Write replaces the session's record (and so marks it used now).
func (r *Records[T]) Write(session string, rec T) error {
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	p := r.Path(session)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	return WriteFileAtomic(p, data)
}

// Save is Write for callers to whom a lost record costs no more than a later
// environment_recreated report: a failure is logged.
func (r *Records[T]) Save(session string, rec T) {
	if err := r.Write(session, rec); err != nil {
		r.log().Warn("session record not written", "session", session, "err", err)
	}
}

// Touch marks the session used now (at most once per TouchEvery); a session without a
// record stays without one.
func (r *Records[T]) Touch(session string) {
	now := time.Now()
	if r.TouchEvery > 0 {
		r.mu.Lock()
		due := now.Sub(r.touched[session]) >= r.TouchEvery
		if due {
			if r.touched == nil {
				r.touched = map[string]time.Time{}
			}
			r.touched[session] = now
		}
		r.mu.Unlock()
		if !due {
			return
		}
	}
	if err := os.Chtimes(r.Path(session), now, now); err != nil && !errors.Is(err, os.ErrNotExist) {
		r.log().Debug("session record not touched", "session", session, "err", err)
	}
}

// Drop forgets the session; it reports whether there was a record.
func (r *Records[T]) Drop(session string) bool {
	r.mu.Lock()
	delete(r.touched, session)
	r.mu.Unlock()
	err := os.Remove(r.Path(session))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		r.log().Warn("session record not removed", "session", session, "err", err)
	}
	return err == nil
}

// List returns every readable record, by session name.
func (r *Records[T]) List() ([]RecordEntry[T], error) {
	entries, err := os.ReadDir(r.Dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	inDir, _, _ := strings.Cut(r.Ext, "/") // ".json" of ".json"; "" of "/instance"
	var out []RecordEntry[T]
	for _, e := range entries {
		session, ok := strings.CutSuffix(e.Name(), inDir)
		if !ok || ValidateSessionName(session) != nil {
			continue
		}
		if rec, used, ok := r.Read(session); ok {
			out = append(out, RecordEntry[T]{Session: session, Record: rec, Used: used})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Session < out[j].Session })
	return out, nil
}

// IDRecord is the record of a backend that remembers one id per session (a container's, a
// pod's UID, an instance's name).
type IDRecord struct {
	ID string `json:"id"`
}

// BareID reads an IDRecord's form before records were JSON: the id alone, on one line.
func BareID(data []byte) (IDRecord, bool) {
	id := strings.TrimSpace(string(data))
	return IDRecord{ID: id}, id != "" && !strings.ContainsAny(id, "\n\r")
}
