package agent

import "time"

// The replies the helper sends and the client decodes (the helper's server side is
// Unix-only; these build everywhere the client does).

// JobInfo describes a job in replies.
type JobInfo struct {
	ID        string    `json:"id"`
	Command   string    `json:"command"`
	PID       int       `json:"pid"`
	StartTime uint64    `json:"start_ticks"`
	Started   time.Time `json:"started"`
	Running   bool      `json:"running"`
	ExitCode  *int      `json:"exit_code,omitempty"`
	// Deadline is when the job is killed if it still runs (zero = never).
	Deadline time.Time `json:"deadline,omitzero"`
}

// JobOutputReply is a poll or wait reply.
type JobOutputReply struct {
	JobInfo
	Stdout    []byte `json:"stdout"`
	Stderr    []byte `json:"stderr"`
	Truncated bool   `json:"truncated,omitempty"`
}

// ExitJobTimeout is the exit code of a job killed at its deadline (terminal.job_timeout).
const ExitJobTimeout = 124

// FileEntry is one directory entry in a list_dir reply.
type FileEntry struct {
	Name    string    `json:"name"`
	Size    int64     `json:"size"`
	Mode    string    `json:"mode"`
	IsDir   bool      `json:"is_dir"`
	ModTime time.Time `json:"mod_time"`
}

// ReadReply ends a read_file call, after its data frames.
type ReadReply struct {
	Size int64 `json:"size"` // the whole file's size
	Read int64 `json:"read"`
}

// The reasons of a signal request (SignalRequest.Reason).
const (
	reasonTimeout   = "timeout"
	reasonInterrupt = "interrupt"
	reasonResize    = "resize"
)
