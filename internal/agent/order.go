package agent

import (
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"
)

// Commands that go through the session's shell read the session's state when they start and
// save it when they end. Two of them running at once would each save what they saw, and the
// last to end would erase the other's cd and export. So they run one at a time: in arrival
// order within a helper (fifo), and under an exclusive lock on the state directory across
// helpers of the same session (two CLI processes, each with its own helper).

// fifo lets runs through one at a time, in the order they asked.
type fifo struct {
	mu      sync.Mutex
	busy    bool
	waiting []*run
}

// acquire waits for rn's turn. It returns false, holding nothing, when rn is killed first.
func (q *fifo) acquire(rn *run) bool {
	q.mu.Lock()
	if !q.busy {
		q.busy = true
		q.mu.Unlock()
		return true
	}
	rn.turn = make(chan struct{})
	q.waiting = append(q.waiting, rn)
	q.mu.Unlock()
	select {
	case <-rn.turn:
		return true
	case <-rn.cancelled:
	}
	q.mu.Lock()
	for i, w := range q.waiting {
		if w == rn {
			q.waiting = append(q.waiting[:i], q.waiting[i+1:]...)
			q.mu.Unlock()
			return false
		}
	}
	q.mu.Unlock()
	// The turn came at the same moment: pass it on.
	q.release()
	return false
}

// release hands the turn to the next waiting run.
func (q *fifo) release() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.waiting) == 0 {
		q.busy = false
		return
	}
	next := q.waiting[0]
	q.waiting = q.waiting[1:]
	close(next.turn)
}

// lockState takes the session's state lock, shared by every helper of the session. It
// returns false when cancelled is closed first.
func lockState(dir string, cancelled <-chan struct{}) (func(), bool) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return func() {}, true // prepare reports the error
	}
	f, err := os.OpenFile(filepath.Join(dir, "state.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return func() {}, true // a read-only state directory: nothing to protect
	}
	if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil {
		return func() { f.Close() }, true
	}
	locked := make(chan struct{})
	go func() {
		for unix.Flock(int(f.Fd()), unix.LOCK_EX) == unix.EINTR {
		}
		close(locked)
	}()
	select {
	case <-locked:
		return func() { f.Close() }, true
	case <-cancelled:
		go func() {
			<-locked
			f.Close()
		}()
		return nil, false
	}
}

// stdinQueue holds a command's stdin until the command reads it, so that writing to a
// command that is still queued, or that does not read, never blocks the helper's stream.
type stdinQueue struct {
	mu     sync.Mutex
	cond   *sync.Cond
	chunks [][]byte
	eof    bool
	closed bool
	pipe   *os.File
}

func newStdinQueue() *stdinQueue {
	q := &stdinQueue{}
	q.cond = sync.NewCond(&q.mu)
	return q
}

func (q *stdinQueue) push(f frame) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed || q.eof {
		return
	}
	if f.typ == tEOF {
		q.eof = true
	} else {
		q.chunks = append(q.chunks, f.payload)
	}
	q.cond.Signal()
}

// copyTo feeds the queue into the command's stdin pipe until EOF, a write error (the
// command stopped reading) or close (the command ended).
func (q *stdinQueue) copyTo(pipe *os.File) {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		pipe.Close()
		return
	}
	q.pipe = pipe
	for {
		for len(q.chunks) == 0 && !q.eof && !q.closed {
			q.cond.Wait()
		}
		if q.closed || len(q.chunks) == 0 {
			// Closed, or everything is written and the input ended.
			q.closed = true
			q.chunks = nil
			q.mu.Unlock()
			pipe.Close()
			return
		}
		chunk := q.chunks[0]
		q.chunks = q.chunks[1:]
		q.mu.Unlock()
		_, err := pipe.Write(chunk)
		q.mu.Lock()
		if err != nil {
			q.closed = true
		}
	}
}

// close ends the copier: the command is gone, so a write blocked on a full pipe returns.
func (q *stdinQueue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	q.closed = true
	q.chunks = nil
	if q.pipe != nil {
		q.pipe.Close()
	}
	q.cond.Broadcast()
}
