// Package agent is the small helper that runs inside a sandbox and the client that talks to
// it. One long-lived byte stream (a docker exec, an SSH channel, a pipe) carries framed
// messages for many concurrent commands: run, stdin, output chunks, exit, signal, file calls
// and background jobs. The helper keeps the session's working directory and exported
// environment in a state file, so state survives the helper itself.
package agent

import (
	"bufio"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
	"unicode/utf8"
)

// Version is the protocol version; client and helper must agree.
const Version = 1

// maxFrame bounds one frame's payload.
const maxFrame = 1 << 20

type frameType byte

const (
	// client → helper
	tRun    frameType = 'R' // JSON RunRequest
	tStdin  frameType = 'I' // stdin bytes for a run
	tEOF    frameType = 'E' // end of stdin (run) or of data (write_file)
	tSignal frameType = 'S' // JSON SignalRequest
	tCall   frameType = 'C' // JSON CallRequest
	tBeat   frameType = 'B' // JSON Beat: the client is alive (helpers whose Hello says Beats)
	// helper → client
	tHello  frameType = 'H' // JSON Hello, once, first
	tStdout frameType = 'o'
	tStderr frameType = 'e'
	tExit   frameType = 'x' // JSON ExitInfo
	tReply  frameType = 'r' // JSON reply to a call
	tError  frameType = '!' // JSON RemoteError reply to a call or run
	// both ways
	tData frameType = 'D' // file bytes for write_file (client) or read_file (helper)
)

// frameMagic starts the helper's output so a client can skip any banner noise a remote shell
// printed before the helper started.
const frameMagic = "\x00HERMES-AGENT\x00"

type frame struct {
	typ     frameType
	id      uint32
	payload []byte
}

// frameWriter serialises frames from many goroutines onto one stream.
type frameWriter struct {
	mu  sync.Mutex
	w   *bufio.Writer // guarded by mu
	err error         // guarded by mu
}

func newFrameWriter(w io.Writer) *frameWriter {
	return &frameWriter{w: bufio.NewWriterSize(w, 64<<10)}
}

func (fw *frameWriter) write(typ frameType, id uint32, payload []byte) error {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	if fw.err != nil {
		return fw.err
	}
	for first := true; first || len(payload) > 0; first = false {
		chunk := payload[:min(len(payload), maxFrame)]
		payload = payload[len(chunk):]
		var hdr [9]byte
		binary.BigEndian.PutUint32(hdr[0:4], uint32(len(chunk)))
		hdr[4] = byte(typ)
		binary.BigEndian.PutUint32(hdr[5:9], id)
		if _, err := fw.w.Write(hdr[:]); err != nil {
			fw.err = err
			return err
		}
		if _, err := fw.w.Write(chunk); err != nil {
			fw.err = err
			return err
		}
	}
	if err := fw.w.Flush(); err != nil {
		fw.err = err
	}
	return fw.err
}

func (fw *frameWriter) writeRaw(s string) error {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	if _, err := fw.w.WriteString(s); err != nil {
		return err
	}
	return fw.w.Flush()
}

// readFrame reads one frame. The payload is freshly allocated.
func readFrame(r *bufio.Reader) (frame, error) {
	var hdr [9]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return frame{}, err
	}
	n := binary.BigEndian.Uint32(hdr[0:4])
	if n > maxFrame {
		return frame{}, fmt.Errorf("agent: frame of %d bytes exceeds the %d-byte limit (protocol out of sync?)", n, maxFrame)
	}
	f := frame{typ: frameType(hdr[4]), id: binary.BigEndian.Uint32(hdr[5:9])}
	if n > 0 {
		f.payload = make([]byte, n)
		if _, err := io.ReadFull(r, f.payload); err != nil {
			return frame{}, unexpected(err)
		}
	}
	return f, nil
}

func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// skipToMagic discards bytes until frameMagic, returning what was skipped (at most 64 KiB is
// kept) so a client can show a remote banner when the helper never starts.
func skipToMagic(r *bufio.Reader) ([]byte, error) {
	var skipped []byte
	matched := 0
	for {
		b, err := r.ReadByte()
		if err != nil {
			return skipped, err
		}
		if b == frameMagic[matched] {
			matched++
			if matched == len(frameMagic) {
				return skipped, nil
			}
			continue
		}
		if len(skipped) < 64<<10 {
			skipped = append(skipped, frameMagic[:matched]...)
			skipped = append(skipped, b)
		}
		matched = 0
		if b == frameMagic[0] {
			matched = 1
			skipped = skipped[:len(skipped)-1]
		}
	}
}

// Hello is the helper's first message.
type Hello struct {
	Version  int    `json:"version"`
	PID      int    `json:"pid"`
	Arch     string `json:"arch"`
	Shell    string `json:"shell"`
	StateDir string `json:"state_dir"`
	Home     string `json:"home"`
	// Fresh is true when the helper found no saved state (a new or recreated sandbox).
	Fresh bool `json:"fresh"`
	// Beats: the helper takes tBeat frames. Once one arrives, a client silent for its
	// timeout is taken to be gone, as if its stream had ended: in a sandbox whose stream
	// outlives the client (a provider's PTY session, a container exec), that is how a killed
	// caller's foreground commands die.
	Beats bool `json:"beats,omitempty"`
}

// Beat is a tBeat's payload.
type Beat struct {
	TimeoutMS int64 `json:"timeout_ms"`
}

// BeatEvery and BeatTimeout: how often a client says it is alive, and how long a helper
// waits without a frame before it takes the client to be gone.
const (
	BeatEvery   = 5 * time.Second
	BeatTimeout = 20 * time.Second
)

// RunRequest starts a command.
type RunRequest struct {
	Script Bytes            `json:"script,omitempty"`
	Argv   []Bytes          `json:"argv,omitempty"`
	Dir    string           `json:"dir,omitempty"`
	Env    map[string]Bytes `json:"env,omitempty"`
	// Stdin says the client will send stdin frames and an EOF; otherwise stdin is /dev/null.
	Stdin bool `json:"stdin,omitempty"`
	// TimeoutMS, if set, makes the helper kill the command's tree after that long.
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
	// TTY runs an interactive shell on a pseudo-terminal of Rows×Cols; output comes as stdout.
	TTY  bool   `json:"tty,omitempty"`
	Rows uint16 `json:"rows,omitempty"`
	Cols uint16 `json:"cols,omitempty"`
}

// SignalRequest asks the helper to signal a running command's whole process tree.
type SignalRequest struct {
	// Reason is "timeout" or "interrupt", which decide the exit code (124 or 130), or
	// "resize" for a terminal size change to Rows×Cols.
	Reason string `json:"reason"`
	Rows   uint16 `json:"rows,omitempty"`
	Cols   uint16 `json:"cols,omitempty"`
}

// ExitInfo ends a run.
type ExitInfo struct {
	Code        int    `json:"code"`
	Signal      string `json:"signal,omitempty"`
	TimedOut    bool   `json:"timed_out,omitempty"`
	Interrupted bool   `json:"interrupted,omitempty"`
	Cwd         string `json:"cwd"`
	DurationNS  int64  `json:"duration_ns"`
	// StateError says why the command's changes to the working directory and exported
	// environment could not be saved; "" when they were (or there was nothing to save).
	StateError string `json:"state_error,omitempty"`
}

// ErrorKind classifies a failure the helper reports; clients map it to sentinel errors.
type ErrorKind string

// The helper's error kinds, the same on both ends of the stream.
const (
	KindNotFound    ErrorKind = "not_found"
	KindExists      ErrorKind = "exists"
	KindPermission  ErrorKind = "permission"
	KindInvalid     ErrorKind = "invalid"
	KindUnsupported ErrorKind = "unsupported"
	KindIO          ErrorKind = "io"
	KindLimit       ErrorKind = "limit"
)

// RemoteError is a failure the helper reports for a call or run.
type RemoteError struct {
	Kind    ErrorKind `json:"kind"`
	Message string    `json:"message"`
}

func (e *RemoteError) Error() string { return e.Message }

// CallRequest is a non-streaming operation.
type CallRequest struct {
	Op     string `json:"op"`
	Path   string `json:"path,omitempty"`
	Offset int64  `json:"offset,omitempty"`
	Limit  int64  `json:"limit,omitempty"`
	Mode   uint32 `json:"mode,omitempty"`
	JobID  string `json:"job_id,omitempty"`
	// Run is the command for job_start; its TimeoutMS is the job's lifetime (0 = none).
	Run *RunRequest `json:"run,omitempty"`
	// MaxJobs, for job_start, refuses a job while that many of the session's jobs run
	// (0 = no limit).
	MaxJobs int `json:"max_jobs,omitempty"`
	// WaitMS bounds job_wait on the helper side.
	WaitMS int64 `json:"wait_ms,omitempty"`
	// Env is for seed_env: variables passed through from the caller's host.
	Env map[string]Bytes `json:"env,omitempty"`
	// Reset is for reset (see ResetRequest).
	Reset *ResetRequest `json:"reset,omitempty"`
}

// Call operations.
const (
	opReadFile  = "read_file"
	opWriteFile = "write_file"
	opListDir   = "list_dir"
	opJobStart  = "job_start"
	opJobList   = "job_list"
	opJobPoll   = "job_poll"
	opJobWait   = "job_wait"
	opJobKill   = "job_kill"
	opState     = "state"
	opPing      = "ping"
	// opSeedEnv adds passed-through variables the session has never had, without putting
	// their values on a command line (for helpers started where the environment cannot be set).
	opSeedEnv = "seed_env"
	// opResolvePath answers which file a path names: ~ and the session's directory applied
	// as the file calls apply them, symbolic links followed (helpers before it answer
	// KindUnsupported, as for any unknown operation).
	opResolvePath = "resolve_path"
	// opReset makes a warm pool's container as it was when fresh (see ResetRequest).
	opReset = "reset"
)

// Bytes is a string that crosses the wire unchanged even when it is not valid UTF-8 (JSON
// strings would replace such bytes): valid text is a JSON string, anything else {"b64": …}.
type Bytes string

// MarshalJSON implements json.Marshaler.
func (b Bytes) MarshalJSON() ([]byte, error) {
	if utf8.ValidString(string(b)) {
		return json.Marshal(string(b))
	}
	return json.Marshal(map[string]string{"b64": base64.StdEncoding.EncodeToString([]byte(b))})
}

// UnmarshalJSON implements json.Unmarshaler.
func (b *Bytes) UnmarshalJSON(data []byte) error {
	if len(data) > 0 && data[0] == '{' {
		var m map[string]string
		if err := json.Unmarshal(data, &m); err != nil {
			return err
		}
		raw, err := base64.StdEncoding.DecodeString(m["b64"])
		if err != nil {
			return err
		}
		*b = Bytes(raw)
		return nil
	}
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return err
	}
	*b = Bytes(s)
	return nil
}

// BytesSlice converts strings for a RunRequest.
func BytesSlice(ss []string) []Bytes {
	if ss == nil {
		return nil
	}
	out := make([]Bytes, len(ss))
	for i, s := range ss {
		out[i] = Bytes(s)
	}
	return out
}

func toBytesMap(m map[string]string) map[string]Bytes {
	if m == nil {
		return nil
	}
	out := make(map[string]Bytes, len(m))
	for k, v := range m {
		out[k] = Bytes(v)
	}
	return out
}

// BytesMap converts an environment map for a RunRequest.
func BytesMap(m map[string]string) map[string]Bytes { return toBytesMap(m) }

func fromBytesMap(m map[string]Bytes) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = string(v)
	}
	return out
}

func stringsOf(bs []Bytes) []string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = string(b)
	}
	return out
}
