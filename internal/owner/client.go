package owner

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrNoOwner means no owner took the call and nothing ran: run it in this process.
var ErrNoOwner = errors.New("owner: no owner took the call")

// ExitLost is Forward's code when the owner went away or broke the protocol during a call:
// sandbox.ExitRunnerFailed, which a command's own exit status never is by our choice. It is
// written out rather than imported because package early runs Forward before the binary's
// heavy initialisation, and sandbox compiles patterns at init; a CLI test checks the two agree.
const ExitLost = 125

// Forward hands a call to the owner listening at sock and returns the exit code the owner
// sends back. An error that wraps ErrNoOwner means the call did not run (no owner there, or
// it declined); any other error means the owner went away while the call ran, and the code
// is then ExitLost.
func Forward(sock string, h Hello, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	conn, err := Dial(sock)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrNoOwner, err)
	}
	defer conn.Close()
	if !peerIsOwner(conn) {
		// Not an owner of this user's running this binary: it gets nothing, not even the
		// environment.
		return 0, fmt.Errorf("%w: %s is not served by an owner of this user and binary", ErrNoOwner, sock)
	}
	c := &client{conn: conn, stdin: stdin}
	if err := c.send(FrameHello, EncodeHello(h)); err != nil {
		return 0, fmt.Errorf("%w: %v", ErrNoOwner, err)
	}

	if stdinIsDevNull(stdin) {
		// Nothing to read: say so now, and the owner never has to ask for it.
		c.pumped.Do(func() {})
		_ = c.send(FrameStdinEOF, nil)
	}

	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	stopSigs := make(chan struct{})
	defer close(stopSigs)
	go func() {
		for {
			select {
			case <-stopSigs:
				return
			case s := <-sigs:
				_ = c.send(FrameSignal, []byte{byte(s.(syscall.Signal))})
			}
		}
	}()

	started := false
	for {
		typ, p, err := ReadFrame(conn)
		if err != nil {
			if !started {
				return 0, fmt.Errorf("%w: the owner closed the connection: %v", ErrNoOwner, err)
			}
			return ExitLost, fmt.Errorf("the session owner went away before the command finished (%v); the command was stopped with it", err)
		}
		switch typ {
		case FrameStdout:
			_, _ = stdout.Write(p)
		case FrameStderr:
			_, _ = stderr.Write(p)
		case FrameStarted:
			started = true
		case FrameWantStdin:
			if len(p) != 4 {
				return ExitLost, errors.New("owner: malformed stdin request")
			}
			c.pumpStdin(int64(binary.BigEndian.Uint32(p)))
		case FrameTTYPrompt:
			if len(p) < 4 {
				return ExitLost, errors.New("owner: malformed prompt")
			}
			c.prompt(binary.BigEndian.Uint32(p), p[4:])
		case FrameFallback:
			if started {
				return ExitLost, fmt.Errorf("the session owner declined a call it had started: %s", p)
			}
			return 0, fmt.Errorf("%w: %s", ErrNoOwner, p)
		case FrameExit:
			if len(p) != 4 {
				return ExitLost, errors.New("owner: malformed exit frame")
			}
			return int(int32(binary.BigEndian.Uint32(p))), nil
		default:
			return ExitLost, fmt.Errorf("owner: unexpected frame %q", typ)
		}
	}
}

type client struct {
	conn  *os.File
	stdin io.Reader

	mu sync.Mutex // serialises frames

	// credit is how many more bytes of input the owner has room for (FrameWantStdin grants
	// it), so the owner's reader never has to wait for the command to read.
	creditMu sync.Mutex
	credit   int64 // guarded by creditMu
	creditC  *sync.Cond
	pumped   sync.Once

	// The terminal's lines go to the prompt shown last (promptID), read by one reader.
	promptMu  sync.Mutex
	promptID  uint32 // guarded by promptMu
	ttyOnce   sync.Once
	ttyWriter *os.File
	reading   bool // guarded by promptMu; a line is being read for the prompt shown last
}

func (c *client) send(typ byte, p []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return WriteFrame(c.conn, typ, p)
}

// pumpStdin adds n bytes of credit and, the first time, starts copying standard input to the
// owner: a command that never reads its input never makes this process read it.
func (c *client) pumpStdin(n int64) {
	c.creditMu.Lock()
	if c.creditC == nil {
		c.creditC = sync.NewCond(&c.creditMu)
	}
	c.credit += n
	c.creditC.Broadcast()
	c.creditMu.Unlock()
	c.pumped.Do(func() {
		go func() {
			if c.stdin == nil {
				_ = c.send(FrameStdinEOF, nil)
				return
			}
			buf := make([]byte, 32<<10)
			for {
				c.creditMu.Lock()
				for c.credit <= 0 {
					c.creditC.Wait()
				}
				room := min(c.credit, int64(len(buf)))
				c.creditMu.Unlock()
				n, err := c.stdin.Read(buf[:room])
				if n > 0 {
					c.creditMu.Lock()
					c.credit -= int64(n)
					c.creditMu.Unlock()
					if c.send(FrameStdin, buf[:n]) != nil {
						return
					}
				}
				if err != nil {
					_ = c.send(FrameStdinEOF, nil)
					return
				}
			}
		}()
	})
}

// prompt shows approval prompt id on this process's terminal; the next line typed there
// answers it (an answer to an earlier prompt that timed out is dropped by the owner). One line
// is read per answer, as an exec in its own process reads it: what is typed after it stays
// for whatever reads the terminal next.
func (c *client) prompt(id uint32, text []byte) {
	c.promptMu.Lock()
	c.promptID = id
	c.ttyOnce.Do(func() {
		if tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0); err == nil {
			c.ttyWriter = tty
		}
	})
	tty := c.ttyWriter
	start := tty != nil && !c.reading
	c.reading = c.reading || start
	c.promptMu.Unlock()
	if tty == nil {
		c.answer(nil) // no terminal: an empty answer, which denies
		return
	}
	_, _ = tty.Write(text)
	if !start {
		return // the line being read answers this prompt
	}
	go func() {
		var line []byte
		b := make([]byte, 1)
		for {
			n, err := tty.Read(b)
			if n == 1 && b[0] != '\n' {
				line = append(line, b[0])
				continue
			}
			if n == 1 || err != nil {
				break
			}
		}
		c.promptMu.Lock()
		c.reading = false
		c.promptMu.Unlock()
		c.answer(line)
	}()
}

func (c *client) answer(line []byte) {
	c.promptMu.Lock()
	id := c.promptID
	c.promptMu.Unlock()
	_ = c.send(FrameTTYAnswer, append(binary.BigEndian.AppendUint32(nil, id), line...))
}

// Forget tells every owner whose socket is in dir that a session of backend was removed
// (session "" = every session of it), so that none goes on serving it warm. Owners that do
// not answer within a second are skipped: a stuck owner must not stop a removal.
func Forget(dir, backend, session string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	var wg sync.WaitGroup
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".sock") {
			continue
		}
		wg.Add(1)
		go func(sock string) {
			defer wg.Done()
			c, err := Dial(sock)
			if err != nil {
				return
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(time.Second))
			if WriteFrame(c, FrameForget, EncodeForget(backend, session)) == nil {
				_, _, _ = ReadFrame(c)
			}
		}(path.Join(dir, e.Name()))
	}
	wg.Wait()
}
