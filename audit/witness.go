package audit

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Witness kinds (audit.witness).
const (
	WitnessSyslog   = "syslog"
	WitnessJournald = "journald"
)

// Default sockets of the system log.
const (
	DefaultSyslogSocket   = "/dev/log"
	DefaultJournaldSocket = "/run/systemd/journal/socket"
)

// ErrWitness: the configured witness cannot be reached.
var ErrWitness = errors.New("witness unavailable")

// witnessTag starts every message a witness sends, so verify can find them
// in a syslog file or in `journalctl -o cat` output.
const witnessTag = "hermes-sandbox-audit"

// WitnessEntry is what a witness keeps of one record.
type WitnessEntry struct {
	Log  string // the log id; "-" for an unsealed log
	Seq  int64
	Hash string
	MAC  string // "" in an unsealed log
}

func (e WitnessEntry) message() string {
	s := fmt.Sprintf("%s log=%s seq=%d hash=%s", witnessTag, e.Log, e.Seq, e.Hash)
	if e.MAC != "" {
		s += " mac=" + e.MAC
	}
	return s
}

// Witness sends each record's seq, hash and MAC to the system log, so that
// a deleted or rewritten log file still leaves a trail elsewhere.
type Witness struct {
	kind, addr string

	mu   sync.Mutex
	conn net.Conn // guarded by mu
}

// NewWitness connects to the system log: kind is WitnessSyslog or
// WitnessJournald, and addr the socket ("" for the default one). It fails
// when the socket cannot be reached, so a witness that was asked for is
// never silently missing.
func NewWitness(kind, addr string) (*Witness, error) {
	switch kind {
	case WitnessSyslog:
		if addr == "" {
			addr = DefaultSyslogSocket
		}
	case WitnessJournald:
		if addr == "" {
			addr = DefaultJournaldSocket
		}
	default:
		return nil, fmt.Errorf("audit: unknown witness %q: want syslog or journald", kind)
	}
	w := &Witness{kind: kind, addr: addr}
	if err := w.dial(); err != nil {
		return nil, fmt.Errorf("audit: %w: %s at %s: %w (is the system log running? set audit.witness_socket, or unset audit.witness)", ErrWitness, kind, addr, err)
	}
	return w, nil
}

func (w *Witness) dial() error {
	c, err := net.Dial("unixgram", w.addr)
	if err != nil {
		return err
	}
	w.conn = c
	return nil
}

// send writes one entry, redialling once if the log daemon restarted.
func (w *Witness) send(e WitnessEntry) error {
	msg := w.format(e)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.conn == nil {
		return fmt.Errorf("audit: witness %s: closed", w.kind)
	}
	if _, err := w.conn.Write(msg); err == nil {
		return nil
	}
	w.conn.Close()
	if err := w.dial(); err != nil {
		w.conn = nil
		return fmt.Errorf("audit: witness %s: %w", w.kind, err)
	}
	_, err := w.conn.Write(msg)
	return err
}

// format renders e as a syslog datagram (RFC 3164, facility authpriv,
// severity info) or a journald native-protocol entry.
func (w *Witness) format(e WitnessEntry) []byte {
	if w.kind == WitnessJournald {
		return fmt.Appendf(nil, "MESSAGE=%s\nSYSLOG_IDENTIFIER=hermes-sandbox\nPRIORITY=6\nSYSLOG_FACILITY=10\nHERMES_AUDIT_LOG=%s\nHERMES_AUDIT_SEQ=%d\n",
			e.message(), e.Log, e.Seq)
	}
	const pri = 10*8 + 6 // authpriv.info
	return fmt.Appendf(nil, "<%d>%s hermes-sandbox[%d]: %s", pri, time.Now().Format(time.Stamp), os.Getpid(), e.message())
}

// Close closes the connection.
func (w *Witness) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.conn == nil {
		return nil
	}
	err := w.conn.Close()
	w.conn = nil
	return err
}

// ReadWitness parses the witness entries in r: a syslog file, or the output
// of `journalctl -t hermes-sandbox -o cat`. Other lines are skipped.
func ReadWitness(r io.Reader) ([]WitnessEntry, error) {
	var out []WitnessEntry
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		_, msg, ok := strings.Cut(sc.Text(), witnessTag+" ")
		if !ok {
			continue
		}
		var e WitnessEntry
		for _, f := range strings.Fields(msg) {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "log":
				e.Log = v
			case "seq":
				e.Seq, _ = strconv.ParseInt(v, 10, 64)
			case "hash":
				e.Hash = v
			case "mac":
				e.MAC = v
			}
		}
		if e.Log != "" && e.Seq > 0 && e.Hash != "" {
			out = append(out, e)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("audit: read witness: %w", err)
	}
	return out, nil
}
