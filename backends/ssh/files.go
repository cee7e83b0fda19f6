package ssh

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/pkg/sftp"
	"mvdan.cc/sh/v3/syntax"

	"github.com/hermes-sandbox/hermes-sandbox/internal/agent"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// Files and background jobs of plain-shell sessions go through SFTP. Jobs use the helper's
// on-disk layout (jobs/ID/meta.json, stdout, stderr, cursor.json, exit), so listing and
// removing sessions treat both kinds alike.

// resolve makes p absolute against the session's directory, expanding ~.
func (s *shellSession) resolve(p string) string {
	s.mu.Lock()
	cwd, home := s.cwd, s.home
	s.mu.Unlock()
	if p == "~" || strings.HasPrefix(p, "~/") {
		p = home + p[1:]
	}
	if !path.IsAbs(p) {
		p = path.Join(cwd, p)
	}
	return path.Clean(p)
}

func (s *shellSession) sftp(ctx context.Context) (*sftp.Client, error) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, sandbox.ErrClosed
	}
	return s.h.sftp(ctx)
}

// ReadFile reads up to limit bytes (0 = all) from offset.
func (s *shellSession) ReadFile(ctx context.Context, p string, offset, limit int64) ([]byte, error) {
	full := s.resolve(p)
	cl, err := s.sftp(ctx)
	if err != nil {
		return nil, wrap("read", s.name, err)
	}
	f, err := cl.Open(full)
	if err != nil {
		return nil, wrap("read", s.name, fsError("read", full, err))
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, wrap("read", s.name, fsError("read", full, err))
	}
	if fi.IsDir() {
		return nil, wrap("read", s.name, fmt.Errorf("read %s: is a directory: %w", full, sandbox.ErrInvalidConfig))
	}
	if offset > 0 {
		if _, err := f.Seek(offset, io.SeekStart); err != nil {
			return nil, wrap("read", s.name, fsError("read", full, err))
		}
	}
	var r io.Reader = f
	if limit > 0 {
		r = io.LimitReader(f, limit)
	}
	b, err := io.ReadAll(&ctxReader{ctx: ctx, r: r})
	if err != nil {
		return nil, wrap("read", s.name, fsError("read", full, err))
	}
	return b, nil
}

// WriteFile writes data to p atomically (a temporary file renamed into place), creating
// parent directories.
func (s *shellSession) WriteFile(ctx context.Context, p string, data []byte, mode uint32) error {
	full := s.resolve(p)
	cl, err := s.sftp(ctx)
	if err != nil {
		return wrap("write", s.name, err)
	}
	if err := writeAtomic(ctx, cl, full, data, os.FileMode(mode&0o7777)); err != nil {
		return wrap("write", s.name, fsError("write", full, err))
	}
	return nil
}

func writeAtomic(ctx context.Context, cl *sftp.Client, full string, data []byte, mode os.FileMode) error {
	if mode == 0 {
		mode = 0o644
	}
	if err := cl.MkdirAll(path.Dir(full)); err != nil {
		return err
	}
	if fi, err := cl.Stat(full); err == nil && fi.IsDir() {
		return fmt.Errorf("is a directory: %w", sandbox.ErrInvalidConfig)
	}
	tmp := path.Join(path.Dir(full), ".hermes-write-"+sandbox.RandomHex(6))
	f, err := cl.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL)
	if err != nil {
		return err
	}
	_, err = f.ReadFromWithConcurrency(&ctxReader{ctx: ctx, r: bytes.NewReader(data)}, 64)
	if err == nil {
		err = f.Chmod(mode)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		if _, ok := cl.HasExtension("posix-rename@openssh.com"); ok {
			err = cl.PosixRename(tmp, full)
		} else {
			_ = cl.Remove(full)
			err = cl.Rename(tmp, full)
		}
	}
	if err != nil {
		cl.Remove(tmp)
	}
	return err
}

// ListDir lists a directory.
func (s *shellSession) ListDir(ctx context.Context, p string) ([]sandbox.FileInfo, error) {
	full := s.resolve(p)
	cl, err := s.sftp(ctx)
	if err != nil {
		return nil, wrap("list", s.name, err)
	}
	entries, err := cl.ReadDir(full)
	if err != nil {
		return nil, wrap("list", s.name, fsError("list", full, err))
	}
	out := make([]sandbox.FileInfo, 0, len(entries))
	for _, e := range entries {
		out = append(out, sandbox.FileInfo{Name: e.Name(), Size: e.Size(), Mode: e.Mode().String(), IsDir: e.IsDir(), ModTime: e.ModTime()})
	}
	return out, nil
}

// jobsDir is the session's remote job directory.
func (s *shellSession) jobsDir() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stateDir + "/jobs"
}

// StartJob starts a background job that outlives this process.
func (s *shellSession) StartJob(ctx context.Context, cmd sandbox.Command) (sandbox.JobStatus, error) {
	script := cmd.Script
	if len(cmd.Argv) > 0 {
		words := make([]string, len(cmd.Argv))
		for i, a := range cmd.Argv {
			q, err := syntax.Quote(a, syntax.LangPOSIX)
			if err != nil {
				return sandbox.JobStatus{}, wrap("job start", s.name, fmt.Errorf("argument %q cannot be passed to a shell: %w", a, sandbox.ErrInvalidConfig))
			}
			words[i] = q
		}
		script = strings.Join(words, " ")
	}
	if strings.TrimSpace(script) == "" {
		return sandbox.JobStatus{}, wrap("job start", s.name, fmt.Errorf("empty command: %w", sandbox.ErrInvalidConfig))
	}
	// One start at a time, so two cannot both take the last place.
	s.jobMu.Lock()
	defer s.jobMu.Unlock()
	maxJobs := cmd.MaxJobs
	if maxJobs <= 0 {
		maxJobs = sandbox.DefaultMaxJobs
	}
	jobs, err := s.Jobs(ctx)
	if err != nil {
		return sandbox.JobStatus{}, err
	}
	running := 0
	for _, j := range jobs {
		if j.Running {
			running++
		}
	}
	if running >= maxJobs {
		return sandbox.JobStatus{}, wrap("job start", s.name, fmt.Errorf("%d background jobs already run in this session, the limit (terminal.max_jobs): wait for "+
			"one to end or kill one first: %w", running, sandbox.ErrLimit))
	}
	spec := s.spec(cmd.Dir, cmd.Env)
	spec.job = true
	timeout := cmd.JobTimeout
	if timeout <= 0 {
		timeout = sandbox.DefaultJobTimeout
	}
	spec.jobTimeout = int64((timeout + time.Second - 1) / time.Second)
	w, err := spec.wrapper()
	if err != nil {
		return sandbox.JobStatus{}, wrap("job start", s.name, fmt.Errorf("%w: %w", err, sandbox.ErrInvalidConfig))
	}
	jid := "job-" + sandbox.RandomHex(4)
	dir := s.jobsDir() + "/" + jid
	pid, ticks, err := s.jobStart(ctx, dir, script, w)
	if err != nil {
		return sandbox.JobStatus{}, wrap("job start", s.name, err)
	}
	info := agent.JobInfo{ID: jid, Command: script, PID: pid, StartTime: ticks, Started: time.Now().UTC(), Running: true}
	info.Deadline = info.Started.Add(timeout)
	cl, err := s.sftp(ctx)
	if err == nil {
		var b []byte
		b, _ = json.Marshal(info)
		err = writeAtomic(ctx, cl, dir+"/meta.json", b, 0o600)
	}
	if err != nil {
		return sandbox.JobStatus{}, wrap("job start", s.name, err)
	}
	return jobStatus(info), nil
}

func jobStatus(j agent.JobInfo) sandbox.JobStatus {
	return sandbox.JobStatus{ID: j.ID, Command: j.Command, Running: j.Running, ExitCode: j.ExitCode, Started: j.Started, PID: j.PID}
}

func readSmall(cl *sftp.Client, p string) ([]byte, error) {
	f, err := cl.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, 1<<20))
}

// procAlive reports whether pid runs with the given start time, from /proc over SFTP. A host
// without /proc reports every recorded job as running until its exit file appears.
func procAlive(cl *sftp.Client, pid int, ticks uint64) bool {
	b, err := readSmall(cl, "/proc/"+strconv.Itoa(pid)+"/stat")
	if err != nil {
		if _, perr := cl.Stat("/proc/self"); perr != nil {
			return true
		}
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 || f[0] == "Z" {
		return false
	}
	got, _ := strconv.ParseUint(f[19], 10, 64)
	return ticks == 0 || got == ticks
}

// loadJob reads a job's metadata and refreshes its state from the exit file and /proc.
func loadJob(cl *sftp.Client, jobsDir, jid string) (*agent.JobInfo, string, error) {
	if jid == "" || strings.ContainsAny(jid, "/\\") || jid == "." || jid == ".." {
		return nil, "", fmt.Errorf("job %q: %w", jid, sandbox.ErrNotFound)
	}
	dir := jobsDir + "/" + jid
	b, err := readSmall(cl, dir+"/meta.json")
	if errors.Is(err, os.ErrNotExist) {
		return nil, "", fmt.Errorf("no job %q: %w", jid, sandbox.ErrNotFound)
	}
	if err != nil {
		return nil, "", err
	}
	var info agent.JobInfo
	if err := json.Unmarshal(b, &info); err != nil {
		return nil, "", fmt.Errorf("job %s: corrupt metadata: %w", jid, err)
	}
	if b, err := readSmall(cl, dir+"/exit"); err == nil {
		if code, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			info.Running, info.ExitCode = false, &code
			return &info, dir, nil
		}
	}
	info.Running = procAlive(cl, info.PID, info.StartTime)
	if !info.Running {
		code := 137
		info.ExitCode = &code
		_ = writeAtomic(context.Background(), cl, dir+"/exit", []byte("137\n"), 0o600)
	}
	return &info, dir, nil
}

// Jobs lists the session's background jobs.
func (s *shellSession) Jobs(ctx context.Context) ([]sandbox.JobStatus, error) {
	cl, err := s.sftp(ctx)
	if err != nil {
		return nil, wrap("job list", s.name, err)
	}
	entries, err := cl.ReadDir(s.jobsDir())
	if errors.Is(err, os.ErrNotExist) {
		return []sandbox.JobStatus{}, nil
	}
	if err != nil {
		return nil, wrap("job list", s.name, err)
	}
	var infos []agent.JobInfo
	for _, e := range entries {
		if info, _, err := loadJob(cl, s.jobsDir(), e.Name()); err == nil {
			infos = append(infos, *info)
		}
	}
	sort.Slice(infos, func(i, j int) bool { return infos[i].Started.Before(infos[j].Started) })
	out := make([]sandbox.JobStatus, len(infos))
	for i, j := range infos {
		out[i] = jobStatus(j)
	}
	return out, nil
}

type jobCursor struct {
	Stdout int64 `json:"stdout"`
	Stderr int64 `json:"stderr"`
}

// maxPoll bounds the new output one poll returns per stream.
const maxPoll = 1 << 20

func readFrom(cl *sftp.Client, p string, off int64) ([]byte, int64, bool) {
	f, err := cl.Open(p)
	if err != nil {
		return nil, off, false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() <= off {
		return nil, off, false
	}
	n := min(fi.Size()-off, maxPoll)
	buf := make([]byte, n)
	k, _ := f.ReadAt(buf, off)
	return buf[:k], off + int64(k), fi.Size()-off > int64(k)
}

// PollJob returns output written since the previous poll.
func (s *shellSession) PollJob(ctx context.Context, id string) (sandbox.JobOutput, error) {
	cl, err := s.sftp(ctx)
	if err != nil {
		return sandbox.JobOutput{}, wrap("job poll", s.name, err)
	}
	info, dir, err := loadJob(cl, s.jobsDir(), id)
	if err != nil {
		return sandbox.JobOutput{}, wrap("job poll", s.name, err)
	}
	var cur jobCursor
	if b, err := readSmall(cl, dir+"/cursor.json"); err == nil {
		_ = json.Unmarshal(b, &cur)
	}
	out := sandbox.JobOutput{JobStatus: jobStatus(*info)}
	o, no, t1 := readFrom(cl, dir+"/stdout", cur.Stdout)
	e, ne, t2 := readFrom(cl, dir+"/stderr", cur.Stderr)
	out.Stdout, out.Stderr, out.Truncated = string(o), string(e), t1 || t2
	if no != cur.Stdout || ne != cur.Stderr {
		b, _ := json.Marshal(jobCursor{Stdout: no, Stderr: ne})
		if err := writeAtomic(ctx, cl, dir+"/cursor.json", b, 0o600); err != nil {
			return sandbox.JobOutput{}, wrap("job poll", s.name, err)
		}
	}
	return out, nil
}

// WaitJob waits for the job to end (or ctx) and returns its remaining output.
func (s *shellSession) WaitJob(ctx context.Context, id string) (sandbox.JobOutput, error) {
	cl, err := s.sftp(ctx)
	if err != nil {
		return sandbox.JobOutput{}, wrap("job wait", s.name, err)
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		info, _, err := loadJob(cl, s.jobsDir(), id)
		if err != nil {
			return sandbox.JobOutput{}, wrap("job wait", s.name, err)
		}
		if !info.Running {
			return s.PollJob(ctx, id)
		}
		select {
		case <-ctx.Done():
			if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
				return s.PollJob(context.WithoutCancel(ctx), id)
			}
			return sandbox.JobOutput{}, wrap("job wait", s.name, ctx.Err())
		case <-tick.C:
		}
	}
}

// KillJob kills a job's whole process tree.
func (s *shellSession) KillJob(ctx context.Context, id string) (sandbox.JobStatus, error) {
	cl, err := s.sftp(ctx)
	if err != nil {
		return sandbox.JobStatus{}, wrap("job kill", s.name, err)
	}
	info, dir, err := loadJob(cl, s.jobsDir(), id)
	if err != nil {
		return sandbox.JobStatus{}, wrap("job kill", s.name, err)
	}
	if !info.Running {
		return jobStatus(*info), nil
	}
	if err := s.h.killTree(ctx, info.PID); err != nil {
		return sandbox.JobStatus{}, wrap("job kill", s.name, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && procAlive(cl, info.PID, info.StartTime) {
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := cl.Stat(dir + "/exit"); errors.Is(err, os.ErrNotExist) {
		_ = writeAtomic(ctx, cl, dir+"/exit", []byte("137\n"), 0o600)
	}
	info, _, err = loadJob(cl, s.jobsDir(), id)
	if err != nil {
		return sandbox.JobStatus{}, wrap("job kill", s.name, err)
	}
	return jobStatus(*info), nil
}

var (
	_ sandbox.FileSystem = (*shellSession)(nil)
	_ sandbox.JobRunner  = (*shellSession)(nil)
)
