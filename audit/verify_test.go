package audit

import (
	"bytes"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
)

// rehash returns line with its command changed and a valid hash, as an
// attacker who knows the format would write it.
func rehash(t *testing.T, line []byte, command string) []byte {
	t.Helper()
	var r Record
	if err := json.Unmarshal(line, &r); err != nil {
		t.Fatal(err)
	}
	r.Command = command
	out, _, err := encode(r)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func writeLines(t *testing.T, path string, ls [][]byte) {
	t.Helper()
	b := append(bytes.Join(ls, []byte{'\n'}), '\n')
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestVerifyDetectsTampering(t *testing.T) {
	tests := []struct {
		name   string
		tamper func(t *testing.T, path string, ls [][]byte)
		line   int
		seq    int64
		kind   Kind
		detail string
	}{
		{"edit a field", func(t *testing.T, path string, ls [][]byte) {
			ls[3] = bytes.Replace(ls[3], []byte(`"cmd 4"`), []byte(`"cmd X"`), 1)
			writeLines(t, path, ls)
		}, 4, 4, KindEdited, "hash mismatch (record edited)"},
		{"edit the exit code", func(t *testing.T, path string, ls [][]byte) {
			ls[5] = bytes.Replace(ls[5], []byte(`"exit_code":2`), []byte(`"exit_code":0`), 1)
			writeLines(t, path, ls)
		}, 6, 6, KindEdited, "hash mismatch (record edited)"},
		{"edit and rehash", func(t *testing.T, path string, ls [][]byte) {
			ls[3] = rehash(t, ls[3], "innocent")
			writeLines(t, path, ls)
		}, 5, 5, KindChainBroken, "prev_hash does not match previous record"},
		{"reformat a record", func(t *testing.T, path string, ls [][]byte) {
			ls[3] = bytes.Replace(ls[3], []byte(`{"seq"`), []byte(`{ "seq"`), 1)
			writeLines(t, path, ls)
		}, 4, 4, KindEdited, "not in canonical form"},
		{"add a field", func(t *testing.T, path string, ls [][]byte) {
			ls[3] = bytes.Replace(ls[3], []byte(`{"seq"`), []byte(`{"note":"x","seq"`), 1)
			writeLines(t, path, ls)
		}, 4, 4, KindEdited, "not in canonical form"},
		{"delete a line", func(t *testing.T, path string, ls [][]byte) {
			writeLines(t, path, slices.Delete(ls, 3, 4))
		}, 4, 5, KindDeleted, "seq gap: expected seq 4, found 5; prev_hash does not match previous record (record 4 deleted)"},
		{"delete the first two lines", func(t *testing.T, path string, ls [][]byte) {
			writeLines(t, path, ls[2:])
		}, 1, 3, KindDeleted, "records 1..2 deleted"},
		{"swap two lines", func(t *testing.T, path string, ls [][]byte) {
			ls[3], ls[4] = ls[4], ls[3]
			writeLines(t, path, ls)
		}, 4, 5, KindReordered, "expected seq 4, found 5; seq 4 appears at line 5 (records reordered)"},
		{"move a line to the end", func(t *testing.T, path string, ls [][]byte) {
			moved := ls[1]
			ls = append(slices.Delete(ls, 1, 2), moved)
			writeLines(t, path, ls)
		}, 2, 3, KindReordered, "records reordered"},
		{"duplicate a line", func(t *testing.T, path string, ls [][]byte) {
			writeLines(t, path, slices.Insert(ls, 4, ls[3]))
		}, 5, 4, KindDuplicated, "seq 4 appears again"},
		{"truncate the tail", func(t *testing.T, path string, ls [][]byte) {
			writeLines(t, path, ls[:8])
		}, 9, 9, KindTruncated, "log truncated: checkpoint says 10 records, found 8"},
		{"rewrite the last record", func(t *testing.T, path string, ls [][]byte) {
			ls[9] = rehash(t, ls[9], "innocent")
			writeLines(t, path, ls)
		}, 10, 10, KindTruncated, "checkpoint says record 10 has hash"},
		{"delete the log", func(t *testing.T, path string, ls [][]byte) {
			os.Remove(path)
		}, 1, 1, KindTruncated, "log truncated: checkpoint says 10 records, found 0"},
		{"torn last line", func(t *testing.T, path string, ls [][]byte) {
			b := append(bytes.Join(ls, []byte{'\n'}), '\n')
			b = append(b, ls[9][:len(ls[9])/2]...) // half of a record, no newline
			os.WriteFile(path, b, 0o600)
		}, 11, 0, KindTorn, "torn last line (incomplete write)"},
		{"cut in the middle of the last line", func(t *testing.T, path string, ls [][]byte) {
			fi, _ := os.Stat(path)
			os.Truncate(path, fi.Size()-int64(len(ls[9])/2))
		}, 10, 0, KindTorn, "torn last line (incomplete write)"},
		{"invalid JSON", func(t *testing.T, path string, ls [][]byte) {
			ls[2] = []byte("this is not json")
			writeLines(t, path, ls)
		}, 3, 0, KindInvalid, "invalid JSON"},
		{"empty line", func(t *testing.T, path string, ls [][]byte) {
			writeLines(t, path, slices.Insert(ls, 2, []byte{}))
		}, 3, 0, KindInvalid, "empty line"},
		{"garbage checkpoint", func(t *testing.T, path string, ls [][]byte) {
			os.WriteFile(path+".checkpoint", []byte("{nope"), 0o600)
		}, 0, 0, KindCheckpoint, "checkpoint unreadable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, path := openLog(t, Options{})
			appendN(t, l, "s", 10)
			l.Close()
			if rep := mustVerify(t, path); !rep.OK {
				t.Fatalf("Verify before tampering = %v", rep)
			}
			tt.tamper(t, path, lines(t, path))
			rep := mustVerify(t, path)
			p := rep.First()
			if rep.OK || p == nil {
				t.Fatalf("Verify = %v; want a problem", rep)
			}
			if p.Line != tt.line || p.Seq != tt.seq || p.Kind != tt.kind || !strings.Contains(p.Detail, tt.detail) {
				t.Errorf("first problem = %+v; want line %d, seq %d, kind %s, detail containing %q (all: %v)",
					*p, tt.line, tt.seq, tt.kind, tt.detail, rep.Problems)
			}
		})
	}
}

func TestVerifyEmptyAndMissing(t *testing.T) {
	l, path := openLog(t, Options{})
	l.Close()
	if rep := mustVerify(t, path); !rep.OK || rep.Records != 0 {
		t.Errorf("Verify(empty) = %v; want ok with 0 records", rep)
	}
	if _, err := Verify(path + ".nope"); err == nil {
		t.Error("Verify(missing) succeeded; want an error")
	}
}

func TestReportString(t *testing.T) {
	l, path := openLog(t, Options{})
	appendN(t, l, "s", 3)
	rep := mustVerify(t, path)
	if s := rep.String(); !strings.HasPrefix(s, "ok: 3 records") {
		t.Errorf("String() = %q; want ok: 3 records…", s)
	}
	ls := lines(t, path)
	writeLines(t, path, ls[1:])
	rep = mustVerify(t, path)
	if s := rep.String(); !strings.Contains(s, "FAILED") || !strings.Contains(s, "line 1 (seq 2): seq gap") {
		t.Errorf("String() = %q; want FAILED naming line 1", s)
	}
}
