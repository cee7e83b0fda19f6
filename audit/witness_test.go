package audit

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeSyslog is a unix datagram socket standing in for /dev/log: it keeps every message.
type fakeSyslog struct {
	path string
	conn *net.UnixConn
	mu   sync.Mutex
	msgs []string
	done chan struct{}
}

func newFakeSyslog(t *testing.T) *fakeSyslog {
	t.Helper()
	// Socket paths are limited to ~108 bytes: t.TempDir() can be longer.
	dir, err := os.MkdirTemp("", "hs-audit-syslog-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	s := &fakeSyslog{path: filepath.Join(dir, "log"), done: make(chan struct{})}
	s.conn, err = net.ListenUnixgram("unixgram", &net.UnixAddr{Name: s.path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(s.done)
		buf := make([]byte, 8192)
		for {
			n, _, err := s.conn.ReadFromUnix(buf)
			if err != nil {
				return
			}
			s.mu.Lock()
			s.msgs = append(s.msgs, string(buf[:n]))
			s.mu.Unlock()
		}
	}()
	t.Cleanup(func() { s.conn.Close(); <-s.done })
	return s
}

// waitFor polls until the socket has received n messages and returns them as a log file would
// hold them, one per line.
func (s *fakeSyslog) waitFor(t *testing.T, n int) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.mu.Lock()
		got := len(s.msgs)
		text := strings.Join(s.msgs, "\n") + "\n"
		s.mu.Unlock()
		if got >= n {
			return text
		}
		if time.Now().After(deadline) {
			t.Fatalf("the fake syslog received %d messages; want %d", got, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestWitnessSyslog(t *testing.T) {
	sys := newFakeSyslog(t)
	path, key := sealedLog(t, 0)
	w, err := NewWitness(WitnessSyslog, sys.path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	l, err := Open(path, Options{Witness: w})
	if err != nil {
		t.Fatal(err)
	}
	writeCalls(t, l, "s", 3)
	l.Close()
	text := sys.waitFor(t, 6)
	if !strings.HasPrefix(text, "<86>") || !strings.Contains(text, "hermes-sandbox[") {
		t.Errorf("syslog message %q; want an RFC 3164 authpriv.info line", strings.SplitN(text, "\n", 2)[0])
	}
	entries, err := ReadWitness(strings.NewReader("unrelated line\n" + text))
	if err != nil || len(entries) != 6 {
		t.Fatalf("ReadWitness = %d entries, %v; want 6", len(entries), err)
	}
	rs, _ := ReadAll(path)
	if e := entries[0]; e.Seq != 2 || e.MAC != rs[1].MAC || e.Hash != rs[1].Hash || e.Log == "-" {
		t.Errorf("first entry = %+v; want record 2's seq, hash and MAC", e)
	}

	rep, err := VerifyWith(path, VerifyOptions{Key: key, Witness: entries})
	if err != nil || !rep.OK || rep.Witnessed != 6 {
		t.Fatalf("VerifyWith(witness) = %v, %v; want ok with 6 entries checked", rep, err)
	}
	// Someone deletes the last call and rewrites the sealing state to match: without the key
	// only the witness tells.
	a := newAttacker(t, path)
	a.ls = a.ls[:5]
	a.moveState()
	a.write()
	if rep, _ := VerifyWith(path, VerifyOptions{}); !rep.OK {
		t.Fatalf("without key or witness the cut should pass (with a caveat): %v", rep)
	}
	rep, _ = VerifyWith(path, VerifyOptions{Witness: entries})
	if p := rep.First(); rep.OK || p == nil || p.Kind != KindWitness || p.Seq != 6 {
		t.Errorf("VerifyWith(witness) after the cut = %v; want record 6 named as witnessed but missing", rep)
	}
	// Rewriting a witnessed record is caught too.
	a.ls[2] = bytes.Replace(a.ls[2], []byte(`"cmd 1"`), []byte(`"cmd X"`), 1)
	a.rechain(2)
	a.write()
	rep, _ = VerifyWith(path, VerifyOptions{Witness: entries})
	if rep.OK || !strings.Contains(rep.String(), "record 3 is not what the witness saw") {
		t.Errorf("VerifyWith(witness) after a rewrite = %v; want record 3 named", rep)
	}
	// A log replaced wholesale has no witness entries at all.
	os.Remove(path + ".seal")
	os.Remove(path)
	other, _ := sealedLog(t, 1)
	b, _ := os.ReadFile(other)
	os.WriteFile(path, b, 0o600)
	b, _ = os.ReadFile(other + ".seal")
	os.WriteFile(path+".seal", b, 0o600)
	if rep, _ := VerifyWith(path, VerifyOptions{Witness: entries}); rep.OK || !strings.Contains(rep.String(), "the log was replaced") {
		t.Errorf("VerifyWith(witness) of a replaced log = %v", rep)
	}
}

func TestWitnessJournaldFormat(t *testing.T) {
	sys := newFakeSyslog(t) // the journal's native socket is a unix datagram socket too
	w, err := NewWitness(WitnessJournald, sys.path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.send(WitnessEntry{Log: "abc", Seq: 7, Hash: "h", MAC: "m"}); err != nil {
		t.Fatal(err)
	}
	msg := sys.waitFor(t, 1)
	for _, want := range []string{"MESSAGE=hermes-sandbox-audit log=abc seq=7 hash=h mac=m\n", "SYSLOG_IDENTIFIER=hermes-sandbox\n", "HERMES_AUDIT_SEQ=7\n"} {
		if !strings.Contains(msg, want) {
			t.Errorf("journald entry %q lacks %q", msg, want)
		}
	}
	// `journalctl -o cat` prints the MESSAGE field: ReadWitness takes that.
	es, _ := ReadWitness(strings.NewReader("hermes-sandbox-audit log=abc seq=7 hash=h mac=m\n"))
	if len(es) != 1 || es[0] != (WitnessEntry{Log: "abc", Seq: 7, Hash: "h", MAC: "m"}) {
		t.Errorf("ReadWitness = %+v", es)
	}
}

func TestWitnessMissingSocketFails(t *testing.T) {
	_, err := NewWitness(WitnessSyslog, filepath.Join(t.TempDir(), "no-such-socket"))
	if err == nil || !strings.Contains(err.Error(), "audit.witness") || Cause(err) != "witness unavailable" {
		t.Errorf("NewWitness(missing socket) = %v; want an error that names audit.witness", err)
	}
	if _, err := NewWitness("carrier-pigeon", ""); err == nil {
		t.Error("NewWitness(unknown kind) succeeded")
	}
}

func TestWitnessSurvivesDaemonRestart(t *testing.T) {
	sys := newFakeSyslog(t)
	w, err := NewWitness(WitnessSyslog, sys.path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	// The daemon restarts: its socket is made anew at the same path.
	sys.conn.Close()
	<-sys.done
	os.Remove(sys.path)
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sys.path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := w.send(WitnessEntry{Log: "x", Seq: 1, Hash: "h"}); err != nil {
		t.Fatalf("send after a restart = %v; want it to redial", err)
	}
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 4096)
	n, _, err := conn.ReadFromUnix(buf)
	if err != nil || !strings.Contains(string(buf[:n]), "seq=1 hash=h") {
		t.Errorf("restarted daemon got %q, %v", buf[:n], err)
	}
}
