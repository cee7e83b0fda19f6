//go:build unix

package vercel

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// TestClientRetries: reads are retried on 429 (after Retry-After) and 5xx; a command start
// is not retried on a 5xx, since it may have run.
func TestClientRetries(t *testing.T) {
	var gets, cmds atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("teamId") != "tm" || r.Header.Get("Authorization") != "Bearer tok" {
			apiError(w, http.StatusForbidden, "forbidden", "no")
			return
		}
		switch r.URL.Path {
		case "/api/v2/sandboxes/sessions/s1":
			switch gets.Add(1) {
			case 1:
				w.Header().Set("Retry-After", "0")
				apiError(w, http.StatusTooManyRequests, "rate_limited", "slow down")
			case 2:
				apiError(w, http.StatusServiceUnavailable, "unavailable", "try again")
			default:
				reply(w, map[string]any{"session": map[string]any{"id": "s1", "status": "running", "timeout": 1000}, "routes": []any{}})
			}
		case "/api/v2/sandboxes/sessions/s1/cmd":
			cmds.Add(1)
			apiError(w, http.StatusBadGateway, "bad_gateway", "upstream")
		default:
			apiError(w, http.StatusNotFound, "not_found", r.URL.Path)
		}
	}))
	defer srv.Close()
	c, err := NewClient(srv.URL+"/api", "tok", "tm", "p", nil)
	if err != nil {
		t.Fatal(err)
	}
	c.backoff = time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	vm, err := c.GetSession(ctx, "s1")
	if err != nil || vm.Status != StatusRunning || gets.Load() != 3 {
		t.Errorf("GetSession() = %+v, %v after %d requests; want running after 3", vm, err, gets.Load())
	}
	_, err = c.RunCommand(ctx, "s1", RunCommandRequest{Command: "true"}, nil, nil, nil)
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusBadGateway || cmds.Load() != 1 {
		t.Errorf("RunCommand() = %v after %d requests; want the 502, sent once", err, cmds.Load())
	}
}
