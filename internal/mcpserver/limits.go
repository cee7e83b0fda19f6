package mcpserver

import (
	"encoding/json"
	"fmt"
	"math"
	"sync"
	"time"
)

// ToolNames are the server's tools, for a key's --tools scope.
var ToolNames = []string{toolProcess, toolReadFile, toolInfo, toolTerminal, toolWriteFile}

// QuotaError is a call or a session refused because its key is at a limit. It names the limit
// and when it resets, so a client (or its model) can wait instead of retrying blindly.
type QuotaError struct {
	Key   string
	Limit string // "max_sessions", "max_concurrent", "rate"
	Value int
	// RetryAfter is how long until the limit lets one more through (at least a second).
	RetryAfter time.Duration
	Reset      string // what frees the limit, in words
}

func (e *QuotaError) Error() string {
	return fmt.Sprintf("key %q is at its %s limit (%d): %s; retry in %ds",
		e.Key, e.Limit, e.Value, e.Reset, e.retrySeconds())
}

// data is the JSON-RPC error data of a refusal: limit, value, retry_after_seconds, reset.
func (e *QuotaError) data() json.RawMessage {
	data, _ := json.Marshal(map[string]any{"limit": e.Limit, "value": e.Value,
		"retry_after_seconds": e.retrySeconds(), "reset": e.Reset})
	return data
}

func (e *QuotaError) retrySeconds() int {
	return max(1, int(math.Ceil(e.RetryAfter.Seconds())))
}

// keyLimits is the live state of one key's limits. Each key has its own, with its own lock,
// so a key at its limit never waits on another's.
type keyLimits struct {
	mu       sync.Mutex
	running  int       // tool calls in flight; guarded by mu
	tokens   float64   // rate bucket; guarded by mu
	refilled time.Time // guarded by mu
}

// limiter holds every key's limit state.
type limiter struct {
	mu   sync.Mutex
	keys map[string]*keyLimits
}

func (l *limiter) of(name string) *keyLimits {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.keys == nil {
		l.keys = map[string]*keyLimits{}
	}
	kl, ok := l.keys[name]
	if !ok {
		kl = &keyLimits{}
		l.keys[name] = kl
	}
	return kl
}

// startCall admits one tool call of k, or says which limit refuses it. done must be called
// when an admitted call ends.
func (l *limiter) startCall(k *Key, now time.Time) (done func(), err *QuotaError) {
	kl := l.of(k.Name)
	kl.mu.Lock()
	defer kl.mu.Unlock()
	if k.MaxConcurrent > 0 && kl.running >= k.MaxConcurrent {
		return nil, &QuotaError{Key: k.Name, Limit: "max_concurrent", Value: k.MaxConcurrent, RetryAfter: time.Second,
			Reset: "it frees when one of the key's running commands ends"}
	}
	if r := k.RatePerMinute; r > 0 {
		// A token bucket of r calls that refills at r per minute: a burst of r, then r/min.
		per := time.Minute / time.Duration(r)
		if kl.refilled.IsZero() {
			kl.tokens, kl.refilled = float64(r), now
		}
		kl.tokens = min(float64(r), kl.tokens+float64(now.Sub(kl.refilled))/float64(per))
		kl.refilled = now
		if kl.tokens < 1 {
			wait := time.Duration((1 - kl.tokens) * float64(per))
			return nil, &QuotaError{Key: k.Name, Limit: "rate", Value: r, RetryAfter: wait,
				Reset: fmt.Sprintf("%d calls a minute; the next is allowed at %s", r, now.Add(wait).UTC().Format(time.RFC3339))}
		}
		kl.tokens--
	}
	kl.running++
	return func() {
		kl.mu.Lock()
		kl.running--
		kl.mu.Unlock()
	}, nil
}
