package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
)

// Kind classifies a problem found by Verify.
type Kind string

// Problem kinds.
const (
	// KindEdited: the record's hash does not match its content, or its
	// JSON is not in canonical form.
	KindEdited Kind = "edited"
	// KindDeleted: seq jumps forward and the missing records never appear.
	KindDeleted Kind = "deleted"
	// KindReordered: records appear out of seq order.
	KindReordered Kind = "reordered"
	// KindDuplicated: a seq appears a second time.
	KindDuplicated Kind = "duplicated"
	// KindChainBroken: seq is in order but prev_hash does not match the
	// previous record (a record was replaced by one with a valid hash).
	KindChainBroken Kind = "chain_broken"
	// KindTruncated: records at the end are gone (fewer than the
	// checkpoint says, or the checkpoint's last hash does not match).
	KindTruncated Kind = "truncated"
	// KindTorn: an incomplete write (a crash or a full disk).
	KindTorn Kind = "torn"
	// KindInvalid: a line that is not JSON at all.
	KindInvalid Kind = "invalid_json"
	// KindCheckpoint: the checkpoint file cannot be read.
	KindCheckpoint Kind = "checkpoint"
)

// Problem is one bad line found by Verify.
type Problem struct {
	Line   int    `json:"line"`          // 1-based line number
	Seq    int64  `json:"seq,omitempty"` // the record's seq, when known
	Kind   Kind   `json:"kind"`
	Detail string `json:"detail"`
}

func (p Problem) String() string {
	if p.Line == 0 {
		return p.Detail
	}
	if p.Seq > 0 {
		return fmt.Sprintf("line %d (seq %d): %s", p.Line, p.Seq, p.Detail)
	}
	return fmt.Sprintf("line %d: %s", p.Line, p.Detail)
}

// maxProblems bounds Report.Problems; ProblemCount counts them all.
const maxProblems = 100

// Report is the result of Verify.
type Report struct {
	OK           bool        `json:"ok"`
	Records      int         `json:"records"` // lines that decode as records
	Lines        int         `json:"lines"`
	LastSeq      int64       `json:"last_seq"`
	LastHash     string      `json:"last_hash"`
	Checkpoint   *Checkpoint `json:"checkpoint,omitempty"`
	Problems     []Problem   `json:"problems,omitempty"` // in line order, at most 100
	ProblemCount int         `json:"problem_count"`
}

// First returns the first bad record, or nil when the log is intact.
func (r Report) First() *Problem {
	if len(r.Problems) == 0 {
		return nil
	}
	return &r.Problems[0]
}

func (r Report) String() string {
	if r.OK {
		return fmt.Sprintf("ok: %d records, hash chain intact, last hash %.16s…", r.Records, r.LastHash)
	}
	return fmt.Sprintf("FAILED: %d records, %d problems; first: %s", r.Records, r.ProblemCount, r.First())
}

// Verify walks the log at path and checks every record's hash, the chain
// of prev_hash and seq, and the checkpoint. It returns an error only when
// it cannot read the log; a tampered log gives a Report with OK false and
// the problems found, first bad record first.
//
// Verify takes the shared lock only long enough to read the checkpoint and
// the file size, so it neither blocks writers nor sees a write in progress.
func Verify(path string) (Report, error) {
	var rep Report
	cp, cpErr, f, size, err := snapshot(path)
	if err != nil {
		return rep, err
	}
	v := &verifier{rep: &rep, cp: cp, prevHash: GenesisHash}
	rep.Checkpoint = cp
	if cpErr != nil {
		v.add(Problem{Line: 0, Kind: KindCheckpoint, Detail: "checkpoint unreadable: " + cpErr.Error()})
	}
	if f != nil {
		defer f.Close()
		br := bufio.NewReaderSize(io.NewSectionReader(f, 0, size), 64<<10)
		for n := 1; ; n++ {
			line, err := br.ReadBytes('\n')
			if len(line) > 0 {
				terminated := line[len(line)-1] == '\n'
				v.line(n, bytes.TrimSuffix(line, []byte{'\n'}), terminated)
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				return rep, fmt.Errorf("audit: verify %s: %w", path, err)
			}
		}
	}
	v.finish()
	return rep, nil
}

// snapshot reads the checkpoint and the log size under the shared lock.
// Checkpoints are written after the records they count are fsynced, so the
// first size bytes hold at least the records the checkpoint promises.
func snapshot(path string) (cp *Checkpoint, cpErr error, f *os.File, size int64, err error) {
	if lf, err := os.Open(path + ".lock"); err == nil {
		defer lf.Close()
		if err := lockFile(lf, false); err != nil {
			return nil, nil, nil, 0, fmt.Errorf("audit: verify: %w", err)
		}
		defer unlockFile(lf)
	}
	cp, cpErr = readCheckpoint(path + ".checkpoint")
	f, err = os.Open(path)
	if errors.Is(err, fs.ErrNotExist) && cp != nil {
		return cp, cpErr, nil, 0, nil // the whole log is gone: finish reports it
	}
	if err != nil {
		return nil, nil, nil, 0, fmt.Errorf("audit: verify: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, nil, 0, fmt.Errorf("audit: verify: %w", err)
	}
	return cp, cpErr, f, fi.Size(), nil
}

type verifier struct {
	rep      *Report
	cp       *Checkpoint
	prevSeq  int64
	maxSeq   int64
	prevHash string
	gaps     []gap
	cpLine   int    // line of the record the checkpoint names
	cpHash   string // its hash
}

// gap is a range of seqs skipped at some line: deleted unless they show up
// later, in which case the records were reordered.
type gap struct {
	lo, hi  int64
	problem int // index in rep.Problems, or -1
}

func (v *verifier) add(p Problem) int {
	v.rep.ProblemCount++
	if len(v.rep.Problems) >= maxProblems {
		return -1
	}
	v.rep.Problems = append(v.rep.Problems, p)
	return len(v.rep.Problems) - 1
}

func (v *verifier) line(n int, raw []byte, terminated bool) {
	v.rep.Lines = n
	var r Record
	err := json.NewDecoder(bytes.NewReader(raw)).Decode(&r)
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF) && !terminated:
		v.add(Problem{Line: n, Kind: KindTorn, Detail: "torn last line (incomplete write)"})
		return
	case errors.Is(err, io.ErrUnexpectedEOF):
		v.add(Problem{Line: n, Kind: KindTorn, Detail: "torn line (incomplete write; later records chain from the record before it)"})
		return
	case errors.Is(err, io.EOF):
		v.add(Problem{Line: n, Kind: KindInvalid, Detail: "empty line"})
		return
	case err != nil:
		v.add(Problem{Line: n, Kind: KindInvalid, Detail: "invalid JSON: " + err.Error()})
		return
	}
	v.rep.Records++

	line, hash, err := encode(r)
	switch {
	case err != nil:
		v.add(Problem{Line: n, Seq: r.Seq, Kind: KindEdited, Detail: "cannot re-encode record (record edited): " + err.Error()})
	case hash != r.Hash:
		v.add(Problem{Line: n, Seq: r.Seq, Kind: KindEdited, Detail: "hash mismatch (record edited)"})
	case !bytes.Equal(line, raw):
		v.add(Problem{Line: n, Seq: r.Seq, Kind: KindEdited, Detail: "record not in canonical form (record edited)"})
	case r.Seq > v.maxSeq+1:
		idx := v.add(Problem{Line: n, Seq: r.Seq, Kind: KindDeleted,
			Detail: fmt.Sprintf("seq gap: expected seq %d, found %d; prev_hash does not match previous record (%s deleted)",
				v.maxSeq+1, r.Seq, seqRange(v.maxSeq+1, r.Seq-1))})
		if len(v.gaps) < 1000 {
			v.gaps = append(v.gaps, gap{lo: v.maxSeq + 1, hi: r.Seq - 1, problem: idx})
		}
	case r.Seq <= v.maxSeq:
		if g := v.findGap(r.Seq); g != nil {
			if g.problem >= 0 {
				p := &v.rep.Problems[g.problem]
				p.Kind = KindReordered
				p.Detail = fmt.Sprintf("out of order: expected seq %d, found %d; seq %d appears at line %d (records reordered)",
					g.lo, p.Seq, r.Seq, n)
			}
			v.add(Problem{Line: n, Seq: r.Seq, Kind: KindReordered,
				Detail: fmt.Sprintf("out of order: seq %d after seq %d (records reordered)", r.Seq, v.prevSeq)})
		} else {
			v.add(Problem{Line: n, Seq: r.Seq, Kind: KindDuplicated,
				Detail: fmt.Sprintf("seq %d appears again (record duplicated)", r.Seq)})
		}
	case r.PrevHash != v.prevHash:
		v.add(Problem{Line: n, Seq: r.Seq, Kind: KindChainBroken,
			Detail: "prev_hash does not match previous record (record deleted, reordered or replaced)"})
	}
	if r.Tool == ToolAudit && r.Decision == DecisionLogTruncated {
		v.add(Problem{Line: n, Seq: r.Seq, Kind: KindTruncated,
			Detail: "records removed before this record (noticed when appending): " + r.Reason})
	}
	if v.cp != nil && r.Seq == v.cp.Count && v.cpLine == 0 {
		v.cpLine, v.cpHash = n, r.Hash
	}
	v.prevSeq, v.prevHash = r.Seq, r.Hash
	v.maxSeq = max(v.maxSeq, r.Seq)
	v.rep.LastSeq, v.rep.LastHash = r.Seq, r.Hash
}

func (v *verifier) findGap(seq int64) *gap {
	for i := range v.gaps {
		if g := &v.gaps[i]; g.lo <= seq && seq <= g.hi {
			return g
		}
	}
	return nil
}

func (v *verifier) finish() {
	if cp := v.cp; cp != nil {
		switch {
		case cp.Count > v.maxSeq:
			v.add(Problem{Line: v.rep.Lines + 1, Seq: v.maxSeq + 1, Kind: KindTruncated,
				Detail: fmt.Sprintf("log truncated: checkpoint says %d records, found %d", cp.Count, v.rep.Records)})
		case cp.Count > 0 && v.cpLine > 0 && v.cpHash != cp.LastHash:
			v.add(Problem{Line: v.cpLine, Seq: cp.Count, Kind: KindTruncated,
				Detail: fmt.Sprintf("log truncated and rewritten: checkpoint says record %d has hash %.12s…, found %.12s…",
					cp.Count, cp.LastHash, v.cpHash)})
		}
	}
	slices.SortStableFunc(v.rep.Problems, func(a, b Problem) int { return a.Line - b.Line })
	v.rep.OK = v.rep.ProblemCount == 0
}

func seqRange(lo, hi int64) string {
	if lo == hi {
		return fmt.Sprintf("record %d", lo)
	}
	return fmt.Sprintf("records %d..%d", lo, hi)
}
