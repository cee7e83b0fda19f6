//go:build unix

package agent

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

type pendingWrite struct {
	f      *os.File
	target string
	mode   os.FileMode
	err    error
}

func (pw *pendingWrite) abort() {
	pw.f.Close()
	os.Remove(pw.f.Name())
}

func (s *Server) call(id uint32, req CallRequest) {
	switch req.Op {
	case opPing:
		_ = s.out.write(tReply, id, []byte("{}"))
	case opSeedEnv:
		if err := s.state.seed(fromBytesMap(req.Env)); err != nil {
			s.sendErrFrom(id, err)
			return
		}
		_ = s.out.write(tReply, id, []byte("{}"))
	case opState:
		cwd, env := s.state.snapshot()
		_ = s.send(tReply, id, savedState{Cwd: Bytes(cwd), Env: toBytesMap(envMap(env))})
	case opWriteFile:
		s.startWrite(id, req)
	case opReadFile:
		s.goTracked(func() { s.readFile(id, req) })
	case opListDir:
		s.listDir(id, req)
	case opResolvePath:
		s.goTracked(func() { s.resolvePath(id, req) })
	case opJobStart, opJobList, opJobPoll, opJobWait, opJobKill:
		s.goTracked(func() { s.jobCall(id, req) })
	case opReset:
		s.goTracked(func() { s.resetCall(id, req) })
	default:
		s.sendErr(id, KindUnsupported, "unknown operation "+req.Op)
	}
}

func envMap(env []string) map[string]string {
	m := make(map[string]string, len(env))
	for _, kv := range env {
		for i := 0; i < len(kv); i++ {
			if kv[i] == '=' {
				m[kv[:i]] = kv[i+1:]
				break
			}
		}
	}
	return m
}

func (s *Server) readFile(id uint32, req CallRequest) {
	p := s.resolve(req.Path)
	f, err := os.Open(p)
	if err != nil {
		s.sendErrFrom(id, err)
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		s.sendErrFrom(id, err)
		return
	}
	if fi.IsDir() {
		s.sendErr(id, KindInvalid, p+" is a directory")
		return
	}
	if req.Offset > 0 {
		if _, err := f.Seek(req.Offset, io.SeekStart); err != nil {
			s.sendErrFrom(id, err)
			return
		}
	}
	var r io.Reader = f
	if req.Limit > 0 {
		r = io.LimitReader(f, req.Limit)
	}
	var n int64
	buf := make([]byte, 256<<10)
	for {
		k, err := r.Read(buf)
		if k > 0 {
			n += int64(k)
			if s.out.write(tData, id, buf[:k]) != nil {
				return
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			s.sendErrFrom(id, err)
			return
		}
	}
	_ = s.send(tReply, id, ReadReply{Size: fi.Size(), Read: n})
}

func (s *Server) startWrite(id uint32, req CallRequest) {
	target := s.resolve(req.Path)
	mode := os.FileMode(req.Mode & 0o7777)
	if mode == 0 {
		mode = 0o644
	}
	if err := s.checkWrite(target); err != nil {
		s.sendErrFrom(id, err)
		return
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		s.sendErrFrom(id, err)
		return
	}
	if fi, err := os.Stat(target); err == nil && fi.IsDir() {
		s.sendErr(id, KindInvalid, target+" is a directory")
		return
	}
	f, err := os.CreateTemp(filepath.Dir(target), ".hermes-write-*")
	if err != nil {
		s.sendErrFrom(id, err)
		return
	}
	s.mu.Lock()
	s.writes[id] = &pendingWrite{f: f, target: target, mode: mode}
	s.mu.Unlock()
}

// writeFrame handles a data or EOF frame of a write_file call.
func (s *Server) writeFrame(f frame, pw *pendingWrite) {
	if f.typ == tData {
		if pw.err == nil {
			_, pw.err = pw.f.Write(f.payload)
		}
		return
	}
	s.mu.Lock()
	delete(s.writes, f.id)
	s.mu.Unlock()
	err := pw.err
	if err == nil {
		err = pw.f.Chmod(pw.mode)
	}
	if err == nil {
		err = pw.f.Close()
	} else {
		pw.f.Close()
	}
	if err == nil {
		err = os.Rename(pw.f.Name(), pw.target)
	}
	if err != nil {
		os.Remove(pw.f.Name())
		s.sendErrFrom(f.id, fmt.Errorf("write %s: %w", pw.target, err))
		return
	}
	_ = s.out.write(tReply, f.id, []byte("{}"))
}

func (s *Server) listDir(id uint32, req CallRequest) {
	p := s.resolve(req.Path)
	entries, err := os.ReadDir(p)
	if err != nil {
		s.sendErrFrom(id, err)
		return
	}
	out := make([]FileEntry, 0, len(entries))
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil {
			continue
		}
		out = append(out, FileEntry{Name: e.Name(), Size: fi.Size(), Mode: fi.Mode().String(),
			IsDir: fi.IsDir(), ModTime: fi.ModTime()})
	}
	_ = s.send(tReply, id, out)
}
