//go:build unix

package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"mvdan.cc/sh/v3/syntax"

	"github.com/hermes-sandbox/hermes-sandbox/internal/proctree"
)

// Background jobs live in StateDir/jobs/ID: meta.json, stdout, stderr, cursor.json and, once
// the job ends, exit. A small supervising shell in its own session records the exit code, so a
// job outlives the helper that started it and a later helper can still poll it.

// maxPoll bounds the new output one poll returns per stream.
const maxPoll = 1 << 20

// With a timeout (whole seconds in __HERMES_JOB_TIMEOUT) a sleep is the clock: the job kills
// it when it ends first; when the sleep ends first, the supervisor records exit code 124 and
// a timedout file and kills its whole process group, itself included. A supervisor still alive
// past its deadline (its clock was killed) has its tree killed by the helper when the job is
// next looked at. Processes that left the group (setsid) are not followed once the supervisor
// has killed itself.
const supervisor = `__j=$__HERMES_JOB; __sh=$__HERMES_SHELL; __s=$__HERMES_SCRIPT; __t=$__HERMES_JOB_TIMEOUT
unset __HERMES_JOB __HERMES_SHELL __HERMES_SCRIPT __HERMES_JOB_TIMEOUT
if [ -z "$__t" ]; then
"$__sh" -c "$__s" </dev/null >"$__j/stdout" 2>"$__j/stderr"
echo $? >"$__j/exit.tmp" && mv "$__j/exit.tmp" "$__j/exit"
exit 0
fi
sleep "$__t" </dev/null >/dev/null 2>&1 & __w=$!
{ "$__sh" -c "$__s" </dev/null >"$__j/stdout" 2>"$__j/stderr"; echo $? >"$__j/exit.tmp" && mv "$__j/exit.tmp" "$__j/exit"; kill $__w 2>/dev/null; } &
wait $__w
if [ ! -e "$__j/exit" ]; then : >"$__j/timedout"; echo 124 >"$__j/exit.tmp" && mv "$__j/exit.tmp" "$__j/exit"; kill -KILL 0; fi
`

func (s *Server) jobsDir() string { return filepath.Join(s.opts.StateDir, "jobs") }

func (s *Server) jobCall(id uint32, req CallRequest) {
	var reply any
	var err error
	switch req.Op {
	case opJobStart:
		reply, err = s.jobStart(req)
	case opJobList:
		reply, err = s.jobList()
	case opJobPoll:
		reply, err = s.jobPoll(req.JobID)
	case opJobWait:
		reply, err = s.jobWait(req.JobID, time.Duration(req.WaitMS)*time.Millisecond)
	case opJobKill:
		reply, err = s.jobKill(req.JobID)
	}
	if err != nil {
		s.sendErrFrom(id, err)
		return
	}
	_ = s.send(tReply, id, reply)
}

func (s *Server) jobStart(req CallRequest) (*JobInfo, error) {
	if req.Run == nil {
		return nil, fmt.Errorf("job_start without a command: %w", errInvalid)
	}
	script := string(req.Run.Script)
	if len(req.Run.Argv) > 0 {
		quoted := make([]string, len(req.Run.Argv))
		for i, a := range req.Run.Argv {
			q, err := syntax.Quote(string(a), syntax.LangPOSIX)
			if err != nil {
				return nil, fmt.Errorf("argument %q cannot be passed to a shell: %w", a, errInvalid)
			}
			quoted[i] = q
		}
		script = strings.Join(quoted, " ")
	}
	if strings.TrimSpace(script) == "" {
		return nil, fmt.Errorf("empty command: %w", errInvalid)
	}
	// One start at a time, so two cannot both take the last place.
	s.jobMu.Lock()
	defer s.jobMu.Unlock()
	if req.MaxJobs > 0 {
		jobs, err := s.jobList()
		if err != nil {
			return nil, err
		}
		running := 0
		for _, j := range jobs {
			if j.Running {
				running++
			}
		}
		if running >= req.MaxJobs {
			return nil, fmt.Errorf("%d background jobs already run in this session, the limit (terminal.max_jobs): wait for one to end or kill one first: %w", running, errLimit)
		}
	}
	p, err := s.prepare(RunRequest{Argv: []Bytes{"true"}, Dir: req.Run.Dir, Env: req.Run.Env})
	if err != nil {
		return nil, err
	}
	jid := "job-" + randomHex(4)
	dir := filepath.Join(s.jobsDir(), jid)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	env := append(p.env, "__HERMES_JOB="+dir, "__HERMES_SHELL="+s.shell, "__HERMES_SCRIPT="+script)
	var limit time.Duration
	if req.Run.TimeoutMS > 0 {
		limit = time.Duration(req.Run.TimeoutMS) * time.Millisecond
		env = append(env, "__HERMES_JOB_TIMEOUT="+strconv.FormatInt(int64((limit+time.Second-1)/time.Second), 10))
	}
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	defer devnull.Close()
	var proc *os.Process
	s.startProcess(func() {
		proc, err = os.StartProcess(s.shell, []string{s.shell, "-c", supervisor, "hermes-job"}, &os.ProcAttr{
			Dir: p.cwd, Env: env, Files: []*os.File{devnull, devnull, devnull},
			Sys: &syscall.SysProcAttr{Setsid: true},
		})
	})
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start job: %w", err)
	}
	info := &JobInfo{ID: jid, Command: script, PID: proc.Pid, StartTime: procStartTicks(proc.Pid),
		Started: time.Now().UTC(), Running: true}
	if limit > 0 {
		info.Deadline = info.Started.Add(limit)
	}
	if err := writeJSON(filepath.Join(dir, "meta.json"), info); err != nil {
		return nil, err
	}
	// Reap the supervisor when it ends; the exit file is the record.
	go func() { _, _ = proc.Wait() }()
	return info, nil
}

func writeJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// procStartTicks reads a process's start time, so a recycled PID is not taken for the job.
func procStartTicks(pid int) uint64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	fields := strings.Fields(string(b[i+1:]))
	if len(fields) < 20 {
		return 0
	}
	v, _ := strconv.ParseUint(fields[19], 10, 64)
	return v
}

func (s *Server) loadJob(jid string) (*JobInfo, string, error) {
	if jid == "" || strings.ContainsAny(jid, "/\\") || jid == "." || jid == ".." {
		return nil, "", fmt.Errorf("job %q: %w", jid, os.ErrNotExist)
	}
	dir := filepath.Join(s.jobsDir(), jid)
	b, err := os.ReadFile(filepath.Join(dir, "meta.json"))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, "", fmt.Errorf("no job %q: %w", jid, os.ErrNotExist)
		}
		return nil, "", err
	}
	var info JobInfo
	if err := json.Unmarshal(b, &info); err != nil {
		return nil, "", fmt.Errorf("job %s: corrupt metadata: %w", jid, err)
	}
	s.refresh(&info, dir)
	return &info, dir, nil
}

// refresh fills Running and ExitCode from the exit file and the process table.
func (s *Server) refresh(info *JobInfo, dir string) {
	if b, err := os.ReadFile(filepath.Join(dir, "exit")); err == nil {
		if code, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			info.Running, info.ExitCode = false, &code
			return
		}
	}
	alive := unix.Kill(info.PID, 0) == nil && procStartTicks(info.PID) == info.StartTime
	if alive && !info.Deadline.IsZero() && time.Now().After(info.Deadline.Add(2*time.Second)) {
		// Past its deadline and its supervisor has not ended it: end it here.
		proctree.Kill(info.PID)
		code := ExitJobTimeout
		info.Running, info.ExitCode = false, &code
		_ = os.WriteFile(filepath.Join(dir, "timedout"), nil, 0o600)
		_ = os.WriteFile(filepath.Join(dir, "exit"), []byte(strconv.Itoa(code)+"\n"), 0o600)
		return
	}
	info.Running = alive
	if !alive {
		// Killed before its supervisor could record an exit code.
		code := 128 + int(unix.SIGKILL)
		info.ExitCode = &code
		_ = os.WriteFile(filepath.Join(dir, "exit"), []byte(strconv.Itoa(code)+"\n"), 0o600)
	}
}

func (s *Server) jobList() ([]JobInfo, error) {
	entries, err := os.ReadDir(s.jobsDir())
	if errors.Is(err, os.ErrNotExist) {
		return []JobInfo{}, nil
	}
	if err != nil {
		return nil, err
	}
	out := []JobInfo{}
	for _, e := range entries {
		if info, _, err := s.loadJob(e.Name()); err == nil {
			out = append(out, *info)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Started.Before(out[j].Started) })
	return out, nil
}

type cursor struct {
	Stdout int64 `json:"stdout"`
	Stderr int64 `json:"stderr"`
}

func (s *Server) jobPoll(jid string) (*JobOutputReply, error) {
	info, dir, err := s.loadJob(jid)
	if err != nil {
		return nil, err
	}
	var cur cursor
	if b, err := os.ReadFile(filepath.Join(dir, "cursor.json")); err == nil {
		_ = json.Unmarshal(b, &cur)
	}
	reply := &JobOutputReply{JobInfo: *info}
	var t1, t2 bool
	reply.Stdout, cur.Stdout, t1 = readFrom(filepath.Join(dir, "stdout"), cur.Stdout)
	reply.Stderr, cur.Stderr, t2 = readFrom(filepath.Join(dir, "stderr"), cur.Stderr)
	reply.Truncated = t1 || t2
	if err := writeJSON(filepath.Join(dir, "cursor.json"), cur); err != nil {
		return nil, err
	}
	return reply, nil
}

// readFrom returns up to maxPoll bytes of path from off, the new offset, and whether more
// was available.
func readFrom(path string, off int64) ([]byte, int64, bool) {
	f, err := os.Open(path)
	if err != nil {
		return []byte{}, off, false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() <= off {
		return []byte{}, off, false
	}
	n := min(fi.Size()-off, maxPoll)
	buf := make([]byte, n)
	k, _ := f.ReadAt(buf, off)
	if k < 0 {
		k = 0
	}
	return buf[:k], off + int64(k), fi.Size()-off > int64(k)
}

func (s *Server) jobWait(jid string, limit time.Duration) (*JobOutputReply, error) {
	if limit <= 0 {
		limit = 24 * time.Hour
	}
	deadline := time.Now().Add(limit)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		info, _, err := s.loadJob(jid)
		if err != nil {
			return nil, err
		}
		if !info.Running || time.Now().After(deadline) {
			return s.jobPoll(jid)
		}
		<-tick.C
	}
}

func (s *Server) jobKill(jid string) (*JobInfo, error) {
	info, dir, err := s.loadJob(jid)
	if err != nil {
		return nil, err
	}
	if info.Running {
		proctree.Kill(info.PID)
		// Wait (bounded) for the supervisor to go, then record the kill.
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) && unix.Kill(info.PID, 0) == nil && procStartTicks(info.PID) == info.StartTime {
			time.Sleep(5 * time.Millisecond)
		}
		code := 128 + int(unix.SIGKILL)
		if _, err := os.Stat(filepath.Join(dir, "exit")); errors.Is(err, os.ErrNotExist) {
			_ = os.WriteFile(filepath.Join(dir, "exit"), []byte(strconv.Itoa(code)+"\n"), 0o600)
		}
		info, _, err = s.loadJob(jid)
		if err != nil {
			return nil, err
		}
	}
	return info, nil
}

// KillJobs kills every running background job recorded under stateDir. Removing a session
// calls it so that nothing of the session is left running.
func KillJobs(stateDir string) {
	s := &Server{opts: Options{StateDir: stateDir}}
	jobs, _ := s.jobList()
	for _, j := range jobs {
		if j.Running {
			_, _ = s.jobKill(j.ID)
		}
	}
}
