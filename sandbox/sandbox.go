// Package sandbox is the contract every Hermes Sandbox backend implements: a Backend opens
// named Sessions, a Session runs Commands and returns Results. Optional abilities (background
// jobs, files, session listing, images, garbage collection, a workspace) are small extra
// interfaces, and Capabilities reports which a backend has; the conformance suite in
// sandbox/sandboxtest checks that the two agree. backends/README.md is the author's guide.
package sandbox

import (
	"context"
	"fmt"
	"io"
	"time"
)

// Exit codes that every backend reports the same way.
const (
	ExitTimeout     = 124 // the command ran past its timeout and its process tree was killed
	ExitNotExec     = 126 // found but not executable, or refused by the gate
	ExitNotFound    = 127 // command not found
	ExitInterrupted = 130 // the caller cancelled (Ctrl-C) and the process tree was killed

	// ExitRunnerFailed is the CLI's exit code when hermes-sandbox itself failed, not the
	// command: bad config, a sandbox that could not start or died, a session owner that went
	// away mid-command. The command may not have run, or its outcome is unknown. It is
	// docker run's code for the same case (ssh uses 255), so a caller never mistakes it for
	// the command's own exit 1.
	ExitRunnerFailed = 125
)

// DefaultOutputLimit is how many bytes of each stream a Result keeps by default.
const DefaultOutputLimit = 50_000

// Background job bounds (terminal.job_timeout, terminal.max_jobs).
const (
	DefaultJobTimeout = 24 * time.Hour
	DefaultMaxJobs    = 16
)

// DefaultSession is the session name used when the caller names none.
const DefaultSession = "default"

// Command is one thing to run in a session.
//
// Exactly one of Script and Argv is set. Script runs in the session's shell, so `cd` and
// `export` carry over to the next command. Argv runs one program with exactly these
// arguments, in the session's working directory and environment, without a shell.
type Command struct {
	Script string
	Argv   []string

	// Dir, if set, is where the command starts; like a `cd`, it becomes the session's
	// working directory when the command is a Script.
	Dir string
	// Env adds variables for this command only.
	Env map[string]string
	// Stdin feeds the command; nil means no input (/dev/null).
	Stdin io.Reader
	// Stdout and Stderr, if set, receive output live while the command runs.
	Stdout io.Writer
	Stderr io.Writer
	// Timeout bounds the run; 0 means none. On expiry the whole process tree inside the
	// sandbox is killed and the result has exit code 124.
	Timeout time.Duration
	// OutputLimit bounds the bytes of each stream kept in the Result (0 = DefaultOutputLimit).
	OutputLimit int
	// SpillLimit bounds the spill file of the complete output (0 = DefaultSpillLimit): beyond
	// it the file keeps the first and last halves, with a note of the gap.
	SpillLimit int64
	// JobTimeout, for StartJob, is how long the background job may run before its process
	// group is killed and it ends with exit code 124 (0 = DefaultJobTimeout).
	JobTimeout time.Duration
	// MaxJobs, for StartJob, refuses a new job with ErrLimit while that many of the session's
	// jobs run (0 = DefaultMaxJobs).
	MaxJobs int
}

// Result is what every backend returns for a finished command. A non-zero exit is data, not
// an error.
type Result struct {
	ExitCode int           `json:"exit_code"`
	Stdout   string        `json:"stdout"`
	Stderr   string        `json:"stderr"`
	Duration time.Duration `json:"-"`
	// Cwd is the session's working directory after the command.
	Cwd string `json:"cwd"`
	// Truncated says Stdout or Stderr lost its middle; OutputFile then holds everything.
	Truncated  bool   `json:"truncated"`
	OutputFile string `json:"output_file"`
	// StdoutBytes and StderrBytes count everything the command wrote.
	StdoutBytes int64 `json:"stdout_bytes"`
	StderrBytes int64 `json:"stderr_bytes"`
	TimedOut    bool  `json:"timed_out,omitempty"`
	Interrupted bool  `json:"interrupted,omitempty"`
	// EnvironmentRecreated says the sandbox was lost and made anew before this command, so
	// files and shell state from earlier commands are gone.
	EnvironmentRecreated bool `json:"environment_recreated"`
	// StateNotSaved says the command's changes to the working directory and exported
	// environment could not be saved (the state directory's disk is full or unwritable, or
	// the shell was replaced or killed first): the next command runs with the state from
	// before this one. StateError says why.
	StateNotSaved bool   `json:"state_not_saved,omitempty"`
	StateError    string `json:"state_error,omitempty"`
}

// Capabilities reports what a backend can do. The conformance suite checks each flag against
// the interfaces the backend's sessions really implement.
type Capabilities struct {
	// Jobs: sessions implement JobRunner.
	Jobs bool `json:"jobs"`
	// Files: sessions implement FileSystem.
	Files bool `json:"files"`
	// Terminal: sessions implement Terminal (an interactive shell on a pseudo-terminal).
	Terminal bool `json:"terminal"`
	// Stdin: Command.Stdin reaches the command.
	Stdin bool `json:"stdin"`
	// Persistent: sessions keep their state across processes (a second CLI run finds it).
	Persistent bool `json:"persistent"`
	// Isolation describes the boundary in a few words, for people and models.
	Isolation string `json:"isolation"`
	// Network says whether commands can reach the network. False means the sandbox has no
	// network interface but loopback.
	Network bool `json:"network"`
	// Branching: the backend implements Brancher (snapshot, restore, fork).
	Branching bool `json:"branching,omitempty"`
	// Host says commands run directly on a machine beside its other processes and
	// containers (local on this one, ssh on the remote one), not in a container or machine of
	// their own: entering a container from there (docker exec, nsenter) reaches past the
	// sandbox, and the policy asks first.
	Host bool `json:"host,omitempty"`
}

// Backend opens sessions of one kind of sandbox.
type Backend interface {
	Name() string
	Capabilities() Capabilities
	// Open returns the named session, creating its sandbox if needed, or resuming the one a
	// previous process left.
	Open(ctx context.Context, name string) (Session, error)
	// Close releases what the backend holds (connections, pools). Sessions' sandboxes stay.
	Close() error
}

// Session is a sandbox plus shell state (working directory and exported environment).
type Session interface {
	Name() string
	// Exec runs cmd and waits for it. The error is non-nil only when the runner itself
	// failed; the command's own failure is in Result.ExitCode.
	Exec(ctx context.Context, cmd Command) (*Result, error)
	// Close detaches from the session; the sandbox and its state stay for the next Open.
	Close() error
}

// SessionInfo describes a session a backend knows about.
type SessionInfo struct {
	Name    string    `json:"name"`
	Backend string    `json:"backend"`
	ID      string    `json:"id,omitempty"`
	State   string    `json:"state,omitempty"`
	Cwd     string    `json:"cwd,omitempty"`
	Created time.Time `json:"created,omitzero"`
	Used    time.Time `json:"used,omitzero"`
	// Mode says how commands reach the session's sandbox where a backend has more than one
	// way (daytona: "helper" or "session"); "" when there is one.
	Mode string `json:"mode,omitempty"`
}

// SessionManager is implemented by backends that can list and remove their sessions.
type SessionManager interface {
	Sessions(ctx context.Context) ([]SessionInfo, error)
	// Remove destroys the named session's sandbox and state. Removing a session that does not
	// exist returns an error wrapping ErrNotFound.
	Remove(ctx context.Context, name string) error
}

// JobStatus describes a background job.
type JobStatus struct {
	ID       string    `json:"id"`
	Command  string    `json:"command"`
	Running  bool      `json:"running"`
	ExitCode *int      `json:"exit_code,omitempty"`
	Started  time.Time `json:"started"`
	PID      int       `json:"pid,omitempty"`
}

// JobOutput is new output of a job since the last poll.
type JobOutput struct {
	JobStatus
	Stdout string `json:"stdout"`
	Stderr string `json:"stderr"`
	// Truncated says more new output was available than the poll returns.
	Truncated bool `json:"truncated,omitempty"`
}

// JobRunner is implemented by sessions that run background jobs. Jobs outlive the process
// that started them, so a later CLI run can poll them.
type JobRunner interface {
	StartJob(ctx context.Context, cmd Command) (JobStatus, error)
	Jobs(ctx context.Context) ([]JobStatus, error)
	// PollJob returns output written since the previous poll.
	PollJob(ctx context.Context, id string) (JobOutput, error)
	// WaitJob waits for the job to end (or ctx) and returns its remaining output.
	WaitJob(ctx context.Context, id string) (JobOutput, error)
	KillJob(ctx context.Context, id string) (JobStatus, error)
}

// FileInfo describes one directory entry.
type FileInfo struct {
	Name    string    `json:"name"`
	Size    int64     `json:"size"`
	Mode    string    `json:"mode"`
	IsDir   bool      `json:"is_dir"`
	ModTime time.Time `json:"mod_time"`
}

// FileSystem is implemented by sessions that read and write files inside the sandbox. A
// relative path is relative to the session's working directory.
type FileSystem interface {
	ReadFile(ctx context.Context, path string, offset, limit int64) ([]byte, error)
	WriteFile(ctx context.Context, path string, data []byte, mode uint32) error
	ListDir(ctx context.Context, path string) ([]FileInfo, error)
}

// PathResolver is implemented by sessions that can say which file a path names inside the
// sandbox, as the sandbox sees its own file system (a container's or a remote host's, not
// this host's). ResolvePath returns p as the session's file operations would open it: "~"
// and "~/…" expanded with the session's HOME, a relative path joined to the session's working
// directory, and symbolic links followed as far as the path exists; the part that does not
// exist yet is appended as written. The gate judges this path as well as the one written.
type PathResolver interface {
	ResolvePath(ctx context.Context, p string) (string, error)
}

// Checker is implemented by backends that can tell, quickly, whether they are usable here.
// The error says what is wrong and what to do (`hermes-sandbox doctor` prints it).
type Checker interface {
	Check(ctx context.Context) error
}

// Baseliner is implemented by backends that can time the raw way of running `true` without
// Hermes Sandbox (plain fork/exec, a raw docker exec, a new SSH session), so benchmarks
// compare against it in the same run.
type Baseliner interface {
	// Baseline runs the raw equivalent of `true` n times in the named session's sandbox and
	// returns its name and the duration of each run.
	Baseline(ctx context.Context, session string, n int) (string, []time.Duration, error)
}

// WinSize is a terminal size in character cells.
type WinSize struct{ Rows, Cols uint16 }

// TerminalOptions describe an interactive shell.
type TerminalOptions struct {
	Stdin  io.Reader
	Stdout io.Writer
	Size   WinSize
	// Resize delivers size changes; may be nil.
	Resize <-chan WinSize
	Env    map[string]string
}

// Terminal is implemented by sessions that can run an interactive shell on a pseudo-terminal
// inside the sandbox, starting in the session's directory and environment.
type Terminal interface {
	Shell(ctx context.Context, opts TerminalOptions) (exitCode int, err error)
}

// Recreator is implemented by backends that keep a live session's sandbox when a setting
// that needs a new one changes (the new setting applies to new sessions). Recreate makes the
// session's sandbox anew from the current settings, creating the new one before it removes
// the old, so a failure leaves the session as it was (`exec --recreate`).
type Recreator interface {
	Recreate(ctx context.Context, session string) error
}

// SnapshotRef describes a stored snapshot of a session: its files (the sandbox's filesystem
// changes and its workspace) and its shell state (working directory and exported
// environment). Running processes are not part of it.
type SnapshotRef struct {
	// ID selects the snapshot in Restore and RemoveSnapshot: short, printable, unique per
	// backend and scope.
	ID      string `json:"id"`
	Backend string `json:"backend"`
	// Session is the session the snapshot was taken of.
	Session string    `json:"session"`
	Created time.Time `json:"created,omitzero"`
	// Size is the bytes the snapshot holds on this machine or the service (0 = unknown).
	Size int64 `json:"size,omitempty"`
	// Native is the vendor's or engine's own id (an image id, a Vercel snapshot id) when it
	// differs from ID.
	Native string `json:"native,omitempty"`
}

// Brancher is implemented by backends that can snapshot a session, make new sessions from a
// snapshot, and fork a session. A new session made by Restore or Fork is an ordinary session:
// Open finds it, it has the snapshot's files and shell state, and nothing it does reaches the
// source (or the source's later changes it). Background jobs of the source are not started in
// it. Backends that cannot branch do not implement Brancher (the gate answers ErrUnsupported
// with the reason).
type Brancher interface {
	// Snapshot stores the named session's files and shell state; the session keeps running.
	Snapshot(ctx context.Context, session string) (SnapshotRef, error)
	// Restore makes the new session newSession from a snapshot. A session of that name that
	// already exists is an error (not replaced).
	Restore(ctx context.Context, snapshotID, newSession string) error
	// Fork is Snapshot then Restore in one step, leaving the source running; the intermediate
	// snapshot may be kept (it is listed) or not, as the backend documents.
	Fork(ctx context.Context, session, newSession string) error
	// Snapshots lists the stored snapshots, oldest first.
	Snapshots(ctx context.Context) ([]SnapshotRef, error)
	// RemoveSnapshot deletes a snapshot; one that does not exist is an error wrapping
	// ErrNotFound. Sessions restored from it keep working.
	RemoveSnapshot(ctx context.Context, id string) error
}

// NoBrancher is implemented by backends that do not branch for a reason worth more than
// "unsupported" (a vendor contract that leaves the semantics open): NoBranching returns an
// error wrapping ErrUnsupported that says why, for the gate and the CLI to show.
type NoBrancher interface {
	NoBranching() error
}

// Warner is implemented by backends whose configuration can weaken their isolation (a
// privileged container, network on). Each warning is one sentence for `doctor`.
type Warner interface {
	Warnings() []string
}

// Workspace is implemented by backends that have a directory which counts as the agent's
// own: routine deletes inside it are the agent cleaning up after itself (a container's
// /workspace volume), where elsewhere they may destroy someone's files. A backend without it
// has no such directory, and the policy treats every path as someone else's.
type Workspace interface {
	// WorkDir is the directory, as commands see it; "" means none.
	WorkDir() string
}

// Progress is where long work (an image pull, a conversion) reports as it goes. A terminal
// gets live progress bars; anything else gets plain lines.
type Progress struct {
	W io.Writer
	// Fd and Terminal describe W when it is a terminal.
	Fd       uintptr
	Terminal bool
}

// Printf writes one progress line; a zero Progress discards it.
func (p Progress) Printf(format string, args ...any) {
	if p.W != nil {
		fmt.Fprintf(p.W, format, args...)
	}
}

// ImageSource is a root filesystem to make an image from, on machines without a registry:
// exactly one of RootfsDir and TarFile is set.
type ImageSource struct {
	RootfsDir string
	TarFile   string
	// Tag names the new image.
	Tag string
}

// ImageInfo describes an image a backend keeps on this machine.
type ImageInfo struct {
	// Ref is the value that selects this image in the backend's `<name>.image` setting.
	Ref string `json:"ref"`
	// ID is the backend's identifier (an image digest, a file path).
	ID      string    `json:"id,omitempty"`
	Size    int64     `json:"size,omitempty"`
	Created time.Time `json:"created,omitzero"`
	// Configured says the backend's current configuration uses this image.
	Configured bool `json:"configured,omitempty"`
}

// ImageManager is implemented by backends that keep images on this machine, so
// `hermes-sandbox image` can fetch and list them before the first session needs one.
type ImageManager interface {
	// PullImage fetches ref from its registry (or converts it, for backends that need a local
	// format) and returns what it made.
	PullImage(ctx context.Context, ref string, p Progress) (ImageInfo, error)
	// ImportImage makes an image from a root filesystem.
	ImportImage(ctx context.Context, src ImageSource, p Progress) (ImageInfo, error)
	// Images lists the images this backend has here.
	Images(ctx context.Context) ([]ImageInfo, error)
}

// GCOptions say what Collect removes.
type GCOptions struct {
	// IdleTimeout overrides the backend's configured idle timeout when positive: sessions idle
	// longer, with nothing running, are removed.
	IdleTimeout time.Duration
	// DryRun reports what would be removed and removes nothing.
	DryRun bool
	// SnapshotTTL, when positive, removes snapshots (see Brancher) older than it
	// (terminal.snapshot_ttl); 0 keeps them.
	SnapshotTTL time.Duration
	// OwnerGoneOnly removes only what an owner process that is gone left behind (its
	// sessions, its warm-pool members) and keeps everything else, idle or not: the sweep an
	// MCP server makes as it starts, after a predecessor was killed too hard to clean up.
	OwnerGoneOnly bool
}

// GCItem is one thing Collect removed (or would remove, or kept).
type GCItem struct {
	Kind   string `json:"kind"` // "container", "volume", "instance", "image", …
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// GCReport is what Collect did.
type GCReport struct {
	Removed []GCItem `json:"removed"`
	Kept    []GCItem `json:"kept"`
	// Failed lists what could not be removed, the reason being the error.
	Failed []GCItem `json:"failed"`
}

// Collector is implemented by backends that leave things behind worth reaping: idle
// sessions, leftovers of processes that are gone, caches nothing uses. A session removed by
// Collect starts fresh on its next command, which reports EnvironmentRecreated.
type Collector interface {
	Collect(ctx context.Context, opts GCOptions) (GCReport, error)
}
