package vercel

import (
	"context"
	"fmt"
	"path"
	"strings"

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

// WriteFile writes a file with fs/write, as the SDK's writeFiles does: a gzipped tar
// extracted at "/", its entry named by the path relative to it; the service makes missing
// parent directories.
func (s *session) WriteFile(ctx context.Context, p string, data []byte, mode uint32) error {
	full, err := s.abs(ctx, p)
	if err != nil {
		return &sandbox.Error{Backend: Name, Op: "write " + p, ID: s.name, Err: err}
	}
	if full == "/" {
		return &sandbox.Error{Backend: Name, Op: "write " + p, ID: s.name, Err: fmt.Errorf("/ is a directory: %w", sandbox.ErrInvalidConfig)}
	}
	id, err := s.vmID(ctx)
	if err != nil {
		return err
	}
	if mode == 0 {
		mode = 0o644
	}
	tgz, err := tarGz(map[string][]byte{strings.TrimPrefix(full, "/"): data}, int64(mode&0o7777))
	if err != nil {
		return err
	}
	return s.b.apiErr("write "+full, s.name, s.b.api.WriteFiles(ctx, id, "/", tgz))
}
