package mcpserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// maxReadBytes is how much of a file read_file reads: one gated call reads at most this much,
// so a line offset beyond it needs the terminal.
const maxReadBytes = 8 << 20

// defaultReadLines is read_file's default limit.
const defaultReadLines = 2000

// ReadFileInput is read_file's arguments. Offset and limit count lines.
type ReadFileInput struct {
	Path   string `json:"path" jsonschema:"the file, absolute or relative to the session's working directory"`
	Offset int    `json:"offset,omitempty" jsonschema:"the first line to return, 1-based (default 1)"`
	Limit  int    `json:"limit,omitempty" jsonschema:"how many lines to return (default 2000)"`
}

// ReadFileResult is read_file's structured result.
type ReadFileResult struct {
	Path       string `json:"path"`
	Content    string `json:"content" jsonschema:"the lines, exactly as in the file"`
	StartLine  int    `json:"start_line" jsonschema:"the first line returned, 1-based"`
	EndLine    int    `json:"end_line" jsonschema:"the last line returned; start_line-1 when none"`
	TotalLines int    `json:"total_lines"`
	TotalBytes int64  `json:"total_bytes"`
	Truncated  bool   `json:"truncated" jsonschema:"more lines follow end_line"`
	NextOffset int    `json:"next_offset,omitzero" jsonschema:"the offset that continues after this part"`
	Partial    bool   `json:"partial,omitzero" jsonschema:"the file is larger than read_file reads: total_lines and total_bytes count only its first part"`
}

// WriteFileInput is write_file's arguments.
type WriteFileInput struct {
	Path    string `json:"path" jsonschema:"the file, absolute or relative to the session's working directory"`
	Content string `json:"content" jsonschema:"the file's new content"`
}

// WriteFileResult is write_file's structured result.
type WriteFileResult struct {
	Path         string `json:"path"`
	BytesWritten int    `json:"bytes_written"`
}

func (s *Server) files(ctx context.Context, req *mcp.CallToolRequest, tool string) (sandbox.FileSystem, context.Context, func(), error) {
	sb, cctx, release, err := s.call(ctx, req)
	if err != nil {
		return nil, nil, nil, failure(req.Session, tool, err)
	}
	if err := s.checkEnabled(sb, tool); err != nil {
		release()
		return nil, nil, nil, failure(req.Session, tool, err)
	}
	fs, ok := sb.(sandbox.FileSystem)
	if !ok || !s.caps.Files {
		release()
		return nil, nil, nil, fmt.Errorf("%s: the %s backend has no file access; use terminal instead", tool, s.backend.Name())
	}
	return fs, cctx, release, nil
}

func (s *Server) readFile(ctx context.Context, req *mcp.CallToolRequest, in ReadFileInput) (*mcp.CallToolResult, ReadFileResult, error) {
	out := ReadFileResult{Path: in.Path}
	if in.Path == "" {
		return nil, out, errors.New("read_file: path is empty")
	}
	if in.Offset < 0 || in.Limit < 0 {
		return nil, out, errors.New("read_file: offset and limit count lines and cannot be negative")
	}
	fs, cctx, release, err := s.files(ctx, req, toolReadFile)
	if err != nil {
		return nil, out, err
	}
	defer release()
	data, err := fs.ReadFile(cctx, in.Path, 0, maxReadBytes+1)
	if err != nil {
		return nil, out, failure(req.Session, "read_file "+in.Path, err)
	}
	partial := len(data) > maxReadBytes
	if partial {
		data = data[:maxReadBytes]
		if i := bytes.LastIndexByte(data, '\n'); i >= 0 {
			data = data[:i+1]
		}
	}
	if bytes.IndexByte(data[:min(len(data), 8192)], 0) >= 0 {
		return nil, out, fmt.Errorf("read_file: %s looks binary (it holds NUL bytes); inspect it with terminal, e.g. `file %s` or `xxd %s | head`",
			in.Path, in.Path, in.Path)
	}
	out = pickLines(in.Path, data, in.Offset, in.Limit, s.outputLimit())
	out.Partial = partial
	return readResult(out), out, nil
}

// pickLines selects lines [offset, offset+limit) of data, bounded to maxBytes of content.
func pickLines(path string, data []byte, offset, limit, maxBytes int) ReadFileResult {
	if offset == 0 {
		offset = 1
	}
	if limit == 0 {
		limit = defaultReadLines
	}
	out := ReadFileResult{Path: path, TotalBytes: int64(len(data)), StartLine: offset, EndLine: offset - 1}
	var content []byte
	line := 0
	for rest := data; len(rest) > 0; {
		var cur []byte
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			cur, rest = rest[:i+1], rest[i+1:]
		} else {
			cur, rest = rest, nil
		}
		line++
		if line < offset || out.Truncated {
			continue
		}
		if line >= offset+limit {
			out.Truncated = true
			continue
		}
		if len(content)+len(cur) > maxBytes {
			if len(content) == 0 {
				// One line longer than the whole budget: return its head.
				cut := maxBytes
				for cut > 0 && !utf8.RuneStart(cur[cut]) {
					cut--
				}
				content = append(content, cur[:cut]...)
				out.EndLine = line
			}
			out.Truncated = true
			continue
		}
		content = append(content, cur...)
		out.EndLine = line
	}
	out.TotalLines = line
	out.Content = strings.ToValidUTF8(string(content), "\uFFFD")
	if out.Truncated {
		out.NextOffset = out.EndLine + 1
	}
	return out
}

func readResult(out ReadFileResult) *mcp.CallToolResult {
	var tr string
	switch {
	case out.TotalLines == 0:
		tr = fmt.Sprintf("[%s is empty]", out.Path)
	case out.EndLine < out.StartLine:
		tr = fmt.Sprintf("[%s has %d lines; offset %d is past the end]", out.Path, out.TotalLines, out.StartLine)
	default:
		tr = fmt.Sprintf("[%s: lines %d-%d of %d, %d bytes in all]", out.Path, out.StartLine, out.EndLine, out.TotalLines, out.TotalBytes)
	}
	if out.Truncated {
		tr += fmt.Sprintf("\n[more follows: read_file with offset %d]", out.NextOffset)
	}
	if out.Partial {
		tr += fmt.Sprintf("\n[only the first %d MiB of the file were read; use terminal (sed -n, tail) for the rest]", maxReadBytes>>20)
	}
	if out.Content == "" {
		return textResult(tr)
	}
	return textResult(out.Content, tr)
}

func (s *Server) writeFile(ctx context.Context, req *mcp.CallToolRequest, in WriteFileInput) (*mcp.CallToolResult, WriteFileResult, error) {
	out := WriteFileResult{Path: in.Path}
	if in.Path == "" {
		return nil, out, errors.New("write_file: path is empty")
	}
	fs, cctx, release, err := s.files(ctx, req, toolWriteFile)
	if err != nil {
		return nil, out, err
	}
	defer release()
	if err := fs.WriteFile(cctx, in.Path, []byte(in.Content), 0o644); err != nil {
		return nil, out, failure(req.Session, "write_file "+in.Path, err)
	}
	out.BytesWritten = len(in.Content)
	return textResult(fmt.Sprintf("wrote %d bytes to %s", out.BytesWritten, in.Path)), out, nil
}
