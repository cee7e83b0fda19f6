package mux

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"io"
	"sync"
	"testing"
	"time"
)

// pair returns two connected sessions, running; they end with the test.
func pair(t *testing.T) (opener, acceptor *Session) {
	t.Helper()
	ar, bw := io.Pipe()
	br, aw := io.Pipe()
	opener = New(ar, aw, aw)
	acceptor = New(br, bw, bw)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); opener.Run() }()
	go func() { defer wg.Done(); acceptor.Run() }()
	t.Cleanup(func() {
		opener.Close()
		acceptor.Close()
		ar.Close()
		br.Close()
		wg.Wait()
	})
	return opener, acceptor
}

func TestStreamsBothWays(t *testing.T) {
	o, a := pair(t)
	const n = 8
	data := make([]byte, 3*Window+12345) // several windows: flow control must refill
	rand.Read(data)
	var wg sync.WaitGroup
	// The acceptor echoes every stream.
	go func() {
		for {
			st, err := a.Accept()
			if err != nil {
				return
			}
			go func() {
				io.Copy(st, st)
				st.CloseWrite()
			}()
		}
	}()
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := o.Open()
			if err != nil {
				t.Error(err)
				return
			}
			defer st.Close()
			go func() {
				st.Write(data)
				st.CloseWrite()
			}()
			got, err := io.ReadAll(st)
			if err != nil || !bytes.Equal(got, data) {
				t.Errorf("echo: %d bytes, err %v; want %d bytes back intact", len(got), err, len(data))
			}
		}()
	}
	wg.Wait()
}

// TestSlowReaderStallsOnlyItsStream: a stream nobody reads does not block the others.
func TestSlowReaderStallsOnlyItsStream(t *testing.T) {
	o, a := pair(t)
	stuck, _ := o.Open()
	go stuck.Write(make([]byte, 4*Window)) // never read: fills its window, then waits
	s1, _ := a.Accept()
	_ = s1
	st, _ := o.Open()
	s2, err := a.Accept()
	if err != nil {
		t.Fatal(err)
	}
	go func() { st.Write([]byte("hello")); st.CloseWrite() }()
	done := make(chan []byte)
	go func() { b, _ := io.ReadAll(s2); done <- b }()
	select {
	case b := <-done:
		if string(b) != "hello" {
			t.Errorf("read %q; want hello", b)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a stalled stream blocked another")
	}
}

// TestOverrunResets: a peer that sends past the window has its stream reset, and the
// session goes on.
func TestOverrunResets(t *testing.T) {
	br, w := io.Pipe()
	drain, bw := io.Pipe()
	go io.Copy(io.Discard, drain)
	s := New(br, bw, nil)
	done := make(chan error, 1)
	go func() { done <- s.Run() }()
	frame := func(typ byte, id uint32, p []byte) {
		h := make([]byte, headerLen)
		h[0] = typ
		binary.BigEndian.PutUint32(h[1:5], id)
		binary.BigEndian.PutUint32(h[5:9], uint32(len(p)))
		w.Write(append(h, p...))
	}
	go func() {
		frame(fOpen, 1, nil)
		for i := 0; i < Window/maxPayload+2; i++ {
			frame(fData, 1, make([]byte, maxPayload))
		}
		frame(fOpen, 2, nil)
	}()
	st, err := s.Accept()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Accept(); err != nil {
		t.Fatalf("the session ended after an overrun: %v", err)
	}
	_, err = io.ReadAll(st)
	if !errors.Is(err, ErrReset) && !errors.Is(err, ErrClosed) {
		t.Errorf("reading an overrun stream: %v; want a reset", err)
	}
	// An oversized frame ends the session.
	go frame(fData, 2, make([]byte, maxPayload+1))
	select {
	case err := <-done:
		if err == nil {
			t.Error("Run() = nil after an oversized frame")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("an oversized frame did not end the session")
	}
	w.Close()
}
