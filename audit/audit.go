// Package audit keeps the audit log of Hermes Sandbox: an append-only JSONL
// file in which every record carries the SHA-256 hash of the record before
// it and, once the log is sealed, a MAC under a forward-secure key.
//
// Layout on disk, for a log at path P:
//
//	P             one JSON record per line (0600, in a 0700 directory)
//	P.lock        the flock that serialises writers across processes
//	P.seal        the sealing state of a sealed log (see seal.go), rewritten in place per commit
//	P.checkpoint  {count, last_hash, updated} of an unsealed log, rewritten after each commit
//
// Each record's hash is the hex SHA-256 of the record's canonical JSON (the
// encoding/json encoding of Record) with "mac" and "hash" empty and
// "prev_hash" set to the previous record's hash; the first record chains
// from GenesisHash.
//
// A call leaves two records: an intent, written and synced before the
// backend is touched (if it cannot be, the call does not run), and a
// result that names the intent's seq.
//
// The hash chain alone makes tampering evident, not impossible: someone who
// can write the files can recompute every hash. Init seals a log: each
// record then carries an HMAC under a key that evolves one way per record
// (key_{i+1} = SHA-256(key_i)), the old key is overwritten, and the seal in
// P.seal covers the record count. Only the verification key printed once
// by Init (key_0) recomputes every key, so VerifyWith detects edits,
// deletions, reordering, a truncated tail and a replaced log even when
// the machine that holds the log was compromised later.
package audit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"
)

// GenesisHash is the prev_hash of the first record of a log.
const GenesisHash = "0000000000000000000000000000000000000000000000000000000000000000"

// MaxExcerpt bounds Record.Excerpt in bytes; longer excerpts keep their head
// and tail with a marker between.
const MaxExcerpt = 2048

// Tool names used in Record.Tool. Callers may use others.
const (
	ToolExec      = "exec"
	ToolJobStart  = "job_start"
	ToolReadFile  = "read_file"
	ToolWriteFile = "write_file"
	// Branching calls (sandbox.Brancher), recorded by the gate with NewSession and Snapshot.
	ToolSnapshot       = "session_snapshot"
	ToolRestore        = "session_restore"
	ToolFork           = "session_fork"
	ToolRemoveSnapshot = "session_snapshot_rm"
	// ToolAudit marks records the log writes about itself.
	ToolAudit = "audit"
)

// Decisions used in Record.Decision. Callers may use others.
const (
	DecisionAllowed         = "allowed"
	DecisionApprovedOnce    = "approved_once"
	DecisionApprovedSession = "approved_session"
	DecisionApprovedAlways  = "approved_always"
	DecisionDenied          = "denied"
	DecisionRefused         = "refused"
	// DecisionLogTruncated is written (with Tool ToolAudit) when Append finds
	// fewer records than the checkpoint promises; Verify reports it.
	DecisionLogTruncated = "log_truncated"
	// DecisionLogSealed is the first record of a log made by Init; its Log
	// field holds the log's id.
	DecisionLogSealed = "log_sealed"
	// DecisionLogClosed is the last record of a log archived by Init --rotate.
	DecisionLogClosed = "log_closed"
)

// Record types (Record.Type). A record without a type predates intents.
const (
	// TypeIntent is written and synced before a call reaches the backend,
	// or alone for a refused call.
	TypeIntent = "intent"
	// TypeResult follows the intent whose seq it names in Record.Intent.
	TypeResult = "result"
	// TypeEgress is one outbound connection a sandbox's egress proxy allowed or denied
	// (Host, Port, BytesUp, BytesDown; Decision allowed or denied). Tool is ToolEgress.
	TypeEgress = "egress"
	// TypeEgressPolicy is a change to a live session's egress allowlist
	// (`sessions network`); Command says what changed.
	TypeEgressPolicy = "egress_policy"
)

// ToolEgress is the Tool of TypeEgress and TypeEgressPolicy records.
const ToolEgress = "egress"

// Kinds are the values `audit show --kind` accepts: calls (intents and results, and
// records without a type), egress connections, and egress policy changes.
var Kinds = []string{"call", TypeEgress, TypeEgressPolicy}

// Kind is r's kind, one of Kinds.
func (r Record) Kind() string {
	switch r.Type {
	case TypeEgress, TypeEgressPolicy:
		return r.Type
	}
	return "call"
}

// Finding is one policy finding attached to a record.
type Finding struct {
	Rule        string `json:"rule"`
	Description string `json:"description"`
}

// Record is one audit event. Append fills Seq, Time (when zero), PrevHash,
// MAC and Hash; everything else comes from the caller.
//
// MAC and Hash must stay the last fields: the encoder splices them into the
// canonical JSON, which ends with `"hash":""}`.
type Record struct {
	Seq int64 `json:"seq"`
	// Type is TypeIntent or TypeResult ("" in logs written before intents).
	Type string `json:"type,omitempty"`
	// Intent is, in a result, the seq of its intent.
	Intent   int64     `json:"intent,omitempty"`
	Time     time.Time `json:"time"`
	Log      string    `json:"log,omitempty"` // the log id, in the record Init writes first
	Session  string    `json:"session"`
	Backend  string    `json:"backend"`
	Tool     string    `json:"tool"` // "exec", "job_start", "read_file", "write_file", ...
	Command  string    `json:"command"`
	Verdict  string    `json:"verdict"` // "safe", "dangerous", "hardline", ...
	Findings []Finding `json:"findings,omitempty"`
	Decision string    `json:"decision"`           // "allowed", "approved_once", "denied", "refused", ...
	Approver string    `json:"approver,omitempty"` // "policy", "user", "allowlist", "mode:off", ...
	Reason   string    `json:"reason,omitempty"`
	// Client and Transport say who made the call: an MCP client's name and "stdio" or
	// "http", or "cli".
	Client    string `json:"client,omitempty"`
	Transport string `json:"transport,omitempty"`
	// Key names the MCP access key the call came with; omitted (and so absent from the
	// records and hashes of logs written before keys) for the admin token and the CLI.
	Key string `json:"key,omitempty"`

	ExitCode    *int    `json:"exit_code,omitempty"`
	DurationMS  float64 `json:"duration_ms"`
	StdoutBytes int64   `json:"stdout_bytes"`
	StderrBytes int64   `json:"stderr_bytes"`
	Excerpt     string  `json:"excerpt,omitempty"` // level full only; at most MaxExcerpt bytes
	Error       string  `json:"error,omitempty"`

	// Host and Port are an egress record's destination as the sandbox asked for it;
	// BytesUp and BytesDown count what went to and came from it.
	Host      string `json:"host,omitempty"`
	Port      int    `json:"port,omitempty"`
	BytesUp   int64  `json:"bytes_up,omitempty"`
	BytesDown int64  `json:"bytes_down,omitempty"`

	// NewSession and Snapshot say what a branching call (ToolSnapshot, ToolRestore,
	// ToolFork, ToolRemoveSnapshot) made or used: the session it created and the snapshot's
	// id; Session is the session it was taken from, when known. Empty in other records, so
	// records without them hash as they always did.
	NewSession string `json:"new_session,omitempty"`
	Snapshot   string `json:"snapshot,omitempty"`

	PrevHash string `json:"prev_hash"`
	// MAC is the hex HMAC-SHA-256 of Hash under this record's sealing key;
	// empty in an unsealed log.
	MAC  string `json:"mac,omitempty"`
	Hash string `json:"hash"`
}

// NeedsResult reports whether r is an intent that a result should follow:
// a call that was let through (refused calls leave their intent alone).
func NeedsResult(r Record) bool {
	return r.Type == TypeIntent && r.Decision != DecisionDenied && r.Decision != DecisionRefused
}

// SetDuration sets DurationMS from d, to microsecond precision.
func (r *Record) SetDuration(d time.Duration) {
	r.DurationMS = float64(d.Microseconds()) / 1000
}

// Sink receives audit records. *Log is the file-backed Sink.
type Sink interface {
	// Append writes one record (a refused call, or an event of the log).
	Append(ctx context.Context, r Record) error
	// Intent writes and syncs the intent of a call before it reaches a
	// backend and returns its seq; an error is an *IntentError.
	Intent(ctx context.Context, r Record) (int64, error)
	// Result writes the result of the call whose intent has seq intent.
	Result(ctx context.Context, intent int64, r Record) error
}

// Level is audit.level: how much a log records.
type Level string

// Levels.
const (
	// LevelFull records commands and a bounded output excerpt.
	LevelFull Level = "full"
	// LevelCommands records commands without output.
	LevelCommands Level = "commands"
	// LevelOff records nothing and creates no file.
	LevelOff Level = "off"
)

// ParseLevel parses "full", "commands" or "off".
func ParseLevel(s string) (Level, error) {
	switch l := Level(s); l {
	case LevelFull, LevelCommands, LevelOff:
		return l, nil
	}
	return "", fmt.Errorf("audit: unknown level %q: want full, commands or off", s)
}

// UnmarshalText parses with ParseLevel, so unknown levels fail to decode.
func (l *Level) UnmarshalText(text []byte) error {
	v, err := ParseLevel(string(text))
	if err != nil {
		return err
	}
	*l = v
	return nil
}

// Options configure Open. The zero value is usable.
type Options struct {
	// Level is how much to record; "" means LevelFull.
	Level Level
	// Redact scrubs secrets from Command, Reason, Excerpt and Error before
	// they are written. nil means NewRedactor(nil): the generic token
	// patterns only. Pass NewRedactor(knownSecrets) to add exact secrets.
	Redact func(string) string
	// Now stamps records whose Time is zero; nil means time.Now.
	Now func() time.Time
	// Logger receives warnings (a torn tail repaired, a checkpoint that
	// could not be written); nil discards them.
	Logger *slog.Logger
	// OnFailure says what Intent's caller should do when the intent cannot
	// be recorded; "" means OnFailureRefuse.
	OnFailure OnFailure
	// LockTimeout bounds the wait for another process's lock; 0 means
	// DefaultLockTimeout.
	LockTimeout time.Duration
	// Witness, if set, receives each record's seq, hash and MAC after it is
	// synced. The Log does not close it.
	Witness *Witness
	// Sealed says the log was made by Init (audit.sealed): Open fails with ErrSealMissing
	// when its sealing state is not there, instead of starting or going on unsealed.
	Sealed bool
}

// DefaultLockTimeout is how long an append waits for another writer.
const DefaultLockTimeout = 10 * time.Second

// OnFailure is audit.on_failure.
type OnFailure string

// What to do with a call whose intent cannot be recorded.
const (
	// OnFailureRefuse does not run the call (the default).
	OnFailureRefuse OnFailure = "refuse"
	// OnFailureWarn runs it and says loudly that it went unrecorded.
	OnFailureWarn OnFailure = "warn"
)

// ParseOnFailure parses "refuse" or "warn".
func ParseOnFailure(s string) (OnFailure, error) {
	switch f := OnFailure(s); f {
	case OnFailureRefuse, OnFailureWarn:
		return f, nil
	}
	return "", fmt.Errorf("audit: unknown on_failure %q: want refuse or warn", s)
}

// ErrLockTimeout: another writer held the log's lock for too long.
var ErrLockTimeout = errors.New("lock timeout")

// ErrSealMissing: the log is sealed but its sealing state is gone.
var ErrSealMissing = errors.New("the sealing state of a sealed log is missing")

// IntentError says that the intent of a call could not be recorded.
type IntentError struct {
	Path string
	Err  error
	// Warn is set under OnFailureWarn: run the call anyway, and say so.
	Warn bool
}

func (e *IntentError) Error() string {
	return fmt.Sprintf("the audit log %s cannot record the call (%s): %v", e.Path, Cause(e.Err), e.Err)
}

func (e *IntentError) Unwrap() error { return e.Err }

// Cause names why a write to the log failed, for people: "disk full",
// "permission denied", "lock timeout", ...
func Cause(err error) string {
	switch {
	case errors.Is(err, syscall.ENOSPC):
		return "disk full"
	case errors.Is(err, syscall.EDQUOT):
		return "disk quota exceeded"
	case errors.Is(err, syscall.EROFS):
		return "read-only file system"
	case errors.Is(err, fs.ErrPermission):
		return "permission denied"
	case errors.Is(err, ErrLockTimeout):
		return "lock timeout"
	case errors.Is(err, ErrSealMissing):
		return "sealing state missing"
	case errors.Is(err, ErrWitness):
		return "witness unavailable"
	case errors.Is(err, syscall.EIO):
		return "I/O error"
	}
	return "write failed"
}

// Unavailable returns a Sink for a log that could not be opened: every
// Intent fails with an *IntentError naming path and err, so no call runs
// unrecorded unless onFailure is OnFailureWarn.
func Unavailable(path string, err error, onFailure OnFailure) Sink {
	return unavailable{path: path, err: err, warn: onFailure == OnFailureWarn}
}

type unavailable struct {
	path string
	err  error
	warn bool
}

func (u unavailable) Append(context.Context, Record) error { return u.err }

func (u unavailable) Intent(context.Context, Record) (int64, error) {
	return 0, &IntentError{Path: u.path, Err: u.err, Warn: u.warn}
}

func (u unavailable) Result(context.Context, int64, Record) error { return u.err }

// prepare applies sanitising, redaction and the level to a caller's record.
func prepare(r Record, level Level, redact func(string) string, now func() time.Time) Record {
	valid := func(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }
	r.Session = valid(r.Session)
	r.Backend = valid(r.Backend)
	r.Tool = valid(r.Tool)
	r.Verdict = valid(r.Verdict)
	r.Decision = valid(r.Decision)
	r.Approver = valid(r.Approver)
	r.Type = valid(r.Type)
	r.Log = valid(r.Log)
	r.Command = redact(valid(r.Command))
	r.Reason = redact(valid(r.Reason))
	r.Error = redact(valid(r.Error))
	if level == LevelFull {
		r.Excerpt = boundExcerpt(redact(valid(r.Excerpt)), MaxExcerpt)
	} else {
		r.Excerpt = ""
	}
	if r.Findings != nil {
		fs := make([]Finding, len(r.Findings))
		for i, f := range r.Findings {
			fs[i] = Finding{Rule: valid(f.Rule), Description: valid(f.Description)}
		}
		r.Findings = fs
	}
	if r.ExitCode != nil {
		code := *r.ExitCode
		r.ExitCode = &code
	}
	if math.IsNaN(r.DurationMS) || math.IsInf(r.DurationMS, 0) {
		r.DurationMS = 0
	}
	if r.Time.IsZero() {
		r.Time = now()
	}
	r.Time = r.Time.UTC().Round(0) // strip the monotonic reading
	r.Seq, r.PrevHash, r.MAC, r.Hash = 0, "", "", ""
	return r
}

const excerptMarker = "\n…[excerpt truncated]…\n"

// boundExcerpt keeps the head 40% and the tail 60% of s within limit bytes,
// cutting on rune boundaries.
func boundExcerpt(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	room := limit - len(excerptMarker)
	head := room * 4 / 10
	for head > 0 && !utf8.RuneStart(s[head]) {
		head--
	}
	start := len(s) - (room - head)
	for start < len(s) && !utf8.RuneStart(s[start]) {
		start++
	}
	return s[:head] + excerptMarker + s[start:]
}

var hashSuffix = []byte(`"hash":""}`)

// canonical returns the canonical JSON of r without its closing hash field
// (r's MAC and Hash are ignored) and the record's hash over it.
func canonical(r Record) (prefix []byte, hash string, err error) {
	r.MAC, r.Hash = "", ""
	canon, err := json.Marshal(r)
	if err != nil {
		return nil, "", fmt.Errorf("audit: encode record: %w", err)
	}
	sum := sha256.Sum256(canon)
	n := len(canon) - len(hashSuffix)
	if n < 0 || string(canon[n:]) != string(hashSuffix) {
		return nil, "", fmt.Errorf("audit: encode record: canonical JSON does not end with the hash field")
	}
	return canon[:n], hex.EncodeToString(sum[:]), nil
}

// splice finishes a line from canonical's prefix: the MAC (if any), then the hash.
func splice(prefix []byte, mac, hash string) []byte {
	line := make([]byte, 0, len(prefix)+len(mac)+len(hash)+20)
	line = append(line, prefix...)
	if mac != "" {
		line = append(line, `"mac":"`...)
		line = append(line, mac...)
		line = append(line, `",`...)
	}
	line = append(line, `"hash":"`...)
	line = append(line, hash...)
	return append(line, `"}`...)
}

// encode returns the line (without newline) and hash of an unsealed record:
// r's MAC is ignored.
func encode(r Record) (line []byte, hash string, err error) {
	prefix, hash, err := canonical(r)
	if err != nil {
		return nil, "", err
	}
	return splice(prefix, "", hash), hash, nil
}
