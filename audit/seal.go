package audit

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
)

// Forward-secure sealing.
//
// Init draws a random 32-byte key_0, prints it once as the verification key
// and keeps only key_1 = evolve(key_0). Record seq s carries
// MAC = HMAC-SHA-256(key_s, "record" | log id | hash). After each commit of
// records up to n, the sealing state holds key_{n+1} (key_n is overwritten in
// place) and a seal = HMAC-SHA-256(key_n, "seal" | log id | n | last hash).
// Someone who takes the machine at record n learns key_{n+1} and nothing
// before it: they cannot re-MAC an edited record, re-seal a shorter log, or
// make a fresh log that the verification key accepts.

// keyPrefix starts every verification key, so a wrong paste is recognised.
const keyPrefix = "hsa1-"

// keySize is the size of every sealing key.
const keySize = sha256.Size

// stateSize is the fixed size of the sealing state file: it is rewritten in
// place, so the old key does not survive in a freed block.
const stateSize = 512

// maxKeySteps bounds how far a key is moved forward in one go (about a third
// of a second of hashing), so a forged, huge seq cannot stall a writer or
// Verify.
const maxKeySteps = 1 << 20

// stateVersion is the format of the sealing state file.
const stateVersion = 1

// evolve returns the next sealing key. It cannot be run backwards.
func evolve(k []byte) []byte {
	h := sha256.New()
	h.Write([]byte("hermes-sandbox audit key evolve\x00"))
	h.Write(k)
	return h.Sum(nil)
}

// logID derives a log's public id from its verification key.
func logID(key0 []byte) string {
	h := sha256.New()
	h.Write([]byte("hermes-sandbox audit log id\x00"))
	h.Write(key0)
	return hex.EncodeToString(h.Sum(nil)[:16])
}

func recordMAC(key []byte, log, hash string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("record\x00"))
	m.Write([]byte(log))
	m.Write([]byte(hash))
	return hex.EncodeToString(m.Sum(nil))
}

func sealMAC(key []byte, log string, count int64, lastHash string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("seal\x00"))
	m.Write([]byte(log))
	m.Write(binary.BigEndian.AppendUint64(nil, uint64(count)))
	m.Write([]byte(lastHash))
	return hex.EncodeToString(m.Sum(nil))
}

// FormatKey renders a verification key for the operator.
func FormatKey(key0 []byte) string { return keyPrefix + hex.EncodeToString(key0) }

// ParseKey parses a verification key printed by Init.
func ParseKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	rest, ok := strings.CutPrefix(s, keyPrefix)
	if !ok {
		return nil, fmt.Errorf("audit: verification key must start with %q (the last line `hermes-sandbox audit init` printed)", keyPrefix)
	}
	k, err := hex.DecodeString(rest)
	if err != nil || len(k) != keySize {
		return nil, fmt.Errorf("audit: verification key must be %q followed by %d hex digits", keyPrefix, 2*keySize)
	}
	return k, nil
}

// sealState is the sealing state of a log, in P.seal.
type sealState struct {
	Version  int    `json:"v"`
	Log      string `json:"log"`
	Count    int64  `json:"count"`     // seq of the last sealed record
	LastHash string `json:"last_hash"` // its hash
	// Key is key_{Count+1}, the key of the next record; empty once closed.
	Key  string `json:"key,omitempty"`
	Seal string `json:"seal"` // sealMAC(key_Count, Log, Count, LastHash)
	// Closed marks the final seal of an archived log: nothing may follow.
	Closed bool   `json:"closed,omitempty"`
	Sum    string `json:"sum"` // SHA-256 of this JSON with Sum empty: catches a torn write
}

func (st *sealState) sum() string {
	c := *st
	c.Sum = ""
	b, _ := json.Marshal(c)
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// key decodes the next key.
func (st *sealState) key() ([]byte, error) {
	k, err := hex.DecodeString(st.Key)
	if err != nil || len(k) != keySize {
		return nil, errors.New("sealing state holds no valid key")
	}
	return k, nil
}

// encodeState renders st padded to stateSize bytes.
func encodeState(st sealState) ([]byte, error) {
	st.Version = stateVersion
	st.Sum = st.sum()
	b, err := json.Marshal(st)
	if err != nil {
		return nil, err
	}
	if len(b)+1 > stateSize {
		return nil, fmt.Errorf("audit: sealing state too large (%d bytes)", len(b))
	}
	out := bytes.Repeat([]byte{' '}, stateSize)
	copy(out, b)
	out[stateSize-1] = '\n'
	return out, nil
}

func decodeState(b []byte) (*sealState, error) {
	var st sealState
	if err := json.Unmarshal(bytes.TrimRight(b, " \n\x00"), &st); err != nil {
		return nil, fmt.Errorf("sealing state is not valid (torn or edited): %w", err)
	}
	if st.Version != stateVersion {
		return nil, fmt.Errorf("sealing state has version %d; this build reads version %d", st.Version, stateVersion)
	}
	if st.Sum != st.sum() {
		return nil, errors.New("sealing state checksum does not match (torn or edited)")
	}
	return &st, nil
}

// readState reads the sealing state at path; nil, nil when there is none.
func readState(path string) (*sealState, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	st, err := decodeState(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return st, nil
}

// stateFile is an open sealing state, rewritten in place.
type stateFile struct{ f *os.File }

// openState opens the sealing state at path for a commit; nil when none exists.
func openState(path string) (*stateFile, *sealState, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	b := make([]byte, stateSize+1)
	n, err := f.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		f.Close()
		return nil, nil, err
	}
	st, err := decodeState(b[:n])
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return &stateFile{f: f}, st, nil
}

// write overwrites the state in place. It does not sync: after a crash the
// state may lag the log, which the next commit and Verify accept.
func (sf *stateFile) write(st sealState) error {
	b, err := encodeState(st)
	if err != nil {
		return err
	}
	_, err = sf.f.WriteAt(b, 0)
	return err
}

func (sf *stateFile) close() { sf.f.Close() }

// createState writes a new sealing state at path, synced, failing if one exists.
func createState(path string, st sealState) error {
	b, err := encodeState(st)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
	}
	return err
}

// sealer MACs records during one commit.
type sealer struct {
	log  string
	next []byte // key of the next record
	seq  int64  // seq the next key belongs to
	seal string // seal over the last record MACed
}

// mac MACs the record seq with its key and moves the key forward, erasing
// the old one.
func (s *sealer) mac(seq int64, hash string) (string, error) {
	if seq-s.seq > maxKeySteps {
		return "", fmt.Errorf("audit: record %d is %d records past the sealing state; the log's tail was forged or the state replaced "+
			"(check it with `hermes-sandbox audit verify --key KEY`)", seq, seq-s.seq)
	}
	for s.seq < seq { // the state lagged (a crash between the log's sync and the state's write)
		s.advance()
	}
	if s.seq != seq {
		return "", fmt.Errorf("audit: sealing key is for record %d, cannot seal record %d", s.seq, seq)
	}
	m := recordMAC(s.next, s.log, hash)
	s.seal = sealMAC(s.next, s.log, seq, hash)
	s.advance()
	return m, nil
}

func (s *sealer) advance() {
	k := evolve(s.next)
	clear(s.next)
	s.next = k
	s.seq++
}

// state returns the sealing state after the last record MACed.
func (s *sealer) state(count int64, lastHash string) sealState {
	return sealState{Log: s.log, Count: count, LastHash: lastHash, Key: hex.EncodeToString(s.next), Seal: s.seal}
}
