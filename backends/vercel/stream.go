package vercel

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
)

// StreamError is an {"stream":"error"} line of a command's output.
type StreamError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *StreamError) Error() string {
	return fmt.Sprintf("command stream: %s (%s)", e.Message, e.Code)
}

// ErrUnknownCompletion says a command was started but whether (and how) it finished could
// not be learned; it is never started again.
var ErrUnknownCompletion = errors.New("the command's completion is unknown")

// maxReconnects bounds how often a cut output stream is picked up again.
const maxReconnects = 8

// outputCursor delivers each stream's bytes once, however often the log is replayed.
type outputCursor struct {
	stdout, stderr io.Writer
	delivered      [2]int64 // bytes already written, per stream
	pos            [2]int64 // position in the current replay
}

func (o *outputCursor) restart() { o.pos = [2]int64{} }

func (o *outputCursor) write(stream string, data string) error {
	i, w := 0, o.stdout
	if stream == "stderr" {
		i, w = 1, o.stderr
	}
	start := o.pos[i]
	o.pos[i] += int64(len(data))
	if o.pos[i] <= o.delivered[i] {
		return nil
	}
	skip := max(o.delivered[i]-start, 0)
	o.delivered[i] = o.pos[i]
	if w == nil {
		return nil
	}
	_, err := io.WriteString(w, data[skip:])
	return err
}

// ndjsonLine is any line of a command stream: the command record, or a log line.
type ndjsonLine struct {
	Command *Command        `json:"command"`
	Stream  string          `json:"stream"`
	Data    json.RawMessage `json:"data"`
}

// readLines decodes lines until the finished command (returned) or the end of the stream
// (nil, nil at a clean end, an error when cut mid-line).
func readLines(body io.Reader, out *outputCursor, first func(*Command)) (*Command, error) {
	dec := json.NewDecoder(body)
	for {
		var l ndjsonLine
		if err := dec.Decode(&l); err != nil {
			if errors.Is(err, io.EOF) {
				return nil, nil
			}
			return nil, err
		}
		switch {
		case l.Command != nil:
			if l.Command.ExitCode != nil {
				return l.Command, nil
			}
			if first != nil {
				first(l.Command)
			}
		case l.Stream == "stdout" || l.Stream == "stderr":
			var s string
			if err := json.Unmarshal(l.Data, &s); err != nil {
				return nil, fmt.Errorf("command stream: %s data: %w", l.Stream, err)
			}
			if err := out.write(l.Stream, s); err != nil {
				return nil, err
			}
		case l.Stream == "error":
			var se StreamError
			if err := json.Unmarshal(l.Data, &se); err != nil {
				return nil, fmt.Errorf("command stream error line: %w", err)
			}
			return nil, &se
		default:
			return nil, fmt.Errorf("command stream: unknown line %q", l.Stream)
		}
	}
}

func ndjson(resp *http.Response) error {
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt != "application/x-ndjson" {
		resp.Body.Close()
		return fmt.Errorf("expected a stream of command data, got %q", resp.Header.Get("Content-Type"))
	}
	return nil
}

// RunCommand starts a command and waits for it, streaming its output while it runs. started
// (optional) learns the command's id as soon as it is known, so a caller can kill it. A cut
// stream is picked up again from the command's logs, skipping what was already delivered;
// the command itself is never started twice. As the SDK's Session.runCommand does, it asks
// for the log lines in the stream (logs: true): without it the stream holds only the
// command, started and finished.
func (c *Client) RunCommand(ctx context.Context, sessionID string, req RunCommandRequest, stdout, stderr io.Writer, started func(*Command)) (*Command, error) {
	req.Wait, req.Logs = true, true
	if req.Env == nil {
		req.Env = map[string]string{}
	}
	if req.Args == nil {
		req.Args = []string{}
	}
	b, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	resp, err := c.do(ctx, http.MethodPost, sessionPath(sessionID, "/cmd"), nil, bytes.NewReader(b), "application/json", nil, false)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("start command: %w (it may or may not have started; not retried)", err)
	}
	if resp.StatusCode/100 != 2 {
		return nil, decodeError(resp)
	}
	if err := ndjson(resp); err != nil {
		return nil, err
	}
	out := &outputCursor{stdout: stdout, stderr: stderr}
	var cmd *Command
	done, err := readLines(resp.Body, out, func(c *Command) {
		cmd = c
		if started != nil {
			started(c)
		}
	})
	resp.Body.Close()
	if done != nil || ctx.Err() != nil {
		if done == nil {
			return nil, ctx.Err()
		}
		return done, nil
	}
	var se *StreamError
	if errors.As(err, &se) {
		return nil, err
	}
	if cmd == nil {
		return nil, fmt.Errorf("command stream ended before the command was named: %w", ErrUnknownCompletion)
	}
	return c.follow(ctx, sessionID, cmd.ID, out)
}

// follow picks a command's output up again from its logs until it has finished.
func (c *Client) follow(ctx context.Context, sessionID, cmdID string, out *outputCursor) (*Command, error) {
	var lastErr error
	finished := false
	for attempt := 0; attempt < maxReconnects; attempt++ {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		resp, err := c.do(ctx, http.MethodGet, sessionPath(sessionID, "/cmd/"+url.PathEscape(cmdID)+"/logs"), nil, nil, "", nil, true)
		if err == nil && resp.StatusCode/100 != 2 {
			err = decodeError(resp)
		} else if err == nil {
			err = ndjson(resp)
		}
		clean := false
		if err == nil {
			out.restart()
			_, err = readLines(resp.Body, out, nil)
			resp.Body.Close()
			clean = err == nil
		}
		var se *StreamError
		if errors.As(err, &se) {
			return nil, err
		}
		if err != nil {
			lastErr = err
			continue
		}
		if clean && finished {
			// The logs were read once more after the command had finished: nothing is missing.
			return c.GetCommand(ctx, sessionID, cmdID, false)
		}
		cmd, err := c.GetCommand(ctx, sessionID, cmdID, false)
		if err != nil {
			lastErr = err
			continue
		}
		// A stream that ended at a line boundary may have been cut while the command still
		// ran: read the logs again, after it has finished, for anything written since.
		if cmd.ExitCode != nil {
			finished = true
		}
	}
	return nil, fmt.Errorf("command %s: output stream kept breaking (%v): %w", cmdID, lastErr, ErrUnknownCompletion)
}
