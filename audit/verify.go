package audit

import (
	"bufio"
	"bytes"
	"cmp"
	"crypto/hmac"
	"encoding/hex"
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
	// KindMAC: a record of a sealed log has no MAC, or its MAC does not
	// verify under the key (edited, inserted, or from another log).
	KindMAC Kind = "bad_mac"
	// KindSeal: the sealing state is missing, unreadable, or its seal does
	// not verify under the key (rewritten).
	KindSeal Kind = "seal"
	// KindForeign: the log, its sealing state and the key do not belong
	// together (a log or state from another install, or a replaced log).
	KindForeign Kind = "foreign"
	// KindWitness: the witness saw a record that the log lost or changed.
	KindWitness Kind = "witness"
	// KindDangling: an intent without a result (a warning: the caller was
	// killed, crashed, or the call is still running).
	KindDangling Kind = "dangling_intent"
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
	OK         bool        `json:"ok"`
	Records    int         `json:"records"` // lines that decode as records
	Lines      int         `json:"lines"`
	LastSeq    int64       `json:"last_seq"`
	LastHash   string      `json:"last_hash"`
	Checkpoint *Checkpoint `json:"checkpoint,omitempty"`
	// Sealed says the log was made by Init; LogID is its id.
	Sealed bool   `json:"sealed"`
	LogID  string `json:"log_id,omitempty"`
	// Keyed says every MAC and the seal were checked with the verification key.
	Keyed bool `json:"keyed"`
	// SealedCount is the record count the sealing state covers.
	SealedCount int64 `json:"sealed_count,omitempty"`
	// Witnessed counts the witness entries cross-checked (with a witness).
	Witnessed    int       `json:"witnessed,omitempty"`
	Problems     []Problem `json:"problems,omitempty"` // in line order, at most 100
	ProblemCount int       `json:"problem_count"`
	// Warnings do not fail verification: intents without a result.
	Warnings []Problem `json:"warnings,omitempty"`
	// Caveat says what this verification could not rule out.
	Caveat string `json:"caveat,omitempty"`
}

// First returns the first bad record, or nil when the log is intact.
func (r Report) First() *Problem {
	if len(r.Problems) == 0 {
		return nil
	}
	return &r.Problems[0]
}

func (r Report) String() string {
	var s string
	switch {
	case !r.OK:
		s = fmt.Sprintf("FAILED: %d records, %d problems; first: %s", r.Records, r.ProblemCount, r.First())
	case r.Keyed:
		s = fmt.Sprintf("ok: %d records, sealed log %s: every MAC and the seal over %d records verify under the key, hash chain intact, last hash %.16s…",
			r.Records, r.LogID, r.SealedCount, r.LastHash)
	case r.Sealed:
		s = fmt.Sprintf("ok: %d records, sealed log %s, hash chain intact, last hash %.16s…", r.Records, r.LogID, r.LastHash)
	default:
		s = fmt.Sprintf("ok: %d records, unsealed, hash chain intact, last hash %.16s…", r.Records, r.LastHash)
	}
	if r.Witnessed > 0 {
		s += fmt.Sprintf("; %d witness entries agree", r.Witnessed)
	}
	for _, w := range r.Warnings {
		s += "\nwarning: " + w.String()
	}
	if r.Caveat != "" {
		s += "\nnote: " + r.Caveat
	}
	return s
}

// VerifyOptions configure VerifyWith.
type VerifyOptions struct {
	// Key is the verification key printed by Init (see ParseKey); nil
	// checks the hash chain only.
	Key []byte
	// Witness, if set, holds the witness's entries (see ReadWitness) to
	// cross-check against the log.
	Witness []WitnessEntry
	// Sealed says the log must be sealed (audit.sealed): an unsealed one is then a
	// problem (deleted and started anew, or replaced), not a log from before init.
	Sealed bool
}

// Caveats.
const (
	caveatNoKey = "without the verification key only the hash chain is checked: truncation together " +
		"with a rewritten sealing state, re-chained edits and a wholesale rewrite cannot be ruled out " +
		"(pass --key or set HERMES_SANDBOX_AUDIT_KEY)"
	caveatUnsealed = "unsealed log (made before `hermes-sandbox audit init`): only the hash chain and the " +
		"checkpoint are checked, so truncation with a rewritten checkpoint, re-chained edits and a wholesale " +
		"rewrite cannot be ruled out; `hermes-sandbox audit init --rotate` starts a sealed log"
)

// Verify walks the log at path and checks every record's hash, the chain
// of prev_hash and seq, and the checkpoint. It returns an error only when
// it cannot read the log; a tampered log gives a Report with OK false and
// the problems found, first bad record first.
//
// Verify takes the shared lock only long enough to read the checkpoint and
// the file size, so it neither blocks writers nor sees a write in progress.
func Verify(path string) (Report, error) {
	return VerifyWith(path, VerifyOptions{})
}

// VerifyWith is Verify with the verification key and a witness: with the
// key it also checks every record's MAC, the log's id and the seal over the
// record count, so it detects a truncated tail with a rewritten state and a
// replaced log; with a witness it checks that every record the witness saw
// is still in the log, unchanged.
func VerifyWith(path string, opts VerifyOptions) (Report, error) {
	var rep Report
	snap, err := snapshot(path)
	if err != nil {
		return rep, err
	}
	cp, cpErr, f, size := snap.cp, snap.cpErr, snap.f, snap.size
	v := &verifier{rep: &rep, cp: cp, prevHash: GenesisHash, st: snap.st, intents: map[int64]int{}, mustSeal: opts.Sealed}
	rep.Checkpoint = cp
	if cpErr != nil {
		v.add(Problem{Line: 0, Kind: KindCheckpoint, Detail: "checkpoint unreadable: " + cpErr.Error()})
	}
	if snap.stErr != nil {
		v.add(Problem{Line: 0, Kind: KindSeal, Detail: "sealing state unreadable: " + snap.stErr.Error()})
		rep.Sealed = true
	}
	if v.st != nil {
		rep.Sealed, rep.LogID, rep.SealedCount = true, v.st.Log, v.st.Count
	}
	if opts.Key != nil {
		v.key0 = opts.Key
		v.keyID = logID(opts.Key)
		rep.Keyed = true
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
	if opts.Witness != nil {
		v.witness(path, opts.Witness)
	}
	v.rep.OK = v.rep.ProblemCount == 0
	return rep, nil
}

type snap struct {
	cp    *Checkpoint
	cpErr error
	st    *sealState
	stErr error
	f     *os.File
	size  int64
}

// snapshot reads the checkpoint, the sealing state and the log size under
// the shared lock. Both are written after the records they count are
// synced, so the first size bytes hold at least the records they promise.
func snapshot(path string) (snap, error) {
	var s snap
	if lf, err := os.Open(path + ".lock"); err == nil {
		defer lf.Close()
		if err := lockFile(lf, false); err != nil {
			return s, fmt.Errorf("audit: verify: %w", err)
		}
		defer unlockFile(lf)
	}
	s.cp, s.cpErr = readCheckpoint(path + ".checkpoint")
	s.st, s.stErr = readState(path + ".seal")
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) && (s.cp != nil || s.st != nil) {
		return s, nil // the whole log is gone: finish reports it
	}
	if err != nil {
		return s, fmt.Errorf("audit: verify: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return s, fmt.Errorf("audit: verify: %w", err)
	}
	s.f, s.size = f, fi.Size()
	return s, nil
}

type verifier struct {
	mustSeal bool // VerifyOptions.Sealed
	rep      *Report
	cp       *Checkpoint
	prevSeq  int64
	maxSeq   int64
	prevHash string
	gaps     []gap
	cpLine   int    // line of the record the checkpoint names
	cpHash   string // its hash

	st        *sealState
	stLine    int    // line of the record the sealing state names
	stHash    string // its hash
	key0      []byte // the verification key, or nil
	keyID     string // the log id it belongs to
	key       []byte // key of record keySeq
	keySeq    int64
	header    *Record       // the log_sealed record
	unmacced  bool          // a record without a MAC was reported
	intents   map[int64]int // intents awaiting their result: seq → line
	seqHashes map[int64][]recordSum
}

type recordSum struct{ hash, mac string }

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

	prefix, hash, err := canonical(r)
	var line []byte
	if err == nil {
		line = splice(prefix, r.MAC, hash)
	}
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
	v.sealed(n, r)
	switch {
	case NeedsResult(r):
		v.intents[r.Seq] = n
	case r.Type == TypeResult:
		delete(v.intents, r.Intent)
	}
	if v.seqHashes == nil {
		v.seqHashes = map[int64][]recordSum{}
	}
	v.seqHashes[r.Seq] = append(v.seqHashes[r.Seq], recordSum{r.Hash, r.MAC})
	if r.Tool == ToolAudit && r.Decision == DecisionLogTruncated {
		v.add(Problem{Line: n, Seq: r.Seq, Kind: KindTruncated,
			Detail: "records removed before this record (noticed when appending): " + r.Reason})
	}
	if v.cp != nil && r.Seq == v.cp.Count && v.cpLine == 0 {
		v.cpLine, v.cpHash = n, r.Hash
	}
	if v.st != nil && r.Seq == v.st.Count && v.stLine == 0 {
		v.stLine, v.stHash = n, r.Hash
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

// sealed checks r against the log's seal: its MAC under the key, and the
// log id of the first record.
func (v *verifier) sealed(n int, r Record) {
	if r.Tool == ToolAudit && r.Decision == DecisionLogSealed && v.header == nil {
		h := r
		v.header = &h
		v.rep.Sealed = true
		if v.rep.LogID == "" {
			v.rep.LogID = r.Log
		}
		if v.st != nil && r.Log != v.st.Log {
			v.add(Problem{Line: n, Seq: r.Seq, Kind: KindForeign,
				Detail: fmt.Sprintf("the log says it is log %s but its sealing state is for log %s (a log or state from another install)", r.Log, v.st.Log)})
		}
		if v.key0 != nil && r.Log != v.keyID {
			v.add(Problem{Line: n, Seq: r.Seq, Kind: KindForeign,
				Detail: fmt.Sprintf("the log says it is log %s but the key is for log %s (a log from another install, or the whole log replaced)", r.Log, v.keyID)})
		}
	}
	sealedLog := v.header != nil || v.st != nil || v.key0 != nil
	switch {
	case !sealedLog:
		return
	case r.MAC == "":
		if v.header != nil || v.st != nil {
			v.add(Problem{Line: n, Seq: r.Seq, Kind: KindMAC, Detail: "record carries no MAC in a sealed log (inserted or rewritten)"})
		} else if !v.unmacced {
			v.unmacced = true
			v.add(Problem{Line: n, Seq: r.Seq, Kind: KindForeign,
				Detail: fmt.Sprintf("record carries no MAC: this log is unsealed, so it is not the log the key (for log %s) seals (the whole log replaced?)", v.keyID)})
		}
	case v.key0 != nil && r.Seq > v.keyLimit(n):
		v.add(Problem{Line: n, Seq: r.Seq, Kind: KindMAC,
			Detail: "seq is far beyond the log's length (forged); its MAC was not checked"})
	case v.key0 != nil && r.Seq > 0:
		if hmacEqual(r.MAC, recordMAC(v.keyFor(r.Seq), v.keyID, r.Hash)) {
			return
		}
		v.add(Problem{Line: n, Seq: r.Seq, Kind: KindMAC,
			Detail: "MAC does not verify under the key (record edited, inserted, renumbered, or from another log)"})
	}
}

func hmacEqual(a, b string) bool { return hmac.Equal([]byte(a), []byte(b)) }

// keyLimit is the highest seq whose key Verify derives at line n: seqs may
// run ahead of lines after a truncation, but not by more than maxKeySteps.
func (v *verifier) keyLimit(n int) int64 {
	limit := int64(n)
	if v.st != nil {
		limit = max(limit, min(v.st.Count, int64(n)+maxKeySteps))
	}
	return limit + maxKeySteps
}

// keyFor returns key_seq, derived from the verification key. Records come
// in order, so this is one step per record; going back starts over.
func (v *verifier) keyFor(seq int64) []byte {
	if v.key == nil || seq < v.keySeq {
		v.key, v.keySeq = v.key0, 0
	}
	for v.keySeq < seq {
		v.key = evolve(v.key)
		v.keySeq++
	}
	return v.key
}

// finishSeal checks the sealing state against the log and the key.
func (v *verifier) finishSeal() {
	st := v.st
	if st == nil {
		if v.header != nil || (v.key0 != nil && v.rep.Records > 0 && !v.unmacced) {
			v.add(Problem{Line: 0, Kind: KindSeal,
				Detail: "the sealing state (.seal beside the log) is missing, so a truncated tail cannot be ruled out (deleted?)"})
		}
		if v.key0 != nil && v.rep.Records == 0 {
			v.add(Problem{Line: 0, Kind: KindForeign, Detail: "the log is empty and has no sealing state: it is not the log this key seals"})
		}
		return
	}
	if v.key0 != nil {
		if st.Log != v.keyID {
			v.add(Problem{Line: 0, Kind: KindForeign,
				Detail: fmt.Sprintf("the sealing state is for log %s but the key is for log %s (a state from another install)", st.Log, v.keyID)})
		} else if st.Count > v.keyLimit(v.rep.Lines) {
			v.add(Problem{Line: 0, Kind: KindSeal,
				Detail: fmt.Sprintf("the sealing state claims %d records, far beyond the log's %d lines (forged); its seal was not checked", st.Count, v.rep.Lines)})
		} else if st.Count < 1 || !hmacEqual(st.Seal, sealMAC(v.keyFor(st.Count), v.keyID, st.Count, st.LastHash)) {
			v.add(Problem{Line: 0, Kind: KindSeal,
				Detail: fmt.Sprintf("the seal over %d records does not verify under the key (sealing state rewritten)", st.Count)})
		} else if !st.Closed && st.Key != hex.EncodeToString(v.keyFor(st.Count+1)) {
			v.add(Problem{Line: 0, Kind: KindSeal,
				Detail: "the sealing state's current key is not the one the verification key evolves to (sealing state rewritten or from another install)"})
		}
	}
	switch {
	case st.Count > v.maxSeq:
		v.add(Problem{Line: v.rep.Lines + 1, Seq: v.maxSeq + 1, Kind: KindTruncated,
			Detail: fmt.Sprintf("log truncated: the sealing state has advanced to record %d, but the log ends at record %d", st.Count, v.maxSeq)})
	case v.stLine > 0 && v.stHash != st.LastHash:
		v.add(Problem{Line: v.stLine, Seq: st.Count, Kind: KindTruncated,
			Detail: fmt.Sprintf("log truncated and rewritten: the sealing state says record %d has hash %.12s…, found %.12s…", st.Count, st.LastHash, v.stHash)})
	case st.Closed && v.maxSeq > st.Count:
		v.add(Problem{Line: v.rep.Lines, Seq: v.maxSeq, Kind: KindSeal,
			Detail: fmt.Sprintf("records after the final seal of a closed log (sealed at record %d)", st.Count)})
	}
}

// witness checks that every record the witness saw for this log is in the
// log with the same hash and MAC.
func (v *verifier) witness(path string, entries []WitnessEntry) {
	id := v.rep.LogID
	if id == "" {
		id = "-"
	}
	for _, e := range entries {
		if e.Log != id {
			continue
		}
		v.rep.Witnessed++
		got, ok := v.seqHashes[e.Seq]
		switch {
		case !ok:
			v.add(Problem{Line: 0, Seq: e.Seq, Kind: KindWitness,
				Detail: fmt.Sprintf("the witness saw record %d, which is not in the log (deleted or truncated)", e.Seq)})
		case !slices.Contains(got, recordSum{e.Hash, e.MAC}):
			v.add(Problem{Line: 0, Seq: e.Seq, Kind: KindWitness,
				Detail: fmt.Sprintf("record %d is not what the witness saw (rewritten)", e.Seq)})
		}
	}
	if v.rep.Witnessed > 0 {
		return
	}
	others := map[string]bool{}
	for _, e := range entries {
		others[e.Log] = true
	}
	detail := fmt.Sprintf("the witness holds no entry for log %s (%s): witness not configured, or the wrong witness file", id, path)
	if len(others) > 0 {
		detail = fmt.Sprintf("the witness holds entries for %d other log(s) but none for log %s (%s): the log was replaced, or the wrong witness file", len(others), id, path)
	}
	v.add(Problem{Line: 0, Kind: KindWitness, Detail: detail})
}

func (v *verifier) finish() {
	v.finishSeal()
	for seq, n := range v.intents {
		v.rep.Warnings = append(v.rep.Warnings, Problem{Line: n, Seq: seq, Kind: KindDangling,
			Detail: "intent without a result: the caller was killed or crashed, or the call is still running"})
	}
	slices.SortFunc(v.rep.Warnings, func(a, b Problem) int { return a.Line - b.Line })
	switch {
	case !v.rep.Sealed && v.mustSeal:
		v.add(Problem{Line: 0, Kind: KindSeal, Detail: "the log was replaced, or deleted and started anew: it must be sealed (audit.sealed) but has no " +
			"sealing state; start a new sealed log with `hermes-sandbox audit init --rotate`"})
	case !v.rep.Sealed:
		v.rep.Caveat = caveatUnsealed
	case v.key0 == nil:
		v.rep.Caveat = caveatNoKey
	}
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
	// Records first, in line order, so the first problem names the first bad record; then
	// what concerns the log as a whole (its checkpoint or sealing state).
	slices.SortStableFunc(v.rep.Problems, func(a, b Problem) int {
		if (a.Line == 0) != (b.Line == 0) {
			return cmp.Compare(b.Line, a.Line)
		}
		return a.Line - b.Line
	})
	v.rep.OK = v.rep.ProblemCount == 0
}

func seqRange(lo, hi int64) string {
	if lo == hi {
		return fmt.Sprintf("record %d", lo)
	}
	return fmt.Sprintf("records %d..%d", lo, hi)
}
