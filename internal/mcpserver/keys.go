package mcpserver

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/argon2"

	"github.com/hermes-sandbox/hermes-sandbox/internal/flock"
)

// KeysFileName is the file, beside the config file, that holds the MCP access keys' hashes.
const KeysFileName = "mcp-keys.json"

// keyPrefix starts every access key, so a leaked one is recognisable (secret scanners,
// logs) and cannot be mistaken for the admin token.
const keyPrefix = "hsk_"

// Argon2id parameters (RFC 9106's second recommended option, scaled down in memory: the
// keys are 256-bit random, not passwords, so the hash only has to make a stolen file
// useless, and the server verifies each key once and then caches it).
const (
	argonTime    = 2
	argonMemory  = 19 * 1024 // KiB
	argonThreads = 1
	argonLen     = 32
)

// AdminName is how the audit log, logs and metrics name the admin token's caller.
const AdminName = "admin"

// Approval scopes a key may carry (--approvals).
const (
	// KeyApprovalsAsk leaves dangerous commands to the server's approvals.mode.
	KeyApprovalsAsk = "ask"
	// KeyApprovalsDeny refuses every command that would need a person's approval.
	KeyApprovalsDeny = "deny"
)

var keyNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,62}$`)

// Key is one access key as stored: its scopes and limits, and an argon2id hash of the secret.
type Key struct {
	Name string `json:"name"`
	// ID is the key's public part: the key is hsk_<ID>_<secret>, so the server knows which
	// hash to check without trying every one.
	ID   string `json:"id"`
	Salt string `json:"salt"` // base64
	Hash string `json:"hash"` // base64 argon2id(secret, salt)

	// Backends and Tools scope the key; empty means all.
	Backends []string `json:"backends,omitempty"`
	Tools    []string `json:"tools,omitempty"`
	// Approvals is KeyApprovalsAsk (default) or KeyApprovalsDeny.
	Approvals string `json:"approvals,omitempty"`
	// Limits; 0 means none beyond the server's.
	MaxSessions   int `json:"max_sessions,omitempty"`
	MaxConcurrent int `json:"max_concurrent,omitempty"`
	RatePerMinute int `json:"rate_per_minute,omitempty"`

	Created time.Time `json:"created"`
	Expires time.Time `json:"expires,omitzero"`
}

// Expired reports whether k has expired at now.
func (k *Key) Expired(now time.Time) bool { return !k.Expires.IsZero() && !now.Before(k.Expires) }

// AllowsTool reports whether the key's tool scope includes tool.
func (k *Key) AllowsTool(tool string) bool {
	return len(k.Tools) == 0 || slices.Contains(k.Tools, tool)
}

// AllowsBackend reports whether the key's backend scope includes backend.
func (k *Key) AllowsBackend(backend string) bool {
	return len(k.Backends) == 0 || slices.Contains(k.Backends, backend)
}

// keysFile is the file's layout.
type keysFile struct {
	Keys []Key `json:"keys"`
}

// KeysPath is the keys file beside configPath.
func KeysPath(configPath string) string { return filepath.Join(filepath.Dir(configPath), KeysFileName) }

// lastUsePath is where the server records when each key was last used: a separate file, so
// the server never rewrites the keys file that `mcp keys add/revoke` edit.
func lastUsePath(keysPath string) string {
	return strings.TrimSuffix(keysPath, ".json") + ".lastuse.json"
}

// ValidateKeyName checks a key name: it appears in audit records, logs and metric labels.
func ValidateKeyName(name string) error {
	if name == AdminName {
		return fmt.Errorf("key name %q is reserved for the admin token ($%s)", name, TokenEnv)
	}
	if !keyNameRE.MatchString(name) {
		return fmt.Errorf("key name %q: use 1-63 lower-case letters, digits, '.', '_' or '-', starting with a letter or digit", name)
	}
	return nil
}

// ReadKeys reads the keys file; a missing file is no keys.
func ReadKeys(path string) ([]Key, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("mcp keys: %w", err)
	}
	var f keysFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("mcp keys: %s: %w", path, err)
	}
	return f.Keys, nil
}

// writeKeys replaces the keys file atomically with mode 0600.
func writeKeys(path string, keys []Key) error {
	data, err := json.MarshalIndent(keysFile{Keys: keys}, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(path, append(data, '\n'))
}

func writeFileAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("mcp keys: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".mcp-keys-*")
	if err != nil {
		return fmt.Errorf("mcp keys: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("mcp keys: %w", err)
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("mcp keys: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("mcp keys: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("mcp keys: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("mcp keys: %w", err)
	}
	return nil
}

// editKeys runs fn on the keys under an exclusive lock, so two `mcp keys` commands cannot
// lose each other's change, and writes the result.
func editKeys(path string, fn func([]Key) ([]Key, error)) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("mcp keys: %w", err)
	}
	unlock, err := flock.Lock(path + ".lock")
	if err != nil {
		return fmt.Errorf("mcp keys: lock: %w", err)
	}
	defer unlock()
	keys, err := ReadKeys(path)
	if err != nil {
		return err
	}
	keys, err = fn(keys)
	if err != nil {
		return err
	}
	return writeKeys(path, keys)
}

// AddKey creates a key from k's name, scopes and limits, stores its hash in the keys file at
// path and returns the key, which is shown once and never stored.
func AddKey(path string, k Key, now time.Time) (string, error) {
	if err := ValidateKeyName(k.Name); err != nil {
		return "", err
	}
	switch k.Approvals {
	case "", KeyApprovalsAsk, KeyApprovalsDeny:
	default:
		return "", fmt.Errorf("--approvals %q: want %s (the server's approvals.mode decides) or %s (refuse every command that needs approval)",
			k.Approvals, KeyApprovalsAsk, KeyApprovalsDeny)
	}
	for _, t := range k.Tools {
		if !slices.Contains(ToolNames, t) {
			return "", fmt.Errorf("--tools: unknown tool %q; the tools are %s", t, strings.Join(ToolNames, ", "))
		}
	}
	if k.MaxSessions < 0 || k.MaxConcurrent < 0 || k.RatePerMinute < 0 {
		return "", errors.New("limits must not be negative (0 = no limit of the key's own)")
	}
	var id [6]byte
	var secret [32]byte
	var salt [16]byte
	rand.Read(id[:])
	rand.Read(secret[:])
	rand.Read(salt[:])
	k.ID = hex.EncodeToString(id[:])
	sec := base64.RawURLEncoding.EncodeToString(secret[:])
	k.Salt = base64.StdEncoding.EncodeToString(salt[:])
	k.Hash = base64.StdEncoding.EncodeToString(hashSecret(sec, salt[:]))
	k.Created = now.UTC().Truncate(time.Second)
	err := editKeys(path, func(keys []Key) ([]Key, error) {
		for _, o := range keys {
			if o.Name == k.Name {
				return nil, fmt.Errorf("a key named %q exists; revoke it first (`hermes-sandbox mcp keys revoke %s`)", k.Name, k.Name)
			}
		}
		return append(keys, k), nil
	})
	if err != nil {
		return "", err
	}
	return keyPrefix + k.ID + "_" + sec, nil
}

// RevokeKey deletes the key named name. A running server notices the change of the file at
// its next request (or within a second) and closes the key's sessions.
func RevokeKey(path, name string) error {
	return editKeys(path, func(keys []Key) ([]Key, error) {
		i := slices.IndexFunc(keys, func(k Key) bool { return k.Name == name })
		if i < 0 {
			return nil, fmt.Errorf("no key named %q (`hermes-sandbox mcp keys list` lists them)", name)
		}
		return slices.Delete(keys, i, i+1), nil
	})
}

// LastUse reads when each key was last used, as recorded by servers.
func LastUse(keysPath string) map[string]time.Time {
	m := map[string]time.Time{}
	if data, err := os.ReadFile(lastUsePath(keysPath)); err == nil {
		json.Unmarshal(data, &m)
	}
	return m
}

// hashing bounds the argon2id hashes computed at once (see keyStore.verify).
var hashing = make(chan struct{}, max(1, runtime.GOMAXPROCS(0)))

func hashSecret(secret string, salt []byte) []byte {
	return argon2.IDKey([]byte(secret), salt, argonTime, argonMemory, argonThreads, argonLen)
}

// keyStore is the server's view of the keys file: reloaded when the file changes, with the
// keys verified so far cached by a SHA-256 of the presented key (argon2id costs tens of
// milliseconds and megabytes, too much for every request).
type keyStore struct {
	path string

	mu       sync.Mutex
	stamp    fileStamp            // guarded by mu
	keys     map[string]*Key      // by ID; guarded by mu
	verified map[[32]byte]*Key    // guarded by mu
	lastUse  map[string]time.Time // by name; guarded by mu
	dirty    bool                 // lastUse changed since written; guarded by mu
	checked  time.Time            // last stat of the file; guarded by mu
}

type fileStamp struct {
	exists bool
	mod    time.Time
	size   int64
	ino    uint64
}

func newKeyStore(path string) (*keyStore, error) {
	ks := &keyStore{path: path, lastUse: LastUse(path)}
	if _, err := ks.refresh(true); err != nil {
		return nil, err
	}
	return ks, nil
}

// refresh reloads the file if it changed (checked at most every 100ms unless force) and
// reports the names of keys that went away or expired.
func (ks *keyStore) refresh(force bool) (gone []string, err error) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	now := time.Now()
	if !force && now.Sub(ks.checked) < 100*time.Millisecond {
		return nil, nil
	}
	ks.checked = now
	st := statFile(ks.path)
	if st == ks.stamp && ks.keys != nil {
		for _, k := range ks.keys {
			if k.Expired(now) {
				gone = append(gone, k.Name)
			}
		}
		return gone, nil
	}
	list, err := ReadKeys(ks.path)
	if err != nil {
		// Keep serving with what was loaded; a half-written file must not open the door.
		return nil, err
	}
	keys := map[string]*Key{}
	for i := range list {
		k := list[i]
		keys[k.ID] = &k
	}
	for _, old := range ks.keys {
		if nk, ok := keys[old.ID]; !ok || nk.Name != old.Name {
			gone = append(gone, old.Name)
		}
	}
	for _, k := range keys {
		if k.Expired(now) {
			gone = append(gone, k.Name)
		}
	}
	ks.keys, ks.stamp = keys, st
	ks.verified = map[[32]byte]*Key{}
	return gone, nil
}

// any reports whether at least one key exists; then every HTTP request needs a key.
func (ks *keyStore) any() bool {
	if ks == nil {
		return false
	}
	ks.mu.Lock()
	defer ks.mu.Unlock()
	return len(ks.keys) > 0
}

// verify returns the key that presented is, or nil.
func (ks *keyStore) verify(presented string) *Key {
	sum := sha256.Sum256([]byte(presented))
	now := time.Now()
	ks.mu.Lock()
	if k, ok := ks.verified[sum]; ok {
		ks.touch(k, now)
		ks.mu.Unlock()
		if k.Expired(now) {
			return nil
		}
		return k
	}
	rest, ok := strings.CutPrefix(presented, keyPrefix)
	id, secret, ok2 := strings.Cut(rest, "_")
	var k *Key
	if ok && ok2 {
		k = ks.keys[id]
	}
	ks.mu.Unlock()
	if k == nil || k.Expired(now) {
		return nil
	}
	salt, err1 := base64.StdEncoding.DecodeString(k.Salt)
	want, err2 := base64.StdEncoding.DecodeString(k.Hash)
	if err1 != nil || err2 != nil {
		return nil
	}
	// Each hash takes argonMemory: at most one a core at once, so a crowd of first requests
	// (50 clients connecting together, or someone sending made-up keys) cannot take
	// gigabytes.
	hashing <- struct{}{}
	got := hashSecret(secret, salt)
	<-hashing
	if subtle.ConstantTimeCompare(got, want) != 1 {
		return nil
	}
	ks.mu.Lock()
	defer ks.mu.Unlock()
	// The file may have changed while hashing: cache only a key that is still current.
	if cur := ks.keys[id]; cur == k {
		ks.verified[sum] = k
		ks.touch(k, now)
		return k
	}
	return nil
}

// touch records a use; ks.mu is held.
func (ks *keyStore) touch(k *Key, now time.Time) {
	if now.Sub(ks.lastUse[k.Name]) >= time.Minute {
		ks.lastUse[k.Name] = now.UTC().Truncate(time.Second)
		ks.dirty = true
	}
}

// flushLastUse writes the last-use times if they changed.
func (ks *keyStore) flushLastUse() {
	ks.mu.Lock()
	if !ks.dirty {
		ks.mu.Unlock()
		return
	}
	data, _ := json.MarshalIndent(ks.lastUse, "", "  ")
	ks.dirty = false
	ks.mu.Unlock()
	writeFileAtomic(lastUsePath(ks.path), data)
}
