package audit

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// ErrExists: Init found a log and was not asked to rotate it.
var ErrExists = errors.New("an audit log already exists")

// InitResult is what Init made.
type InitResult struct {
	Path  string
	LogID string
	// Key is the verification key. It exists only here: Init writes it
	// nowhere, so the caller shows it once and drops it.
	Key string
	// Archived is where the previous log went (with Rotate), or "".
	Archived string
	// Warning says what went wrong closing the previous log, if anything.
	Warning string
}

// InitOptions configure Init.
type InitOptions struct {
	// Rotate archives an existing log, closed with a final record and seal,
	// instead of refusing.
	Rotate bool
	// Now stamps records; nil means time.Now.
	Now func() time.Time
	// Lost says why a sealed log is being made anew (the previous one or its state was
	// found missing); it goes into the new log's first record, so the loss stays on record.
	Lost string
}

// Init creates a sealed log at path: a first record naming the log's id,
// MACed under key_1, and the sealing state holding key_2. It returns the
// verification key key_0, which it never writes anywhere.
func Init(path string, opts InitOptions) (InitResult, error) {
	res := InitResult{Path: path}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	l, err := Open(path, Options{Now: now})
	if err != nil {
		return res, err
	}
	defer l.Close()
	if err := l.acquire(); err != nil {
		return res, fmt.Errorf("audit: init %s: %w", path, err)
	}
	defer unlockFile(l.lock)

	exists, err := l.exists()
	if err != nil {
		return res, fmt.Errorf("audit: init: %w", err)
	}
	if exists {
		if !opts.Rotate {
			return res, fmt.Errorf("audit: init %s: %w (pass --rotate to close it with a final seal, archive it and start a new sealed log)", path, ErrExists)
		}
		if res.Archived, res.Warning, err = l.archive(now()); err != nil {
			return res, err
		}
	}

	key0 := make([]byte, keySize)
	if _, err := rand.Read(key0); err != nil {
		return res, fmt.Errorf("audit: init: %w", err)
	}
	defer clear(key0)
	res.LogID, res.Key = logID(key0), FormatKey(key0)
	k1 := evolve(key0)
	defer clear(k1)

	reason := "sealed log created; verify it with `hermes-sandbox audit verify --key KEY`"
	if opts.Lost != "" {
		reason = "sealed log created after a loss: " + opts.Lost + "; " + reason
	}
	header := prepare(Record{Tool: ToolAudit, Decision: DecisionLogSealed, Log: res.LogID,
		Reason: reason}, l.level, l.redact, now)
	header.Seq, header.PrevHash = 1, GenesisHash
	prefix, hash, err := canonical(header)
	if err != nil {
		return res, err
	}
	sl := &sealer{log: res.LogID, next: k1, seq: 1}
	mac, err := sl.mac(1, hash)
	if err != nil {
		return res, err
	}
	defer clear(sl.next)
	line := append(splice(prefix, mac, hash), '\n')
	if err := l.f.Truncate(0); err != nil { // an empty file left by an unsealed Open
		return res, fmt.Errorf("audit: init: %w", err)
	}
	if _, err := l.f.Write(line); err != nil {
		return res, fmt.Errorf("audit: init %s: %w", path, err)
	}
	if err := l.f.Sync(); err != nil {
		return res, fmt.Errorf("audit: init %s: %w", path, err)
	}
	if err := createState(l.sealPath, sl.state(1, hash)); err != nil {
		return res, fmt.Errorf("audit: init: %w", err)
	}
	os.Remove(l.cpPath)
	syncDir(filepath.Dir(path))
	return res, nil
}

// exists reports whether the log holds anything or has a sealing state.
func (l *Log) exists() (bool, error) {
	fi, err := l.f.Stat()
	if err != nil {
		return false, err
	}
	if fi.Size() > 0 {
		return true, nil
	}
	_, err = os.Stat(l.sealPath)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// archive closes the log with a last record and a final seal (its key
// erased), and moves it and its state aside. The lock is held. A log that
// cannot take the last record (its state is gone or broken) is archived as
// it is, with a warning.
func (l *Log) archive(now time.Time) (archived, warning string, err error) {
	closing := prepare(Record{Tool: ToolAudit, Decision: DecisionLogClosed,
		Reason: "log rotated by `hermes-sandbox audit init --rotate`"}, l.level, l.redact, func() time.Time { return now })
	req := []*request{{rec: closing}}
	seqs, errs := make([]int64, 1), make([]error, 1)
	fail := func(err error) ([]int64, []error) { errs[0] = err; return seqs, errs }
	if _, errs := l.commitLocked(context.Background(), req, seqs, errs, fail); errs[0] != nil {
		warning = "the previous log could not take its closing record: " + errs[0].Error()
	} else if sf, st, err := openState(l.sealPath); err == nil && st != nil {
		st.Key, st.Closed = "", true
		if err := sf.write(*st); err != nil {
			warning = "the previous log's final seal could not be written: " + err.Error()
		}
		sf.close()
	}

	base := l.path + "." + now.UTC().Format("20060102T150405Z")
	archived = base
	for i := 2; ; i++ {
		if _, err := os.Lstat(archived); errors.Is(err, fs.ErrNotExist) {
			break
		}
		archived = fmt.Sprintf("%s-%d", base, i)
	}
	if err := os.Rename(l.path, archived); err != nil {
		return "", warning, fmt.Errorf("audit: init --rotate: %w", err)
	}
	for _, ext := range []string{".seal", ".checkpoint"} {
		if err := os.Rename(l.path+ext, archived+ext); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return archived, warning, fmt.Errorf("audit: init --rotate: %w", err)
		}
	}
	f, err := openPrivate(l.path, os.O_RDWR|os.O_APPEND|os.O_CREATE)
	if err != nil {
		return archived, warning, err
	}
	l.f.Close()
	l.f = f
	return archived, warning, nil
}

// syncDir makes renames and creations in dir durable, as far as it can.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}
