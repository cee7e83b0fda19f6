// Package audit keeps the audit log of Hermes Sandbox: an append-only JSONL
// file in which every record carries the SHA-256 hash of the record before
// it, so that an edit, a deletion, a reordering or a truncation is detected
// by Verify.
//
// Layout on disk, for a log at path P:
//
//	P             one JSON record per line (0600, in a 0700 directory)
//	P.lock        the flock that serialises writers across processes
//	P.checkpoint  {count, last_hash, updated}, rewritten atomically after each commit
//
// Each record's hash is the hex SHA-256 of the record's canonical JSON (the
// encoding/json encoding of Record) with "hash" empty and "prev_hash" set to
// the previous record's hash; the first record chains from GenesisHash.
//
// The chain makes tampering evident, not impossible: someone who can write
// the files can recompute every hash after the point they changed and
// rewrite the checkpoint too. Copy Checkpoint.LastHash somewhere else (a
// ticket, a remote log) to anchor the chain against that.
package audit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"strings"
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
)

// Finding is one policy finding attached to a record.
type Finding struct {
	Rule        string `json:"rule"`
	Description string `json:"description"`
}

// Record is one audit event. Append fills Seq, Time (when zero), PrevHash
// and Hash; everything else comes from the caller.
//
// Hash must stay the last field: the encoder splices the hash into the
// canonical JSON, which ends with `"hash":""}`.
type Record struct {
	Seq      int64     `json:"seq"`
	Time     time.Time `json:"time"`
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

	ExitCode    *int    `json:"exit_code,omitempty"`
	DurationMS  float64 `json:"duration_ms"`
	StdoutBytes int64   `json:"stdout_bytes"`
	StderrBytes int64   `json:"stderr_bytes"`
	Excerpt     string  `json:"excerpt,omitempty"` // level full only; at most MaxExcerpt bytes
	Error       string  `json:"error,omitempty"`

	PrevHash string `json:"prev_hash"`
	Hash     string `json:"hash"`
}

// SetDuration sets DurationMS from d, to microsecond precision.
func (r *Record) SetDuration(d time.Duration) {
	r.DurationMS = float64(d.Microseconds()) / 1000
}

// Sink receives audit records. *Log is the file-backed Sink.
type Sink interface {
	Append(ctx context.Context, r Record) error
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
}

// prepare applies sanitising, redaction and the level to a caller's record.
func prepare(r Record, level Level, redact func(string) string, now func() time.Time) Record {
	valid := func(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }
	r.Session = valid(r.Session)
	r.Backend = valid(r.Backend)
	r.Tool = valid(r.Tool)
	r.Verdict = valid(r.Verdict)
	r.Decision = valid(r.Decision)
	r.Approver = valid(r.Approver)
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
	r.Seq, r.PrevHash, r.Hash = 0, "", ""
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

// encode returns the record's line (without newline) and hash, computed
// over the canonical JSON of r with Hash empty.
func encode(r Record) (line []byte, hash string, err error) {
	r.Hash = ""
	canon, err := json.Marshal(r)
	if err != nil {
		return nil, "", fmt.Errorf("audit: encode record: %w", err)
	}
	sum := sha256.Sum256(canon)
	hash = hex.EncodeToString(sum[:])
	n := len(canon) - len(hashSuffix)
	if n < 0 || string(canon[n:]) != string(hashSuffix) {
		return nil, "", fmt.Errorf("audit: encode record: canonical JSON does not end with the hash field")
	}
	line = make([]byte, 0, len(canon)+len(hash))
	line = append(line, canon[:n]...)
	line = append(line, `"hash":"`...)
	line = append(line, hash...)
	line = append(line, `"}`...)
	return line, hash, nil
}
