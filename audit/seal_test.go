package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// sealedLog makes a sealed log with n calls after its first record (one intent and one
// result each) and returns its path and verification key.
func sealedLog(t testing.TB, calls int) (string, []byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state", "audit.log")
	res, err := Init(path, InitOptions{})
	if err != nil {
		t.Fatalf("Init: %v", err)
	}
	key, err := ParseKey(res.Key)
	if err != nil {
		t.Fatal(err)
	}
	l, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	writeCalls(t, l, "s", calls)
	return path, key
}

func writeCalls(t testing.TB, l *Log, session string, n int) {
	t.Helper()
	ctx := context.Background()
	for i := range n {
		seq, err := l.Intent(ctx, Record{Session: session, Backend: "local", Tool: ToolExec,
			Command: fmt.Sprintf("cmd %d", i+1), Verdict: "safe", Decision: DecisionAllowed, Approver: "policy"})
		if err != nil {
			t.Errorf("Intent(%d) = %v", i, err)
			return
		}
		code := i % 3
		if err := l.Result(ctx, seq, Record{Session: session, Backend: "local", Tool: ToolExec, ExitCode: &code}); err != nil {
			t.Errorf("Result(%d) = %v", i, err)
			return
		}
	}
}

func verifyWith(t testing.TB, path string, key []byte) Report {
	t.Helper()
	rep, err := VerifyWith(path, VerifyOptions{Key: key})
	if err != nil {
		t.Fatalf("VerifyWith(%q) error = %v", path, err)
	}
	return rep
}

// attacker edits a sealed log the way someone holding the machine could: they know the format
// and hold the current sealing state (and so the key of the next record), not earlier keys.
type attacker struct {
	t    *testing.T
	path string
	ls   [][]byte
	st   sealState
}

func newAttacker(t *testing.T, path string) *attacker {
	st, err := readState(path + ".seal")
	if err != nil || st == nil {
		t.Fatalf("readState = %v, %v", st, err)
	}
	return &attacker{t: t, path: path, ls: lines(t, path), st: *st}
}

func (a *attacker) record(i int) Record {
	var r Record
	if err := json.Unmarshal(a.ls[i], &r); err != nil {
		a.t.Fatal(err)
	}
	return r
}

// rechain renumbers and re-hashes every line from index from on, re-MACing each with the
// stolen key (the best the attacker can do), and moves the sealing state to the new tail.
func (a *attacker) rechain(from int) {
	prev := GenesisHash
	if from > 0 {
		prev = a.record(from - 1).Hash
	}
	for i := from; i < len(a.ls); i++ {
		r := a.record(i)
		r.Seq, r.PrevHash = int64(i+1), prev
		prefix, hash, err := canonical(r)
		if err != nil {
			a.t.Fatal(err)
		}
		key, _ := a.st.key()
		a.ls[i] = splice(prefix, recordMAC(key, a.st.Log, hash), hash)
		prev = hash
	}
	a.moveState()
}

// moveState points the sealing state at the last line, keeping the seal it cannot recompute.
func (a *attacker) moveState() {
	last := a.record(len(a.ls) - 1)
	a.st.Count, a.st.LastHash = last.Seq, last.Hash
}

func (a *attacker) write() {
	writeLines(a.t, a.path, a.ls)
	b, err := encodeState(a.st)
	if err != nil {
		a.t.Fatal(err)
	}
	if err := os.WriteFile(a.path+".seal", b, 0o600); err != nil {
		a.t.Fatal(err)
	}
}

// A sealed log of 1 + 2*5 = 11 records: seq 1 is the log_sealed record, then intent/result pairs.
const sealedCalls = 5

func TestSealedVerifyDetectsTampering(t *testing.T) {
	type want struct {
		ok   bool // passes (only without the key, and then with the caveat)
		seq  int64
		kind Kind
	}
	pass := want{ok: true}
	tests := []struct {
		name           string
		tamper         func(t *testing.T, a *attacker)
		withKey, nokey want
	}{
		{"edit a field", func(t *testing.T, a *attacker) {
			a.ls[3] = bytes.Replace(a.ls[3], []byte(`"cmd 2"`), []byte(`"cmd X"`), 1)
			a.write()
		}, want{seq: 4, kind: KindEdited}, want{seq: 4, kind: KindEdited}},
		{"re-chained edit with the stolen key", func(t *testing.T, a *attacker) {
			a.ls[3] = bytes.Replace(a.ls[3], []byte(`"cmd 2"`), []byte(`"innocent"`), 1)
			a.rechain(3)
			a.write()
		}, want{seq: 4, kind: KindMAC}, pass},
		{"delete a record", func(t *testing.T, a *attacker) {
			a.ls = slices.Delete(a.ls, 4, 5)
			a.write()
		}, want{seq: 6, kind: KindDeleted}, want{seq: 6, kind: KindDeleted}},
		{"delete a record and re-chain", func(t *testing.T, a *attacker) {
			a.ls = slices.Delete(a.ls, 4, 6)
			a.rechain(4)
			a.write()
		}, want{seq: 5, kind: KindMAC}, pass},
		{"reorder two records", func(t *testing.T, a *attacker) {
			a.ls[3], a.ls[4] = a.ls[4], a.ls[3]
			a.write()
		}, want{seq: 5, kind: KindReordered}, want{seq: 5, kind: KindReordered}},
		{"reorder and re-chain", func(t *testing.T, a *attacker) {
			a.ls[3], a.ls[5] = a.ls[5], a.ls[3]
			a.rechain(3)
			a.write()
		}, want{seq: 4, kind: KindMAC}, pass},
		{"insert a record without a MAC", func(t *testing.T, a *attacker) {
			r := a.record(2)
			r.Command, r.MAC = "inserted", ""
			line, _, _ := encode(r)
			a.ls = slices.Insert(a.ls, 3, line)
			a.rechain(3)
			a.ls[3] = bytes.Replace(a.ls[3], []byte(`"mac":"`+a.record(3).MAC+`",`), nil, 1)
			a.rechain(4)
			a.write()
		}, want{seq: 4, kind: KindMAC}, want{seq: 4, kind: KindMAC}},
		{"insert a record MACed with the stolen key", func(t *testing.T, a *attacker) {
			r := a.record(2)
			r.Command = "inserted"
			line, _, _ := encode(r)
			a.ls = slices.Insert(a.ls, 3, line)
			a.rechain(3)
			a.write()
		}, want{seq: 4, kind: KindMAC}, pass},
		{"truncate the tail", func(t *testing.T, a *attacker) {
			a.ls = a.ls[:7]
			writeLines(t, a.path, a.ls)
		}, want{seq: 8, kind: KindTruncated}, want{seq: 8, kind: KindTruncated}},
		{"truncate the tail and delete the sealing state", func(t *testing.T, a *attacker) {
			writeLines(t, a.path, a.ls[:7])
			os.Remove(a.path + ".seal")
		}, want{kind: KindSeal}, want{kind: KindSeal}},
		{"truncate the tail and rewrite the sealing state", func(t *testing.T, a *attacker) {
			a.ls = a.ls[:7]
			a.moveState()
			a.write()
		}, want{kind: KindSeal}, pass},
		{"rewrite the checkpoint (sealing state) backwards", func(t *testing.T, a *attacker) {
			a.ls = a.ls[:9]
			a.moveState()
			a.ls = lines(t, a.path) // the log stays whole: the state now lags it
			a.write()
		}, want{kind: KindSeal}, pass},
		{"torn sealing state", func(t *testing.T, a *attacker) {
			os.WriteFile(a.path+".seal", []byte(`{"v":1,"log":"`), 0o600)
		}, want{kind: KindSeal}, want{kind: KindSeal}},
		{"delete the log and the sealing state", func(t *testing.T, a *attacker) {
			os.Remove(a.path)
			os.Remove(a.path + ".seal")
			os.WriteFile(a.path, nil, 0o600)
		}, want{kind: KindForeign}, pass},
		{"replace the log with a fresh unsealed chain", func(t *testing.T, a *attacker) {
			os.Remove(a.path)
			os.Remove(a.path + ".seal")
			l, err := Open(a.path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			writeCalls(t, l, "s", 3)
			l.Close()
		}, want{seq: 1, kind: KindForeign}, pass},
		{"replace the log with another sealed log", func(t *testing.T, a *attacker) {
			other, _ := sealedLog(t, sealedCalls)
			for _, ext := range []string{"", ".seal"} {
				b, _ := os.ReadFile(other + ext)
				os.WriteFile(a.path+ext, b, 0o600)
			}
		}, want{seq: 1, kind: KindForeign}, pass},
		{"sealing state from another install", func(t *testing.T, a *attacker) {
			other, _ := sealedLog(t, sealedCalls)
			b, _ := os.ReadFile(other + ".seal")
			os.WriteFile(a.path+".seal", b, 0o600)
		}, want{seq: 1, kind: KindForeign}, want{seq: 1, kind: KindForeign}},
		{"log from another install", func(t *testing.T, a *attacker) {
			other, _ := sealedLog(t, sealedCalls)
			b, _ := os.ReadFile(other)
			os.WriteFile(a.path, b, 0o600)
		}, want{seq: 1, kind: KindForeign}, want{seq: 1, kind: KindForeign}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path, key := sealedLog(t, sealedCalls)
			if rep := verifyWith(t, path, key); !rep.OK || !rep.Keyed || rep.Records != 1+2*sealedCalls {
				t.Fatalf("VerifyWith before tampering = %v", rep)
			}
			tt.tamper(t, newAttacker(t, path))
			for _, c := range []struct {
				name string
				key  []byte
				want want
			}{{"with key", key, tt.withKey}, {"without key", nil, tt.nokey}} {
				rep := verifyWith(t, path, c.key)
				if c.want.ok {
					if !rep.OK || rep.Caveat == "" {
						t.Errorf("%s: VerifyWith = %v; want it to pass, with a caveat", c.name, rep)
					}
					continue
				}
				p := rep.First()
				if rep.OK || p == nil {
					t.Errorf("%s: VerifyWith = %v; want a %s problem", c.name, rep, c.want.kind)
					continue
				}
				if p.Kind != c.want.kind || p.Seq != c.want.seq {
					t.Errorf("%s: first problem = %+v; want kind %s at seq %d (all: %v)", c.name, *p, c.want.kind, c.want.seq, rep.Problems)
				}
			}
		})
	}
}

func TestSealedLogAppendsAcrossOpens(t *testing.T) {
	path, key := sealedLog(t, 2)
	l, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	writeCalls(t, l, "t", 2)
	l.Close()
	rep := verifyWith(t, path, key)
	if !rep.OK || !rep.Keyed || rep.Records != 9 || rep.SealedCount != 9 || rep.Caveat != "" {
		t.Fatalf("VerifyWith = %v; want 9 sealed records and no caveat", rep)
	}
	if !strings.Contains(rep.String(), "every MAC and the seal") {
		t.Errorf("String() = %q", rep.String())
	}
	if rep := verifyWith(t, path, nil); !rep.OK || rep.Caveat != caveatNoKey {
		t.Errorf("VerifyWith without key = %v; want ok with the no-key caveat", rep)
	}
}

func TestSealedStateLaggingAfterCrashIsAccepted(t *testing.T) {
	path, key := sealedLog(t, 2)
	old, _ := os.ReadFile(path + ".seal")
	l, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	writeCalls(t, l, "s", 1)
	// A crash after the log's sync and before the state's write leaves the old state.
	os.WriteFile(path+".seal", old, 0o600)
	if rep := verifyWith(t, path, key); !rep.OK {
		t.Fatalf("VerifyWith with a lagging state = %v", rep)
	}
	writeCalls(t, l, "s", 1) // the next commit moves the key forward past the records
	l.Close()
	if rep := verifyWith(t, path, key); !rep.OK || rep.SealedCount != 9 {
		t.Fatalf("VerifyWith after catching up = %v", rep)
	}
}

func TestSealedAppendRefusesWithoutState(t *testing.T) {
	path, _ := sealedLog(t, 1)
	os.Remove(path + ".seal")
	l, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, err = l.Intent(context.Background(), Record{Tool: ToolExec, Command: "true", Decision: DecisionAllowed})
	var ie *IntentError
	if !asIntentError(err, &ie) || ie.Warn || !strings.Contains(err.Error(), "sealing state missing") || !strings.Contains(err.Error(), path) {
		t.Fatalf("Intent without a sealing state = %v; want an IntentError naming the log and the missing state", err)
	}
	if n := len(lines(t, path)); n != 3 {
		t.Errorf("the log has %d lines; want the 3 it had", n)
	}
}

func asIntentError(err error, target **IntentError) bool {
	ie, ok := err.(*IntentError)
	*target = ie
	return ok
}

func TestSealedTruncationMarkedOnAppend(t *testing.T) {
	path, key := sealedLog(t, 3)
	ls := lines(t, path)
	writeLines(t, path, ls[:4])
	l, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	writeCalls(t, l, "s", 1)
	l.Close()
	rs, _ := ReadAll(path)
	if m := rs[4]; m.Decision != DecisionLogTruncated || m.Seq != 8 {
		t.Errorf("record after the cut = %+v; want a log_truncated marker at seq 8", m)
	}
	rep := verifyWith(t, path, key)
	if p := rep.First(); rep.OK || p == nil || p.Kind != KindDeleted || p.Seq != 8 {
		t.Errorf("VerifyWith = %v; want the deleted records 5..7 named", rep)
	}
}

func TestInitRefusesExistingAndRotates(t *testing.T) {
	path, key := sealedLog(t, 2)
	if _, err := Init(path, InitOptions{}); err == nil || !strings.Contains(err.Error(), "--rotate") {
		t.Fatalf("Init over an existing log = %v; want a refusal naming --rotate", err)
	}
	res, err := Init(path, InitOptions{Rotate: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Archived == "" || res.Warning != "" || FormatKey(key) == res.Key {
		t.Fatalf("Init --rotate = %+v", res)
	}
	old := verifyWith(t, res.Archived, key)
	if !old.OK || old.Records != 6 {
		t.Fatalf("the archive verifies as %v; want 6 records (1 + 2 calls + log_closed)", old)
	}
	rs, _ := ReadAll(res.Archived)
	if rs[len(rs)-1].Decision != DecisionLogClosed {
		t.Errorf("the archive ends with %+v; want a log_closed record", rs[len(rs)-1])
	}
	st, _ := readState(res.Archived + ".seal")
	if st == nil || !st.Closed || st.Key != "" {
		t.Errorf("the archive's final state = %+v; want closed with its key erased", st)
	}
	// The new log verifies under the new key only.
	newKey, _ := ParseKey(res.Key)
	if rep := verifyWith(t, path, newKey); !rep.OK || rep.Records != 1 {
		t.Errorf("new log = %v", rep)
	}
	if rep := verifyWith(t, path, key); rep.OK {
		t.Errorf("the new log verifies under the old key: %v", rep)
	}
	// Nothing may be added to the archive behind its final seal.
	l, err := Open(res.Archived, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Intent(context.Background(), Record{Tool: ToolExec}); err == nil {
		t.Error("appended to a closed log")
	}
}

func TestInitOverUnsealedLogNeedsRotate(t *testing.T) {
	l, path := openLog(t, Options{})
	appendN(t, l, "s", 3)
	l.Close()
	if rep := mustVerify(t, path); !rep.OK || rep.Sealed || rep.Caveat != caveatUnsealed || !strings.Contains(rep.String(), "unsealed") {
		t.Fatalf("pre-existing log = %v; want ok, reported unsealed", rep)
	}
	if _, err := Init(path, InitOptions{}); err == nil {
		t.Fatal("Init overwrote an unsealed log")
	}
	res, err := Init(path, InitOptions{Rotate: true})
	if err != nil {
		t.Fatal(err)
	}
	if rep := mustVerify(t, res.Archived); !rep.OK || rep.Records != 4 {
		t.Errorf("archived unsealed log = %v; want 4 records (3 + log_closed)", rep)
	}
}

func TestDanglingIntentIsAWarning(t *testing.T) {
	path, key := sealedLog(t, 1)
	l, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	seq, err := l.Intent(context.Background(), Record{Session: "s", Tool: ToolExec, Command: "sleep 100", Decision: DecisionAllowed})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Append(context.Background(), Record{Session: "s", Type: TypeIntent, Tool: ToolExec, Command: "rm -rf /", Decision: DecisionRefused}); err != nil {
		t.Fatal(err)
	}
	l.Close()
	rep := verifyWith(t, path, key)
	if !rep.OK || len(rep.Warnings) != 1 || rep.Warnings[0].Seq != seq || rep.Warnings[0].Kind != KindDangling {
		t.Fatalf("VerifyWith = %+v; want ok with one dangling-intent warning for seq %d", rep, seq)
	}
	if !strings.Contains(rep.String(), "warning: ") {
		t.Errorf("String() = %q; want the warning shown", rep.String())
	}
	rs, _ := ReadAll(path)
	calls := Pair(rs)
	if len(calls) != 4 || !calls[2].Dangling() || calls[1].Result == nil || calls[3].Dangling() {
		t.Fatalf("Pair = %+v; want header, a paired call, the dangling intent and the refusal", calls)
	}
	if s := FormatCall(calls[2]); !strings.Contains(s, "NO RESULT") || !strings.Contains(s, "sleep 100") {
		t.Errorf("FormatCall(dangling) = %q", s)
	}
	if s := FormatCall(calls[1]); !strings.Contains(s, "exit=0") || !strings.Contains(s, "cmd 1") {
		t.Errorf("FormatCall(paired) = %q; want the intent's command with the result's exit code", s)
	}
}

func TestParseKey(t *testing.T) {
	for _, bad := range []string{"", "hsa1-", "hsa1-zz", "76f50c83d2f23b40d99da65b09faf1b18ee8a0640e364f574b2d8870792fef95",
		"hsa1-76f50c83d2f23b40d99da65b09faf1b18ee8a0640e364f574b2d8870792fef"} {
		if _, err := ParseKey(bad); err == nil {
			t.Errorf("ParseKey(%q) = nil error; want one", bad)
		}
	}
	k := bytes.Repeat([]byte{7}, keySize)
	if got, err := ParseKey(" " + FormatKey(k) + "\n"); err != nil || !bytes.Equal(got, k) {
		t.Errorf("ParseKey(FormatKey(k)) = %x, %v", got, err)
	}
}

func TestIntentLockTimeout(t *testing.T) {
	path, _ := sealedLog(t, 0)
	// Another process's writer, stuck while holding the lock.
	holder, err := os.OpenFile(path+".lock", os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	if err := lockFile(holder, true); err != nil {
		t.Fatal(err)
	}
	l, err := Open(path, Options{LockTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, err = l.Intent(context.Background(), Record{Tool: ToolExec, Command: "true", Decision: DecisionAllowed})
	if err == nil || !strings.Contains(err.Error(), "(lock timeout)") || !strings.Contains(err.Error(), path) {
		t.Fatalf("Intent while another writer holds the lock = %v; want a lock timeout naming the log", err)
	}
	// Once the lock is free, the log works again (the timed-out wait gave its descriptor up).
	unlockFile(holder)
	if _, err := l.Intent(context.Background(), Record{Tool: ToolExec, Command: "true", Decision: DecisionAllowed}); err != nil {
		t.Fatalf("Intent after the lock was released = %v", err)
	}
}

func TestForgedHugeSeqDoesNotStall(t *testing.T) {
	path, key := sealedLog(t, 1)
	a := newAttacker(t, path)
	r := a.record(len(a.ls) - 1)
	r.Seq, r.PrevHash = 1<<50, r.Hash
	line, _, _ := encode(r)
	a.ls = append(a.ls, line)
	writeLines(t, path, a.ls)
	start := time.Now()
	rep := verifyWith(t, path, key)
	if rep.OK || time.Since(start) > 30*time.Second {
		t.Fatalf("VerifyWith = %v after %s; want a quick failure", rep, time.Since(start))
	}
	l, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Intent(context.Background(), Record{Tool: ToolExec, Decision: DecisionAllowed}); err == nil || !strings.Contains(err.Error(), "past the sealing state") {
		t.Errorf("Intent after a forged huge seq = %v; want a refusal", err)
	}
}
