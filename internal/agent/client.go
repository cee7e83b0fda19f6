package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"strings"
	"sync"
	"time"
)

// ErrConnLost says the stream to the helper broke; the sandbox may still be fine and a new
// helper can be started.
var ErrConnLost = errors.New("connection to the sandbox helper lost")

// ErrNotSent marks a failure before the request reached the helper: nothing ran, so the
// caller may retry on a new connection. It always comes together with ErrConnLost.
var ErrNotSent = errors.New("request not sent")

// Client talks to one helper over one stream. It is safe for concurrent use.
type Client struct {
	w     *frameWriter
	close func() error
	hello Hello
	// beatDone is closed when the heartbeat goroutine has stopped (at once without one).
	beatDone chan struct{}

	mu      sync.Mutex
	nextID  uint32              // guarded by mu
	pending map[uint32]*pending // guarded by mu
	err     error               // guarded by mu; set once the read loop ends
	done    chan struct{}

	env map[string]Bytes // SetEnv; read-only once the client is in use
}

// SetEnv gives every command this client starts (run, terminal, job) the variables in env as
// per-command variables, which the request's own win over: values that live as long as this
// connection, such as the port of a proxy the process holding it serves (the session's saved
// environment would otherwise keep an earlier connection's). Call it before using the client.
func (c *Client) SetEnv(env map[string]string) { c.env = toBytesMap(env) }

// withEnv is req with SetEnv's variables added.
func (c *Client) withEnv(req RunRequest) RunRequest {
	if len(c.env) == 0 {
		return req
	}
	out := make(map[string]Bytes, len(c.env)+len(req.Env))
	maps.Copy(out, c.env)
	maps.Copy(out, req.Env)
	req.Env = out
	return req
}

type pending struct {
	stdout, stderr io.Writer // runs
	data           io.Writer // read_file
	result         chan frame
	dataErr        error
	// queue carries the call's frames from the read loop to its own deliverer, so a caller
	// that reads its output slowly holds up only its own call: the read loop waits for a
	// call only when that call has deliverQueue frames waiting. gone ends the deliverer
	// when the caller gave up.
	queue chan frame
	gone  chan struct{}
	once  sync.Once
}

// deliverQueue bounds the frames (up to 32 KiB each) waiting for one call's writers.
const deliverQueue = 256

// deliver writes the call's output in order and hands over its final frame; when the
// stream ends first, it closes result.
func (p *pending) deliver() {
	for {
		var f frame
		var ok bool
		select {
		case f, ok = <-p.queue:
		case <-p.gone:
			return
		}
		if !ok {
			close(p.result)
			return
		}
		select {
		case <-p.gone: // the caller left: write nothing more for it
			return
		default:
		}
		switch f.typ {
		case tStdout:
			if p.stdout != nil {
				p.stdout.Write(f.payload)
			}
		case tStderr:
			if p.stderr != nil {
				p.stderr.Write(f.payload)
			}
		case tData:
			if p.data != nil && p.dataErr == nil {
				_, p.dataErr = p.data.Write(f.payload)
			}
		case tExit, tReply, tError:
			p.result <- f
			return
		}
	}
}

// leave tells the deliverer that the caller is gone.
func (p *pending) leave() { p.once.Do(func() { close(p.gone) }) }

// NewClient waits for the helper's greeting on r (skipping any banner a remote shell printed
// first) and starts reading. closeFn closes the stream; Close calls it.
func NewClient(ctx context.Context, r io.Reader, w io.Writer, closeFn func() error) (*Client, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	type helloResult struct {
		h   Hello
		err error
	}
	ch := make(chan helloResult, 1)
	go func() {
		skipped, err := skipToMagic(br)
		if err != nil {
			msg := strings.TrimSpace(string(skipped))
			if msg != "" {
				err = fmt.Errorf("helper did not start; it printed: %q: %w", truncate(msg, 500), ErrConnLost)
			} else {
				err = fmt.Errorf("helper did not start: %v: %w", err, ErrConnLost)
			}
			ch <- helloResult{err: err}
			return
		}
		f, err := readFrame(br)
		if err != nil {
			ch <- helloResult{err: fmt.Errorf("read helper greeting: %v: %w", err, ErrConnLost)}
			return
		}
		var h Hello
		if f.typ != tHello || json.Unmarshal(f.payload, &h) != nil {
			ch <- helloResult{err: fmt.Errorf("helper sent %q instead of a greeting: %w", f.typ, ErrConnLost)}
			return
		}
		if h.Version != Version {
			ch <- helloResult{err: fmt.Errorf("helper speaks protocol %d, this client %d: update the helper binary", h.Version, Version)}
			return
		}
		ch <- helloResult{h: h}
	}()
	var res helloResult
	select {
	case res = <-ch:
	case <-ctx.Done():
		if closeFn != nil {
			closeFn()
		}
		return nil, fmt.Errorf("wait for sandbox helper: %w", ctx.Err())
	}
	if res.err != nil {
		if closeFn != nil {
			closeFn()
		}
		return nil, res.err
	}
	c := &Client{w: newFrameWriter(w), close: closeFn, hello: res.h, pending: map[uint32]*pending{}, done: make(chan struct{})}
	go c.readLoop(br)
	c.beatDone = make(chan struct{})
	if res.h.Beats {
		go c.beat()
	} else {
		close(c.beatDone)
	}
	return c, nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// beat tells the helper this client is alive, every BeatEvery until the stream ends: a
// client that dies stops, and the helper then ends its foreground commands even where the
// stream outlives it.
func (c *Client) beat() {
	defer close(c.beatDone)
	payload, _ := json.Marshal(Beat{TimeoutMS: BeatTimeout.Milliseconds()})
	t := time.NewTicker(BeatEvery)
	defer t.Stop()
	for {
		if c.w.write(tBeat, 0, payload) != nil {
			return
		}
		select {
		case <-c.done:
			return
		case <-t.C:
		}
	}
}

// Hello returns the helper's greeting.
func (c *Client) Hello() Hello { return c.hello }

// Done is closed when the stream has ended.
func (c *Client) Done() <-chan struct{} { return c.done }

// Err returns why the stream ended, or nil while it is up.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close ends the stream and waits for the reader to stop. Running commands are killed by the
// helper when it sees the stream end.
func (c *Client) Close() error {
	var err error
	if c.close != nil {
		err = c.close()
	}
	<-c.done
	<-c.beatDone
	return err
}

func (c *Client) readLoop(br *bufio.Reader) {
	var err error
	for {
		var f frame
		f, err = readFrame(br)
		if err != nil {
			break
		}
		c.mu.Lock()
		p := c.pending[f.id]
		c.mu.Unlock()
		if p == nil {
			continue
		}
		switch f.typ {
		case tStdout, tStderr, tData:
		case tExit, tReply, tError:
			c.mu.Lock()
			delete(c.pending, f.id)
			c.mu.Unlock()
		default:
			continue
		}
		select {
		case p.queue <- f:
		case <-p.gone:
		}
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		err = ErrConnLost
	} else {
		err = fmt.Errorf("%w: %v", ErrConnLost, err)
	}
	c.mu.Lock()
	c.err = err
	for id, p := range c.pending {
		delete(c.pending, id)
		close(p.queue) // the deliverer writes what is queued, then closes result
	}
	c.mu.Unlock()
	close(c.done)
}

func (c *Client) register(p *pending) (uint32, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return 0, c.err
	}
	c.nextID++
	p.result = make(chan frame, 1)
	p.queue = make(chan frame, deliverQueue)
	p.gone = make(chan struct{})
	c.pending[c.nextID] = p
	go p.deliver()
	return c.nextID, nil
}

// unregister forgets call id, whose caller p gives up: its deliverer writes nothing more
// (p, not the map, says whom: the read loop may already have removed it).
func (c *Client) unregister(id uint32, p *pending) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
	p.leave()
}

func (c *Client) sendJSON(typ frameType, id uint32, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if err := c.w.write(typ, id, b); err != nil {
		return fmt.Errorf("%w: %v", ErrConnLost, err)
	}
	return nil
}

// killGrace is how long a killed command may take to report its exit before the helper is
// declared unresponsive.
const killGrace = 10 * time.Second

// Run runs a command and streams its output to stdout and stderr (which may be nil). When ctx
// ends first, the helper kills the command's whole process tree; the exit then says
// Interrupted (or TimedOut for a deadline).
func (c *Client) Run(ctx context.Context, req RunRequest, stdin io.Reader, stdout, stderr io.Writer) (ExitInfo, error) {
	return c.run(ctx, req, stdin, stdout, stderr, nil)
}

// WinSize is a terminal size.
type WinSize struct{ Rows, Cols uint16 }

// RunTTY runs an interactive shell on a pseudo-terminal (req.TTY is set for you). Sizes sent
// on resize are passed to the terminal.
func (c *Client) RunTTY(ctx context.Context, req RunRequest, stdin io.Reader, stdout io.Writer, resize <-chan WinSize) (ExitInfo, error) {
	req.TTY = true
	return c.run(ctx, req, stdin, stdout, nil, resize)
}

func (c *Client) run(ctx context.Context, req RunRequest, stdin io.Reader, stdout, stderr io.Writer, resize <-chan WinSize) (ExitInfo, error) {
	req = c.withEnv(req)
	req.Stdin = stdin != nil
	p := &pending{stdout: stdout, stderr: stderr}
	id, err := c.register(p)
	if err != nil {
		return ExitInfo{}, errors.Join(ErrNotSent, err)
	}
	if err := c.sendJSON(tRun, id, req); err != nil {
		c.unregister(id, p)
		return ExitInfo{}, errors.Join(ErrNotSent, err)
	}
	if stdin != nil {
		defer c.startStdin(id, stdin)()
	}
	var f frame
	var ok bool
	for resize != nil {
		select {
		case ws, more := <-resize:
			if !more {
				resize = nil
				continue
			}
			_ = c.sendJSON(tSignal, id, SignalRequest{Reason: reasonResize, Rows: ws.Rows, Cols: ws.Cols})
			continue
		case f, ok = <-p.result:
			if !ok {
				return ExitInfo{}, c.Err()
			}
			return decodeExit(f)
		case <-ctx.Done():
		}
		break
	}
	select {
	case f, ok = <-p.result:
	case <-ctx.Done():
		reason := reasonInterrupt
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			reason = reasonTimeout
		}
		_ = c.sendJSON(tSignal, id, SignalRequest{Reason: reason})
		t := time.NewTimer(killGrace)
		defer t.Stop()
		select {
		case f, ok = <-p.result:
		case <-t.C:
			c.unregister(id, p)
			return ExitInfo{}, fmt.Errorf("the sandbox helper did not confirm the kill within %s: %w", killGrace, ErrConnLost)
		}
	}
	if !ok {
		return ExitInfo{}, c.Err()
	}
	return decodeExit(f)
}

func decodeExit(f frame) (ExitInfo, error) {
	if f.typ == tError {
		return ExitInfo{}, decodeRemoteError(f.payload)
	}
	var ex ExitInfo
	if err := json.Unmarshal(f.payload, &ex); err != nil {
		return ExitInfo{}, fmt.Errorf("bad exit message from helper: %w", err)
	}
	return ex, nil
}

func decodeRemoteError(b []byte) error {
	var re RemoteError
	if err := json.Unmarshal(b, &re); err != nil {
		return fmt.Errorf("bad error message from helper: %s", b)
	}
	return &re
}

// startStdin pumps r to the command id until the returned stop is called. stop ends the
// pump before it returns when r takes deadlines (a pipe, a socket): the pending read is woken,
// so nothing more is taken from the caller's stdin once the command is over, and the
// deadline is lifted again. Other readers end the pump at their next byte or EOF.
func (c *Client) startStdin(id uint32, r io.Reader) (stop func()) {
	stopCh := make(chan struct{})
	out := make(chan struct{})
	go func() {
		defer close(out)
		c.pumpStdin(id, r, stopCh)
	}()
	return func() {
		close(stopCh)
		d, ok := r.(interface{ SetReadDeadline(time.Time) error })
		if !ok || d.SetReadDeadline(time.Now()) != nil {
			return
		}
		<-out
		d.SetReadDeadline(time.Time{})
	}
}

func (c *Client) pumpStdin(id uint32, r io.Reader, stop <-chan struct{}) {
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		select {
		case <-stop:
			return
		default:
		}
		if n > 0 {
			if c.w.write(tStdin, id, buf[:n]) != nil {
				return
			}
		}
		if err != nil {
			_ = c.w.write(tEOF, id, nil)
			return
		}
	}
}

// Call performs a non-streaming operation and decodes its reply into out (may be nil). For
// read_file, data receives the bytes; for write_file, upload is sent as the content.
func (c *Client) Call(ctx context.Context, req CallRequest, out any, data io.Writer, upload io.Reader) error {
	if req.Run != nil {
		run := c.withEnv(*req.Run)
		req.Run = &run
	}
	p := &pending{data: data}
	id, err := c.register(p)
	if err != nil {
		return errors.Join(ErrNotSent, err)
	}
	if err := c.sendJSON(tCall, id, req); err != nil {
		c.unregister(id, p)
		return errors.Join(ErrNotSent, err)
	}
	if upload != nil {
		buf := make([]byte, 256<<10)
		for {
			n, rerr := upload.Read(buf)
			if n > 0 {
				if err := c.w.write(tData, id, buf[:n]); err != nil {
					c.unregister(id, p)
					return fmt.Errorf("%w: %v", ErrConnLost, err)
				}
			}
			if rerr == io.EOF {
				break
			}
			if rerr != nil {
				_ = c.w.write(tEOF, id, nil) // the helper still answers; we report our error
				<-p.result
				return rerr
			}
		}
		if err := c.w.write(tEOF, id, nil); err != nil {
			c.unregister(id, p)
			return fmt.Errorf("%w: %v", ErrConnLost, err)
		}
	}
	var f frame
	var ok bool
	select {
	case f, ok = <-p.result:
	case <-ctx.Done():
		c.unregister(id, p)
		return ctx.Err()
	}
	if !ok {
		return c.Err()
	}
	if f.typ == tError {
		return decodeRemoteError(f.payload)
	}
	if p.dataErr != nil {
		return p.dataErr
	}
	if out != nil {
		return json.Unmarshal(f.payload, out)
	}
	return nil
}

// SeedEnv sends passed-through variables to the helper (see seed_env).
func (c *Client) SeedEnv(ctx context.Context, env map[string]string) error {
	if len(env) == 0 {
		return nil
	}
	return c.Call(ctx, CallRequest{Op: opSeedEnv, Env: toBytesMap(env)}, nil, nil, nil)
}
