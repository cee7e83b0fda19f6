package sandbox

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type testRecord struct {
	ID   string `json:"id"`
	Mode string `json:"mode,omitempty"`
}

func bareID(data []byte) (testRecord, bool) {
	id := strings.TrimSpace(string(data))
	return testRecord{ID: id}, id != ""
}

func TestRecordsRoundTrip(t *testing.T) {
	for _, ext := range []string{"", ".json", "/instance"} {
		r := &Records[testRecord]{Dir: filepath.Join(t.TempDir(), "sessions"), Ext: ext}
		if _, _, ok := r.Read("s1"); ok {
			t.Errorf("Read(%q) before any Write: ok; want absent", "s1")
		}
		want := testRecord{ID: "abc", Mode: "helper"}
		if err := r.Write("s1", want); err != nil {
			t.Fatalf("Write(%q) = %v", "s1", err)
		}
		if err := r.Write("s2", testRecord{ID: "def"}); err != nil {
			t.Fatal(err)
		}
		got, used, ok := r.Read("s1")
		if !ok || got != want || time.Since(used) > time.Minute {
			t.Errorf("Ext %q: Read(s1) = %+v, %v, %v; want %+v, now, true", ext, got, used, ok, want)
		}
		fi, err := os.Stat(r.Path("s1"))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("Ext %q: record %s: %v, mode %v; want 0600", ext, r.Path("s1"), err, fi.Mode())
		}
		list, err := r.List()
		if err != nil || len(list) != 2 || list[0].Session != "s1" || list[1].Record.ID != "def" {
			t.Errorf("Ext %q: List() = %+v, %v; want s1 and s2", ext, list, err)
		}
		if !r.Drop("s1") || r.Drop("s1") {
			t.Errorf("Ext %q: Drop(s1) twice: want true, then false", ext)
		}
		if _, _, ok := r.Read("s1"); ok {
			t.Errorf("Ext %q: Read(s1) after Drop: ok; want absent", ext)
		}
	}
}

func TestRecordsTouchIsLastUse(t *testing.T) {
	r := &Records[testRecord]{Dir: t.TempDir()}
	if err := r.Write("s", testRecord{ID: "x"}); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-3 * time.Hour)
	if err := os.Chtimes(r.Path("s"), old, old); err != nil {
		t.Fatal(err)
	}
	if _, used, _ := r.Read("s"); used.Sub(old).Abs() > time.Second {
		t.Fatalf("Read(s) used = %v; want %v", used, old)
	}
	r.Touch("s")
	if _, used, _ := r.Read("s"); time.Since(used) > time.Minute {
		t.Errorf("Read(s) after Touch: used = %v; want now", used)
	}
	r.Touch("never") // no record: stays without one
	if _, err := os.Stat(r.Path("never")); !os.IsNotExist(err) {
		t.Errorf("Touch(never) made a record: %v", err)
	}
}

func TestRecordsLegacyAndCorrupt(t *testing.T) {
	var logs bytes.Buffer
	dir := t.TempDir()
	r := &Records[testRecord]{Dir: dir, Legacy: bareID, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	for name, content := range map[string]string{
		"bare":    "3f2a9c\n",           // the pre-JSON form: a bare id
		"numeric": "123e4567\n",         // a bare id that is also a JSON number
		"torn":    `{"id": "abc", "mo`,  // half-written JSON
		"empty":   "",                   // the legacy decoder refuses it
		"wrong":   `{"id": ["a", "b"]}`, // JSON of another shape
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct {
		session string
		want    testRecord
		ok      bool
	}{
		{"bare", testRecord{ID: "3f2a9c"}, true},
		{"numeric", testRecord{ID: "123e4567"}, true},
		{"torn", testRecord{}, false},
		{"empty", testRecord{}, false},
		{"wrong", testRecord{}, false},
	} {
		got, _, ok := r.Read(tt.session)
		if got != tt.want || ok != tt.ok {
			t.Errorf("Read(%q) = %+v, %v; want %+v, %v", tt.session, got, ok, tt.want, tt.ok)
		}
	}
	for _, s := range []string{"torn", "empty", "wrong"} {
		if !strings.Contains(logs.String(), "session="+s) {
			t.Errorf("no warning names the corrupt record %q; log:\n%s", s, logs.String())
		}
	}
	if strings.Contains(logs.String(), "session=bare") {
		t.Errorf("a legacy record was warned about; log:\n%s", logs.String())
	}
	// Without a legacy decoder a bare id is corrupt; rewriting it makes it JSON.
	r.Legacy = nil
	if _, _, ok := r.Read("bare"); ok {
		t.Errorf("Read(bare) without Legacy: ok; want absent")
	}
	if err := r.Write("bare", testRecord{ID: "new"}); err != nil {
		t.Fatal(err)
	}
	if got, _, ok := r.Read("bare"); !ok || got.ID != "new" {
		t.Errorf("Read(bare) after Write = %+v, %v; want new", got, ok)
	}
	// List skips what is not a session's record: temporary files, other names.
	os.WriteFile(filepath.Join(dir, ".bare.123.tmp"), []byte(`{"id":"t"}`), 0o600)
	list, _ := r.List()
	for _, e := range list {
		if e.Session != "bare" {
			t.Errorf("List() returned %q; want only bare (the others are corrupt or not records)", e.Session)
		}
	}
}

func TestBareID(t *testing.T) {
	for in, want := range map[string]bool{"3f2a\n": true, "uid-1": true, "": false, " \n": false, "a\nb\n": false} {
		got, ok := BareID([]byte(in))
		if ok != want || (ok && got.ID != strings.TrimSpace(in)) {
			t.Errorf("BareID(%q) = %+v, %v; want ok %v", in, got, ok, want)
		}
	}
}

func TestRecordsWriteFailure(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o600)
	r := &Records[testRecord]{Dir: filepath.Join(file, "sessions")} // under a file: cannot exist
	if err := r.Write("s", testRecord{ID: "x"}); err == nil {
		t.Errorf("Write under a file = nil; want an error")
	}
	if list, err := r.List(); err == nil || list != nil {
		t.Errorf("List() under a file = %v, %v; want an error", list, err)
	}
}

// TestRecordsReaderNeverSeesTornRecord: while writers replace a session's record, every
// concurrent Read finds a whole record, one of the writers', never a truncated or mixed one
// (which would read as absent, and make the session look lost).
func TestRecordsReaderNeverSeesTornRecord(t *testing.T) {
	type big struct {
		ID      string `json:"id"`
		Payload string `json:"payload"`
	}
	r := &Records[big]{Dir: t.TempDir()}
	recs := make([]big, 8)
	for i := range recs {
		c := string(rune('a' + i))
		recs[i] = big{ID: c, Payload: strings.Repeat(c, 256<<10+i)}
	}
	if err := r.Write("s", recs[0]); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var readers sync.WaitGroup
	var reads, torn atomic.Int64
	for range 4 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				rec, _, ok := r.Read("s")
				reads.Add(1)
				if !ok || len(rec.ID) != 1 || rec.Payload != strings.Repeat(rec.ID, len(rec.Payload)) ||
					len(rec.Payload) != 256<<10+int(rec.ID[0]-'a') {
					torn.Add(1)
				}
			}
		}()
	}
	var writers sync.WaitGroup
	for _, rec := range recs {
		writers.Add(1)
		go func() {
			defer writers.Done()
			for range 25 {
				if err := r.Write("s", rec); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	writers.Wait()
	close(stop)
	readers.Wait()
	if n := torn.Load(); n > 0 {
		t.Errorf("%d of %d reads during writes found no whole record", n, reads.Load())
	}
	if reads.Load() == 0 {
		t.Errorf("no read ran while the writers wrote")
	}
}

// TestRecordsTouchEvery: with TouchEvery a session is marked used at most once per interval,
// each session on its own clock, and a dropped session's clock starts again.
func TestRecordsTouchEvery(t *testing.T) {
	r := &Records[testRecord]{Dir: t.TempDir(), TouchEvery: time.Hour}
	old := time.Now().Add(-3 * time.Hour)
	age := func(s string) {
		t.Helper()
		if err := os.Chtimes(r.Path(s), old, old); err != nil {
			t.Fatal(err)
		}
	}
	touched := func(s string) bool {
		_, used, ok := r.Read(s)
		return ok && time.Since(used) < time.Minute
	}
	for _, s := range []string{"a", "b"} {
		if err := r.Write(s, testRecord{ID: s}); err != nil {
			t.Fatal(err)
		}
		age(s)
	}
	r.Touch("a")
	if !touched("a") {
		t.Fatalf("first Touch(a) did not mark it used")
	}
	age("a")
	r.Touch("a")
	if touched("a") {
		t.Errorf("second Touch(a) within TouchEvery marked it used; want it skipped")
	}
	r.Touch("b")
	if !touched("b") {
		t.Errorf("Touch(b) after Touch(a) did not mark b used; each session has its own clock")
	}
	r.Drop("a")
	if err := r.Write("a", testRecord{ID: "a2"}); err != nil {
		t.Fatal(err)
	}
	age("a")
	r.Touch("a")
	if !touched("a") {
		t.Errorf("Touch(a) after Drop and Write did not mark it used")
	}
}
