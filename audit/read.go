package audit

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
)

const defaultFollowEvery = 250 * time.Millisecond

// scanLinesBackward calls fn for each line of r[0:size], last line first,
// without the newline. terminated is false only for a last line that has
// no newline. It stops when fn returns true. It reads chunks from the end,
// so finding the last line of a large file is cheap.
func scanLinesBackward(r io.ReaderAt, size int64, fn func(line []byte, terminated bool) (stop bool)) error {
	if size <= 0 {
		return nil
	}
	var buf []byte // holds r[pos : pos+len(buf)]
	pos := size
	terminated := true
	first := true
	for {
		if !first {
			if i := bytes.LastIndexByte(buf, '\n'); i >= 0 {
				if fn(buf[i+1:], terminated) {
					return nil
				}
				buf, terminated = buf[:i], true
				continue
			}
			if pos == 0 {
				fn(buf, terminated)
				return nil
			}
		}
		n := min(max(8192, int64(len(buf))), pos)
		pos -= n
		nb := make([]byte, int(n)+len(buf))
		if _, err := r.ReadAt(nb[:n], pos); err != nil {
			return err
		}
		copy(nb[n:], buf)
		buf = nb
		if first {
			first = false
			if buf[len(buf)-1] == '\n' {
				buf = buf[:len(buf)-1]
			} else {
				terminated = false
			}
		}
	}
}

// Tail returns the last n records of the log at path, oldest first. Lines
// that are not records (torn writes) are skipped; Verify reports them.
// n <= 0 returns every record.
func Tail(path string, n int) ([]Record, error) {
	if n <= 0 {
		return ReadAll(path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("audit: tail: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("audit: tail: %w", err)
	}
	var out []Record
	err = scanLinesBackward(f, fi.Size(), func(line []byte, _ bool) bool {
		if r, err := parseRecord(line); err == nil {
			out = append(out, r)
		}
		return len(out) >= n
	})
	if err != nil {
		return nil, fmt.Errorf("audit: tail %s: %w", path, err)
	}
	slices.Reverse(out)
	return out, nil
}

// Scan calls fn for each record of the log at path, in file order, and
// stops at fn's first error, which it returns. Lines that are not records
// are skipped.
func Scan(path string, fn func(Record) error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("audit: read: %w", err)
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			if r, perr := parseRecord(bytes.TrimSuffix(line, []byte{'\n'})); perr == nil {
				if ferr := fn(r); ferr != nil {
					return ferr
				}
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("audit: read %s: %w", path, err)
		}
	}
}

// ReadAll returns every record of the log at path.
func ReadAll(path string) ([]Record, error) {
	var out []Record
	err := Scan(path, func(r Record) error {
		out = append(out, r)
		return nil
	})
	return out, err
}

// FilterSession returns the records of one session, in order
// (for `audit show --session S`).
func FilterSession(rs []Record, session string) []Record {
	var out []Record
	for _, r := range rs {
		if r.Session == session {
			out = append(out, r)
		}
	}
	return out
}

// Follow calls fn for each record appended to the log at path after Follow
// was called, polling the file until ctx is done (for `audit tail -f`).
// It waits for a file that does not exist yet, and starts from the top of a
// file that was rotated or truncated. It returns nil when ctx is done.
func Follow(ctx context.Context, path string, fn func(Record)) error {
	fl, err := newFollower(path, fn)
	if err != nil {
		return err
	}
	return fl.run(ctx, defaultFollowEvery)
}

type follower struct {
	path  string
	fn    func(Record)
	off   int64       // end of the last complete line delivered
	ident os.FileInfo // the file off refers to; nil before it exists
}

// newFollower positions a follower after the last complete line of path.
func newFollower(path string, fn func(Record)) (*follower, error) {
	fl := &follower{path: path, fn: fn}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fl, nil
	}
	if err != nil {
		return nil, fmt.Errorf("audit: follow: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("audit: follow: %w", err)
	}
	fl.ident = fi
	fl.off = fi.Size()
	// A line still being written is delivered once complete.
	err = scanLinesBackward(f, fi.Size(), func(line []byte, terminated bool) bool {
		if !terminated {
			fl.off -= int64(len(line))
		}
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("audit: follow %s: %w", path, err)
	}
	return fl, nil
}

func (fl *follower) run(ctx context.Context, every time.Duration) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if err := fl.poll(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// poll delivers the complete lines appended since the last poll.
func (fl *follower) poll() error {
	f, err := os.Open(fl.path)
	if errors.Is(err, fs.ErrNotExist) {
		fl.ident, fl.off = nil, 0
		return nil
	}
	if err != nil {
		return fmt.Errorf("audit: follow: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("audit: follow: %w", err)
	}
	if fl.ident != nil && !os.SameFile(fl.ident, fi) || fi.Size() < fl.off {
		fl.off = 0 // rotated or truncated: the file is new to us
	}
	fl.ident = fi
	br := bufio.NewReaderSize(io.NewSectionReader(f, fl.off, fi.Size()-fl.off), 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if err == io.EOF {
			return nil // an incomplete line waits for the next poll
		}
		if err != nil {
			return fmt.Errorf("audit: follow %s: %w", fl.path, err)
		}
		fl.off += int64(len(line))
		if r, err := parseRecord(line[:len(line)-1]); err == nil {
			fl.fn(r)
		}
	}
}

// FilterKind keeps the records of one kind (see Kinds).
func FilterKind(rs []Record, kind string) []Record {
	var out []Record
	for _, r := range rs {
		if r.Kind() == kind {
			out = append(out, r)
		}
	}
	return out
}

// Format renders r as one human-readable line: time, session, backend,
// verdict/decision (approver), exit code, duration, tool and command.
func Format(r Record) string {
	var b strings.Builder
	b.WriteString(r.Time.Format("2006-01-02T15:04:05.000Z07:00"))
	field := func(s string) {
		if s == "" {
			s = "-"
		}
		b.WriteByte(' ')
		b.WriteString(s)
	}
	field(r.Session)
	field(r.Backend)
	verdict := r.Verdict
	if verdict == "" {
		verdict = "-"
	}
	decision := verdict + "/" + r.Decision
	if r.Approver != "" {
		decision += "(" + r.Approver + ")"
	}
	field(decision)
	if r.ExitCode != nil {
		field("exit=" + strconv.Itoa(*r.ExitCode))
	} else {
		field("exit=-")
	}
	d := time.Duration(r.DurationMS * float64(time.Millisecond))
	field(d.Round(100 * time.Microsecond).String())
	if r.Tool != "" && r.Tool != ToolExec {
		field(r.Tool)
	}
	field(printable(r.Command))
	if r.Type == TypeEgress {
		field(fmt.Sprintf("up=%d down=%d", r.BytesUp, r.BytesDown))
		if r.Reason != "" {
			field("reason=" + strconv.Quote(r.Reason))
		}
	}
	if r.NewSession != "" {
		field("new_session=" + printable(r.NewSession))
	}
	if r.Snapshot != "" {
		field("snapshot=" + printable(r.Snapshot))
	}
	if r.Error != "" {
		field("error=" + strconv.Quote(r.Error))
	}
	if r.Tool == ToolAudit && r.Reason != "" {
		field(printable(r.Reason))
	}
	return b.String()
}

// printable quotes s if it holds anything that would break the line.
func printable(s string) string {
	if strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		return strconv.Quote(s)
	}
	return s
}

// Call is one tool call as the log tells it: the intent and, once it came,
// the result. A record without a type (written before intents) or a refused
// call is an Intent with no Result expected; a result whose intent is not
// among the records read has only Result.
type Call struct {
	Intent *Record
	Result *Record
}

// Pair groups records into calls, in the order of their first record.
func Pair(rs []Record) []Call {
	var out []Call
	open := map[int64]int{} // intent seq → index in out
	for i := range rs {
		r := &rs[i]
		if r.Type == TypeResult {
			if j, ok := open[r.Intent]; ok && r.Intent > 0 {
				out[j].Result = r
				delete(open, r.Intent)
				continue
			}
			out = append(out, Call{Result: r})
			continue
		}
		if NeedsResult(*r) {
			open[r.Seq] = len(out)
		}
		out = append(out, Call{Intent: r})
	}
	return out
}

// Dangling reports whether the call's intent is still waiting for a result.
func (c Call) Dangling() bool { return c.Intent != nil && c.Result == nil && NeedsResult(*c.Intent) }

// FormatCall renders a call as one line, like Format: the intent with its
// result's exit code and duration, or a note saying which half is missing.
func FormatCall(c Call) string {
	switch {
	case c.Intent == nil:
		return Format(*c.Result) + fmt.Sprintf(" (result of record %d)", c.Result.Intent)
	case c.Result == nil && c.Dangling():
		return Format(*c.Intent) + " NO RESULT (the caller was killed or crashed, or the call is still running)"
	case c.Result == nil:
		return Format(*c.Intent)
	}
	m := *c.Intent
	res := c.Result
	m.ExitCode, m.DurationMS = res.ExitCode, res.DurationMS
	if res.Error != "" {
		m.Error = res.Error
	}
	return Format(m)
}
