package vercel

import (
	"context"
	"fmt"
	"path"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// abs resolves p against the session's working directory.
func (s *session) abs(ctx context.Context, p string) (string, error) {
	if p == "" {
		return "", fmt.Errorf("empty path: %w", sandbox.ErrInvalidConfig)
	}
	if path.IsAbs(p) {
		return path.Clean(p), nil
	}
	cwd, err := s.currentDir(ctx)
	if err != nil {
		return "", err
	}
	return path.Join(cwd, p), nil
}

// ReadFile reads a file with fs/read and returns limit bytes (0 = all) from offset.
func (s *session) ReadFile(ctx context.Context, p string, offset, limit int64) ([]byte, error) {
	full, err := s.abs(ctx, p)
	if err != nil {
		return nil, &sandbox.Error{Backend: Name, Op: "read " + p, ID: s.name, Err: err}
	}
	id, err := s.vmID(ctx)
	if err != nil {
		return nil, err
	}
	data, err := s.b.api.ReadFile(ctx, id, full, "")
	if err != nil {
		return nil, s.b.apiErr("read "+full, s.name, err)
	}
	if offset < 0 || limit < 0 {
		return nil, &sandbox.Error{Backend: Name, Op: "read " + full, ID: s.name, Err: fmt.Errorf("negative offset or limit: %w", sandbox.ErrInvalidConfig)}
	}
	if offset >= int64(len(data)) {
		return []byte{}, nil
	}
	data = data[offset:]
	if limit > 0 && limit < int64(len(data)) {
		data = data[:limit]
	}
	return data, nil
}

// WriteFile writes a file with fs/write (a gzipped tar extracted in the file's directory),
// creating missing parent directories with fs/mkdir.
func (s *session) WriteFile(ctx context.Context, p string, data []byte, mode uint32) error {
	full, err := s.abs(ctx, p)
	if err != nil {
		return &sandbox.Error{Backend: Name, Op: "write " + p, ID: s.name, Err: err}
	}
	id, err := s.vmID(ctx)
	if err != nil {
		return err
	}
	if mode == 0 {
		mode = 0o644
	}
	dir, base := path.Split(full)
	tgz, err := tarGz(map[string][]byte{base: data}, int64(mode&0o7777))
	if err != nil {
		return err
	}
	err = s.b.api.WriteFiles(ctx, id, dir, tgz)
	if isNotFound(err) {
		if err = s.mkdirAll(ctx, id, path.Clean(dir)); err == nil {
			err = s.b.api.WriteFiles(ctx, id, dir, tgz)
		}
	}
	return s.b.apiErr("write "+full, s.name, err)
}

// mkdirAll creates dir and its missing parents with fs/mkdir.
func (s *session) mkdirAll(ctx context.Context, id, dir string) error {
	err := s.b.api.Mkdir(ctx, id, dir, "")
	if isNotFound(err) && dir != "/" {
		if err = s.mkdirAll(ctx, id, path.Dir(dir)); err == nil {
			err = s.b.api.Mkdir(ctx, id, dir, "")
		}
	}
	if isConflict(err) {
		return nil
	}
	return err
}
