package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// Log appends records to one audit file. It is safe for concurrent use by
// many goroutines, and several processes may append to the same file: an
// exclusive flock on <path>.lock serialises them.
//
// Concurrent Appends in one process are group-committed: while one caller
// (the leader) writes and fsyncs a batch, others queue, and the next leader
// writes the whole queue with one write and one fsync. No goroutine is
// started; Close waits for the batch in flight.
type Log struct {
	path, lockPath, cpPath, sealPath string

	level       Level
	redact      func(string) string
	now         func() time.Time
	logger      *slog.Logger
	onFailure   OnFailure
	lockTimeout time.Duration
	witness     *Witness

	mu       sync.Mutex
	idle     *sync.Cond // broadcast when flushing ends
	queue    []*request // guarded by mu
	flushing bool       // guarded by mu; a leader owns f, lock and buf
	closed   bool       // guarded by mu

	f    *os.File // owned by the flushing leader (flushing, under mu)
	lock *os.File // owned by the flushing leader
	buf  []byte   // owned by the flushing leader
}

type request struct {
	rec  Record
	done chan result // buffered 1
}

// result either completes a request or hands it the leadership.
type result struct {
	seq  int64
	err  error
	lead bool
}

// Checkpoint is the state recorded outside the log after each commit.
type Checkpoint struct {
	Count    int64     `json:"count"` // seq of the last record committed
	LastHash string    `json:"last_hash"`
	Updated  time.Time `json:"updated"`
}

var _ Sink = (*Log)(nil)

// Open opens (creating if needed) the audit log at path: the directory with
// mode 0700, the log and its lock file with 0600. With LevelOff it touches
// nothing and returns a Log whose Append does nothing.
func Open(path string, opts Options) (*Log, error) {
	level := opts.Level
	if level == "" {
		level = LevelFull
	}
	if _, err := ParseLevel(string(level)); err != nil {
		return nil, err
	}
	onFailure := opts.OnFailure
	if onFailure == "" {
		onFailure = OnFailureRefuse
	}
	if _, err := ParseOnFailure(string(onFailure)); err != nil {
		return nil, err
	}
	l := &Log{
		path:        path,
		lockPath:    path + ".lock",
		cpPath:      path + ".checkpoint",
		sealPath:    path + ".seal",
		level:       level,
		redact:      opts.Redact,
		now:         opts.Now,
		logger:      opts.Logger,
		onFailure:   onFailure,
		lockTimeout: opts.LockTimeout,
		witness:     opts.Witness,
	}
	if l.lockTimeout <= 0 {
		l.lockTimeout = DefaultLockTimeout
	}
	l.idle = sync.NewCond(&l.mu)
	if l.redact == nil {
		l.redact = NewRedactor(nil)
	}
	if l.now == nil {
		l.now = time.Now
	}
	if l.logger == nil {
		l.logger = slog.New(slog.DiscardHandler)
	}
	if level == LevelOff {
		return l, nil
	}
	if opts.Sealed {
		if _, err := os.Stat(l.sealPath); err != nil {
			return nil, fmt.Errorf("audit: %s: %w (audit.sealed is set; %v): the log or its state was deleted or replaced; "+
				"check what is left with `hermes-sandbox audit verify --key KEY`, then start a new sealed log "+
				"with `hermes-sandbox audit init --rotate`, which records the loss", path, ErrSealMissing, err)
		}
	}
	f, err := openPrivate(path, os.O_RDWR|os.O_APPEND|os.O_CREATE)
	if err != nil {
		return nil, err
	}
	lock, err := openPrivate(l.lockPath, os.O_RDWR|os.O_CREATE)
	if err != nil {
		f.Close()
		return nil, err
	}
	l.f, l.lock = f, lock
	return l, nil
}

// openPrivate opens a file with mode 0600 in a 0700 directory, tightening
// the mode of an existing file that others could read.
func openPrivate(path string, flag int) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	f, err := os.OpenFile(path, flag, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	if fi, err := f.Stat(); err == nil && fi.Mode().Perm()&0o077 != 0 {
		if err := f.Chmod(0o600); err != nil {
			f.Close()
			return nil, fmt.Errorf("audit: %w", err)
		}
	}
	return f, nil
}

// Path returns the log's path.
func (l *Log) Path() string { return l.path }

// Level returns the log's level.
func (l *Log) Level() Level { return l.level }

// Append redacts r, applies the level, stamps it with seq, time, prev_hash,
// MAC and hash, and writes it as one line, synced, before returning.
//
// Append does not give up when ctx is cancelled: a command that was
// cancelled must still be audited, so ctx only scopes the warnings logged.
// Another process holds the lock only while it writes and syncs. An error
// means the record may or may not have reached the disk.
func (l *Log) Append(ctx context.Context, r Record) error {
	_, err := l.append(ctx, r)
	return err
}

// Intent writes r as the intent of a call and syncs it; the call may reach
// the backend only after a nil error. It returns the intent's seq, for
// Result. An error is an *IntentError that says whether to refuse the call.
func (l *Log) Intent(ctx context.Context, r Record) (int64, error) {
	r.Type, r.Intent = TypeIntent, 0
	seq, err := l.append(ctx, r)
	if err != nil {
		return 0, &IntentError{Path: l.path, Err: err, Warn: l.onFailure == OnFailureWarn}
	}
	return seq, nil
}

// Result writes the result of the call whose intent has seq intent.
func (l *Log) Result(ctx context.Context, intent int64, r Record) error {
	r.Type, r.Intent = TypeResult, intent
	_, err := l.append(ctx, r)
	return err
}

func (l *Log) append(ctx context.Context, r Record) (int64, error) {
	if l.level == LevelOff {
		return 0, nil
	}
	req := &request{
		rec:  prepare(r, l.level, l.redact, l.now),
		done: make(chan result, 1),
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return 0, fmt.Errorf("audit: append %s: %w", l.path, sandbox.ErrClosed)
	}
	l.queue = append(l.queue, req)
	lead := !l.flushing
	l.flushing = true
	l.mu.Unlock()
	if lead {
		l.lead(ctx)
	}
	for {
		res := <-req.done
		if !res.lead {
			return res.seq, res.err
		}
		l.lead(ctx)
	}
}

// lead commits everything queued, then passes the leadership to the first
// request that queued meanwhile, or marks the log idle.
func (l *Log) lead(ctx context.Context) {
	l.mu.Lock()
	batch := l.queue
	l.queue = nil
	l.mu.Unlock()

	seqs, errs := l.commit(ctx, batch)

	l.mu.Lock()
	var next *request
	if len(l.queue) > 0 {
		next = l.queue[0]
	} else {
		l.flushing = false
		l.idle.Broadcast()
	}
	l.mu.Unlock()
	for i, req := range batch {
		req.done <- result{seq: seqs[i], err: errs[i]}
	}
	if next != nil {
		next.done <- result{lead: true}
	}
}

// commit writes batch under the file lock and returns one seq and one
// error per request.
func (l *Log) commit(ctx context.Context, batch []*request) ([]int64, []error) {
	seqs := make([]int64, len(batch))
	errs := make([]error, len(batch))
	fail := func(err error) ([]int64, []error) {
		for i := range errs {
			if errs[i] == nil {
				errs[i] = err
			}
			seqs[i] = 0
		}
		return seqs, errs
	}
	if err := l.acquire(); err != nil {
		return fail(fmt.Errorf("audit: append %s: %w", l.path, err))
	}
	defer unlockFile(l.lock)
	return l.commitLocked(ctx, batch, seqs, errs, fail)
}

// commitLocked is commit once the lock is held.
func (l *Log) commitLocked(ctx context.Context, batch []*request, seqs []int64, errs []error, fail func(error) ([]int64, []error)) ([]int64, []error) {
	if err := l.reopenIfReplaced(); err != nil {
		return fail(err)
	}
	fi, err := l.f.Stat()
	if err != nil {
		return fail(fmt.Errorf("audit: append: %w", err))
	}
	t, err := readTail(l.f, fi.Size())
	if err != nil {
		return fail(fmt.Errorf("audit: append %s: read tail: %w", l.path, err))
	}
	sf, st, err := openState(l.sealPath)
	if err != nil {
		return fail(fmt.Errorf("audit: append %s: %w (check it with `hermes-sandbox audit verify --key KEY`, then start a new log with `hermes-sandbox audit init --rotate`)", l.path, err))
	}
	if sf != nil {
		defer sf.close()
	}
	switch {
	case st == nil && t.sealed:
		return fail(fmt.Errorf("audit: append %s: %w: record %d carries a MAC but %s is gone "+
			"(check the log with `hermes-sandbox audit verify --key KEY`, then start a new log with `hermes-sandbox audit init --rotate`)",
			l.path, ErrSealMissing, t.seq, l.sealPath))
	case st != nil && st.Closed:
		return fail(fmt.Errorf("audit: append %s: the log was closed by a rotation; start a new one with `hermes-sandbox audit init`", l.path))
	}
	buf := l.buf[:0]
	if t.torn {
		// Never append onto a torn line: end it, so that it stays one
		// detectable bad line, and chain from the last good record.
		buf = append(buf, '\n')
		l.logger.WarnContext(ctx, "audit: log ends with a torn line; chaining from the last good record",
			"path", l.path, "last_seq", t.seq)
	}
	seq, prev := t.seq, t.hash
	var sl *sealer
	var truncated string
	if st != nil {
		key, err := st.key()
		if err != nil {
			return fail(fmt.Errorf("audit: append %s: %s: %w", l.path, l.sealPath, err))
		}
		sl = &sealer{log: st.Log, next: key, seq: st.Count + 1}
		defer func() { clear(sl.next) }()
		if reason := sealMismatch(st, t.seq, t.hash); reason != "" {
			// Keys before the seal are gone: chain on from the sealed
			// tail, so the missing records show as a gap.
			truncated, seq, prev = reason, st.Count, st.LastHash
		}
	} else {
		cp, err := readCheckpoint(l.cpPath)
		if err != nil {
			l.logger.WarnContext(ctx, "audit: ignoring unreadable checkpoint", "path", l.cpPath, "error", err)
		}
		truncated = checkpointMismatch(cp, t.seq, t.hash)
	}
	type sent struct {
		seq             int64
		hash, mac, tool string
	}
	var witnessed []sent
	add := func(rec Record) (int64, error) {
		rec.Seq, rec.PrevHash = seq+1, prev
		prefix, hash, err := canonical(rec)
		if err != nil {
			return 0, err
		}
		mac := ""
		if sl != nil {
			if mac, err = sl.mac(rec.Seq, hash); err != nil {
				return 0, err
			}
		}
		buf = append(append(buf, splice(prefix, mac, hash)...), '\n')
		seq, prev = rec.Seq, hash
		witnessed = append(witnessed, sent{seq, hash, mac, rec.Tool})
		return seq, nil
	}
	if truncated != "" {
		// Someone removed records: say so in the log itself, so the
		// evidence survives the checkpoint being moved forward.
		l.logger.WarnContext(ctx, "audit: "+truncated, "path", l.path)
		marker := Record{Time: l.now().UTC().Round(0), Tool: ToolAudit, Decision: DecisionLogTruncated, Reason: truncated}
		if _, err := add(marker); err != nil {
			return fail(err)
		}
	}
	for i, req := range batch {
		seqs[i], errs[i] = add(req.rec)
	}
	if len(buf) == 0 {
		return seqs, errs
	}
	_, err = l.f.Write(buf)
	if err == nil {
		err = syncData(l.f)
	}
	if err != nil {
		// A full disk can take part of the batch: cut it off, so no torn
		// line is left behind (a failed truncate leaves one that the next
		// commit ends and Verify reports).
		if terr := l.f.Truncate(fi.Size()); terr != nil {
			l.logger.ErrorContext(ctx, "audit: cannot remove a partial write", "path", l.path, "error", terr)
		}
		return fail(fmt.Errorf("audit: append %s: %w", l.path, err))
	}
	if cap(buf) <= 1<<20 {
		l.buf = buf[:0]
	}
	if sl != nil {
		// The records are durable; a state that lags them after a crash is
		// moved forward by the next commit and accepted by Verify.
		if err := sf.write(sl.state(seq, prev)); err != nil {
			l.logger.ErrorContext(ctx, "audit: cannot update the sealing state", "path", l.sealPath, "error", err)
		}
	} else if err := writeCheckpoint(l.cpPath, Checkpoint{Count: seq, LastHash: prev, Updated: l.now().UTC().Round(0)}); err != nil {
		// A stale checkpoint only weakens truncation detection until the
		// next commit rewrites it, so warn and go on.
		l.logger.WarnContext(ctx, "audit: cannot write checkpoint", "path", l.cpPath, "error", err)
	}
	if l.witness != nil {
		logID := "-"
		if sl != nil {
			logID = sl.log
		}
		for _, w := range witnessed {
			if err := l.witness.send(WitnessEntry{Log: logID, Seq: w.seq, Hash: w.hash, MAC: w.mac}); err != nil {
				l.logger.ErrorContext(ctx, "audit: the witness did not take a record", "seq", w.seq, "error", err)
			}
		}
	}
	return seqs, errs
}

// sealMismatch explains why the tail (seq, hash) cannot follow the sealing
// state, or returns "". A state behind the tail lags after a crash.
func sealMismatch(st *sealState, seq int64, hash string) string {
	return tailMismatch("the sealing state", st.Count, st.LastHash, seq, hash)
}

// tailMismatch explains why the tail (seq, hash) cannot follow what a
// checkpoint or sealing state recorded (count records, the last with
// lastHash), or returns "".
func tailMismatch(what string, count int64, lastHash string, seq int64, hash string) string {
	switch {
	case count > seq:
		return fmt.Sprintf("log truncated: %s says %d records, found %d", what, count, seq)
	case count == seq && lastHash != hash:
		return fmt.Sprintf("log truncated and rewritten: %s says record %d has hash %.12s…, found %.12s…", what, seq, lastHash, hash)
	}
	return ""
}

// acquire takes the exclusive lock, giving up after the lock timeout.
func (l *Log) acquire() error {
	if l.lock == nil {
		lock, err := openPrivate(l.lockPath, os.O_RDWR|os.O_CREATE)
		if err != nil {
			return err
		}
		l.lock = lock
	}
	if ok, err := tryLockFile(l.lock); ok || err != nil {
		return err
	}
	// Contended: wait in the kernel (fair to every waiter) on another
	// goroutine, so the wait can end at the timeout.
	f := l.lock
	done := make(chan error, 1)
	go func() { done <- lockFile(f, true) }()
	timer := time.NewTimer(l.lockTimeout)
	defer timer.Stop()
	select {
	case err := <-done:
		return err
	case <-timer.C:
		// The waiting flock owns f now; the next commit opens a new one.
		l.lock = nil
		go func() {
			if err := <-done; err == nil {
				unlockFile(f)
			}
			f.Close()
		}()
		return fmt.Errorf("%w: another process held %s for more than %s", ErrLockTimeout, l.lockPath, l.lockTimeout)
	}
}

// checkpointMismatch explains why the tail (seq, hash) cannot follow cp, or
// returns "". A checkpoint behind the tail is fine: it lags after a crash
// between the fsync and the checkpoint write.
func checkpointMismatch(cp *Checkpoint, seq int64, hash string) string {
	if cp == nil {
		return ""
	}
	return tailMismatch("checkpoint", cp.Count, cp.LastHash, seq, hash)
}

// reopenIfReplaced reopens the log if the file at path is not the one we
// hold (it was rotated or removed).
func (l *Log) reopenIfReplaced() error {
	held, err := l.f.Stat()
	if err != nil {
		return fmt.Errorf("audit: append: %w", err)
	}
	cur, err := os.Stat(l.path)
	if err == nil && os.SameFile(held, cur) {
		return nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("audit: append: %w", err)
	}
	f, err := openPrivate(l.path, os.O_RDWR|os.O_APPEND|os.O_CREATE)
	if err != nil {
		return err
	}
	l.f.Close()
	l.f = f
	return nil
}

// Close waits for the batch in flight and closes the files. Appends after
// Close fail with sandbox.ErrClosed. Close is idempotent.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	for l.flushing {
		l.idle.Wait()
	}
	l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	if l.lock != nil {
		if lerr := l.lock.Close(); err == nil {
			err = lerr
		}
	}
	if err != nil {
		return fmt.Errorf("audit: close: %w", err)
	}
	return nil
}

// tail is where the next record chains from.
type tail struct {
	seq    int64
	hash   string
	torn   bool // the file does not end with a newline
	sealed bool // the last record carries a MAC
}

// readTail reads backwards from size for the last line that parses as a
// record; lines that do not (torn writes) are skipped.
func readTail(f *os.File, size int64) (tail, error) {
	t := tail{hash: GenesisHash}
	err := scanLinesBackward(f, size, func(line []byte, terminated bool) bool {
		if !terminated {
			t.torn = true
		}
		r, err := parseRecord(line)
		if err != nil {
			return false
		}
		t.seq, t.hash, t.sealed = r.Seq, r.Hash, r.MAC != ""
		return true
	})
	return t, err
}

// parseRecord decodes one line; a record without a hash is not one of ours.
func parseRecord(line []byte) (Record, error) {
	var r Record
	if err := json.Unmarshal(line, &r); err != nil {
		return r, err
	}
	if len(r.Hash) != len(GenesisHash) {
		return r, errors.New("record has no hash")
	}
	return r, nil
}

func readCheckpoint(path string) (*Checkpoint, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var cp Checkpoint
	if err := json.Unmarshal(b, &cp); err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	return &cp, nil
}

// checkpointSize is the fixed size of the checkpoint file.
const checkpointSize = 256

// writeCheckpoint overwrites the checkpoint in place, padded to a fixed
// size. Callers hold the exclusive lock. Neither a new file nor a rename:
// metadata changes would make every later fdatasync of the log wait for a
// journal commit, which doubled the cost of an append.
//
// It does not sync: that would double the cost of a commit, and the
// checkpoint needs no durability of its own. After a crash it may lag
// (harmless) or be torn, which Verify reports and the next commit repairs.
func writeCheckpoint(path string, cp Checkpoint) error {
	b, err := json.Marshal(cp)
	if err != nil {
		return err
	}
	if len(b)+1 > checkpointSize {
		return fmt.Errorf("checkpoint too large (%d bytes)", len(b))
	}
	out := bytes.Repeat([]byte{' '}, checkpointSize)
	copy(out, b)
	out[checkpointSize-1] = '\n'
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(out, 0)
	if fi, serr := f.Stat(); err == nil && serr == nil && fi.Size() > checkpointSize {
		err = f.Truncate(checkpointSize) // a checkpoint written by an older version
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
