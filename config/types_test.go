package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want Size
	}{
		{"1024", 1024},
		{"0", 0},
		{"256k", 256 * Kibibyte},
		{"512m", 512 * Mebibyte},
		{"512M", 512 * Mebibyte},
		{"512MiB", 512 * Mebibyte},
		{"512MB", 512 * Mebibyte},
		{"512mb", 512 * Mebibyte},
		{"1g", Gibibyte},
		{"1.5g", 1536 * Mebibyte},
		{"2t", 2 * Tebibyte},
		{" 64 m ", 64 * Mebibyte},
		{"10b", 10},
		{"0.5k", 512},
	}
	for _, tt := range tests {
		got, err := ParseSize(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseSize(%q) = %v, %v; want %v", tt.in, int64(got), err, int64(tt.want))
		}
	}
}

func TestParseSizeErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", "empty"},
		{"-1m", "negative"},
		{"lots", "want a number"},
		{"12x", "want a number"},
		{"1.2.3m", "want a number"},
		{"0.3", "whole number"},
		{"m", "want a number"},
		{"99999999999t", "too large"},
	}
	for _, tt := range tests {
		_, err := ParseSize(tt.in)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseSize(%q) = %v; want error containing %q", tt.in, err, tt.want)
		}
	}
}

func TestSizeString(t *testing.T) {
	tests := []struct {
		in   Size
		want string
	}{
		{0, "0"},
		{1000, "1000"},
		{1024, "1k"},
		{512 * Mebibyte, "512m"},
		{1536 * Mebibyte, "1536m"},
		{Gibibyte, "1g"},
		{3 * Tebibyte, "3t"},
	}
	for _, tt := range tests {
		if got := tt.in.String(); got != tt.want {
			t.Errorf("Size(%d).String() = %q; want %q", int64(tt.in), got, tt.want)
		}
		back, err := ParseSize(tt.want)
		if err != nil || back != tt.in {
			t.Errorf("ParseSize(%q) = %v, %v; want %d", tt.want, int64(back), err, int64(tt.in))
		}
	}
}

func TestParseDuration(t *testing.T) {
	tests := []struct {
		in      string
		want    time.Duration
		wantErr string
	}{
		{"30s", 30 * time.Second, ""},
		{"15m", 15 * time.Minute, ""},
		{"1h30m", 90 * time.Minute, ""},
		{"0", 0, ""},
		{"180", 0, "add a unit, e.g. 180s"},
		{"1.5", 0, "add a unit"},
		{"1d", 0, "want a number with a unit"},
		{"soon", 0, "want a number with a unit"},
	}
	for _, tt := range tests {
		got, err := ParseDuration(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseDuration(%q) = %v, %v; want error containing %q", tt.in, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

func TestFormatDuration(t *testing.T) {
	tests := []struct {
		in   time.Duration
		want string
	}{
		{180 * time.Second, "3m"},
		{90 * time.Minute, "1h30m"},
		{time.Hour, "1h"},
		{10 * time.Second, "10s"},
		{1500 * time.Millisecond, "1.5s"},
		{0, "0s"},
	}
	for _, tt := range tests {
		if got := FormatDuration(tt.in); got != tt.want {
			t.Errorf("FormatDuration(%v) = %q; want %q", tt.in, got, tt.want)
		}
	}
}

func TestSecretMasked(t *testing.T) {
	s := Secret("hunter2")
	for _, verb := range []string{"%v", "%s", "%q", "%#v", "%x", "%+v", "%d"} {
		if got := fmt.Sprintf(verb, s); got != "***" {
			t.Errorf("Sprintf(%q, secret) = %q; want ***", verb, got)
		}
	}
	if got := fmt.Sprint(struct{ S Secret }{s}); strings.Contains(got, "hunter2") {
		t.Errorf("Sprint(struct) = %q; leaks the secret", got)
	}
	b, err := json.Marshal(map[string]Secret{"k": s})
	if err != nil || string(b) != `{"k":"***"}` {
		t.Errorf("json.Marshal(secret) = %s, %v; want {\"k\":\"***\"}", b, err)
	}
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("x", "token", s)
	if strings.Contains(buf.String(), "hunter2") || !strings.Contains(buf.String(), "token=***") {
		t.Errorf("slog output = %q; want token=*** without the secret", buf.String())
	}
	if got := s.Reveal(); got != "hunter2" {
		t.Errorf("Reveal() = %q; want hunter2", got)
	}
	if got := Secret("").String(); got != "" {
		t.Errorf("Secret(\"\").String() = %q; want empty", got)
	}
}

func TestEnums(t *testing.T) {
	tests := []struct {
		name    string
		parse   func(string) (string, error)
		in      string
		want    string
		wantErr string
	}{
		{"backend", wrap(ParseBackend), "docker", "docker", ""},
		{"backend", wrap(ParseBackend), "Docker", "docker", ""},
		{"backend", wrap(ParseBackend), "dockr", "", `did you mean "docker"`},
		{"backend", wrap(ParseBackend), "kubernetess", "", "want one of auto, local, docker"},
		{"shell", wrap(ParseShell), "bash", "bash", ""},
		{"shell", wrap(ParseShell), "/usr/bin/zsh", "/usr/bin/zsh", ""},
		{"shell", wrap(ParseShell), "zsh", "", "absolute path"},
		{"hostkey", wrap(ParseHostKeyPolicy), "accept-new", "accept-new", ""},
		{"hostkey", wrap(ParseHostKeyPolicy), "yes", "yes", ""},
		{"hostkey", wrap(ParseHostKeyPolicy), "no", "", "not supported; use accept-new"},
		{"approval", wrap(ParseApprovalMode), "deny", "deny", ""},
		{"approval", wrap(ParseApprovalMode), "auto", "", "want one of manual, deny, off"},
		{"audit", wrap(ParseAuditLevel), "commands", "commands", ""},
		{"audit", wrap(ParseAuditLevel), "verbose", "", "want one of full, commands, off"},
	}
	for _, tt := range tests {
		got, err := tt.parse(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Parse %s(%q) = %q, %v; want error containing %q", tt.name, tt.in, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("Parse %s(%q) = %q, %v; want %q", tt.name, tt.in, got, err, tt.want)
		}
	}
}

func wrap[T ~string](f func(string) (T, error)) func(string) (string, error) {
	return func(s string) (string, error) { v, err := f(s); return string(v), err }
}

func TestExpandHome(t *testing.T) {
	t.Setenv("HOME", "/home/u")
	tests := []struct{ in, want string }{
		{"~", "/home/u"},
		{"~/.ssh/id_ed25519", "/home/u/.ssh/id_ed25519"},
		{"/abs", "/abs"},
		{"rel/~", "rel/~"},
		{"~other/x", "~other/x"},
	}
	for _, tt := range tests {
		if got, err := ExpandHome(tt.in); err != nil || got != tt.want {
			t.Errorf("ExpandHome(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestSuggest(t *testing.T) {
	names := []string{"network_enabled", "memory_limit", "image"}
	tests := []struct{ in, want string }{
		{"netwrk_enabled", "network_enabled"},
		{"memory_limt", "memory_limit"},
		{"imag", "image"},
		{"Image", "image"},
		{"totally_unrelated", ""},
	}
	for _, tt := range tests {
		if got := suggest(tt.in, names); got != tt.want {
			t.Errorf("suggest(%q) = %q; want %q", tt.in, got, tt.want)
		}
	}
}
