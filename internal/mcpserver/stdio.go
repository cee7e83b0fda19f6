package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// LineTransport is a newline-delimited JSON-RPC transport (MCP's stdio) that survives bad
// input: a line that is not JSON, holds a NUL byte, or is not JSON-RPC 2.0 is answered with
// a JSON-RPC error (-32700 parse error, -32600 invalid request) and the session goes on. The
// SDK's own IOTransport ends the session at such a line, and with it every sandbox of the
// session.
type LineTransport struct {
	Reader io.ReadCloser
	Writer io.WriteCloser
}

// maxLine bounds one message (a write_file of a large file arrives as one line).
const maxLine = 64 << 20

// Connect implements mcp.Transport.
func (t *LineTransport) Connect(context.Context) (mcp.Connection, error) {
	c := &lineConn{r: t.Reader, w: t.Writer, msgs: make(chan lineRead), closed: make(chan struct{})}
	go c.readLoop()
	return c, nil
}

type lineRead struct {
	msg jsonrpc.Message
	err error
}

type lineConn struct {
	r      io.ReadCloser
	w      io.WriteCloser
	wmu    sync.Mutex
	msgs   chan lineRead
	closed chan struct{}
	once   sync.Once
}

func (c *lineConn) readLoop() {
	br := bufio.NewReaderSize(c.r, 64<<10)
	for {
		line, err := readLine(br)
		if len(bytes.TrimSpace(line)) > 0 {
			msg, bad := decodeLine(line)
			if bad != nil {
				if werr := c.writeRaw(bad); werr != nil {
					c.deliver(lineRead{err: werr})
					return
				}
			} else if !c.deliver(lineRead{msg: msg}) {
				return
			}
		}
		if err != nil {
			c.deliver(lineRead{err: err})
			return
		}
	}
}

// readLine reads one line, or answers an over-long one with an error and skips it.
func readLine(br *bufio.Reader) ([]byte, error) {
	var buf []byte
	for {
		part, err := br.ReadSlice('\n')
		if len(buf)+len(part) <= maxLine {
			buf = append(buf, part...)
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return buf, err
		}
	}
}

func (c *lineConn) deliver(r lineRead) bool {
	select {
	case c.msgs <- r:
		return true
	case <-c.closed:
		return false
	}
}

// decodeLine decodes one message, or returns the error response to send instead.
func decodeLine(line []byte) (jsonrpc.Message, []byte) {
	errResp := func(id json.RawMessage, code int, msg string) []byte {
		if len(id) == 0 {
			id = json.RawMessage("null")
		}
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id,
			"error": map[string]any{"code": code, "message": msg}})
		return b
	}
	if bytes.IndexByte(line, 0) >= 0 {
		return nil, errResp(nil, jsonrpc.CodeParseError, "parse error: the line holds a NUL byte")
	}
	var head struct {
		JSONRPC *string         `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  json.RawMessage `json:"method"`
	}
	if err := json.Unmarshal(line, &head); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, errResp(nil, jsonrpc.CodeInvalidRequest, "invalid request: a message is one JSON-RPC 2.0 object")
		}
		return nil, errResp(nil, jsonrpc.CodeParseError, "parse error: "+err.Error())
	}
	if head.JSONRPC == nil || *head.JSONRPC != "2.0" {
		return nil, errResp(head.ID, jsonrpc.CodeInvalidRequest, `invalid request: "jsonrpc" must be "2.0"`)
	}
	msg, err := jsonrpc.DecodeMessage(line)
	if err != nil {
		return nil, errResp(head.ID, jsonrpc.CodeInvalidRequest, "invalid request: "+err.Error())
	}
	return msg, nil
}

func (c *lineConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case r := <-c.msgs:
		return r.msg, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.closed:
		return nil, io.EOF
	}
}

func (c *lineConn) Write(_ context.Context, msg jsonrpc.Message) error {
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return err
	}
	return c.writeRaw(data)
}

func (c *lineConn) writeRaw(data []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err := c.w.Write(append(data, '\n'))
	return err
}

func (c *lineConn) Close() error {
	var err error
	c.once.Do(func() {
		close(c.closed)
		err = errors.Join(c.r.Close(), c.w.Close())
	})
	return err
}

func (c *lineConn) SessionID() string { return "" }
