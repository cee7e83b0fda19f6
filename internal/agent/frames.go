package agent

import (
	"bufio"
	"encoding/json"
	"io"
)

// Frame is one message of the helper's framed protocol, exported for other local streams
// that reuse the framing (the session owner's socket, internal/channel).
type Frame struct {
	Type    byte
	ID      uint32
	Payload []byte
}

// FrameWriter writes frames from many goroutines onto one stream.
type FrameWriter struct{ fw *frameWriter }

// NewFrameWriter returns a FrameWriter on w.
func NewFrameWriter(w io.Writer) *FrameWriter { return &FrameWriter{newFrameWriter(w)} }

// Write sends one frame (split when larger than the frame limit).
func (w *FrameWriter) Write(typ byte, id uint32, payload []byte) error {
	return w.fw.write(frameType(typ), id, payload)
}

// WriteJSON sends v as one JSON frame.
func (w *FrameWriter) WriteJSON(typ byte, id uint32, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return w.fw.write(frameType(typ), id, b)
}

// ReadFrame reads one frame.
func ReadFrame(r *bufio.Reader) (Frame, error) {
	f, err := readFrame(r)
	return Frame{Type: byte(f.typ), ID: f.id, Payload: f.payload}, err
}
