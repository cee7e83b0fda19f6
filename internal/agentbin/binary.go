package agentbin

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"
)

// Binary is the helper for one architecture as a backend ships it into a sandbox.
type Binary struct {
	Path    string   // on this machine; "" for one given as bytes
	Args    []string // what comes before "serve": nothing, or ["__agent"] for hermes-sandbox itself
	Size    int64
	ModTime time.Time
	SHA256  string // hex; "" for a Binary from Locate
	CRC     uint32 // POSIX cksum of the content, the check where the sandbox has no sha256sum

	data []byte // the content, for one given as bytes
}

// Locate finds the helper for arch (see Path) without reading it: enough to bind-mount it.
func Locate(arch string) (*Binary, error) {
	p, args, err := Path(arch)
	if err != nil {
		return nil, err
	}
	if p, err = filepath.Abs(p); err != nil {
		return nil, err
	}
	fi, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	return &Binary{Path: p, Args: slices.Clip(args[:len(args)-1]), Size: fi.Size(), ModTime: fi.ModTime()}, nil
}

// sums caches content checksums in memory: path|size|mtime → sums.
var sums sync.Map

type checksums struct {
	SHA256 string `json:"sha256"`
	CRC    uint32 `json:"crc"`
}

// Load finds the helper for arch and computes its checksums, to upload it. They are cached
// in memory and, when cacheDir is not "", in cacheDir/helper-sums.json, since hashing a
// 30 MB binary on every CLI run would cost tens of milliseconds.
func Load(arch, cacheDir string) (*Binary, error) {
	b, err := Locate(arch)
	if err != nil {
		return nil, err
	}
	key := b.Path + "|" + strconv.FormatInt(b.Size, 10) + "|" + strconv.FormatInt(b.ModTime.UnixNano(), 10)
	if v, ok := sums.Load(key); ok {
		b.SHA256, b.CRC = v.(checksums).SHA256, v.(checksums).CRC
		return b, nil
	}
	cacheFile := ""
	disk := map[string]checksums{}
	if cacheDir != "" {
		cacheFile = filepath.Join(cacheDir, "helper-sums.json")
		if data, err := os.ReadFile(cacheFile); err == nil && json.Unmarshal(data, &disk) == nil {
			if c, ok := disk[key]; ok && len(c.SHA256) == 64 {
				sums.Store(key, c)
				b.SHA256, b.CRC = c.SHA256, c.CRC
				return b, nil
			}
		}
	}
	f, err := os.Open(b.Path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	c, n, err := sum(f)
	if err != nil {
		return nil, err
	}
	if n != b.Size {
		return nil, fmt.Errorf("helper %s changed while being read; retry", b.Path)
	}
	sums.Store(key, c)
	b.SHA256, b.CRC = c.SHA256, c.CRC
	if cacheFile != "" {
		// A few binaries (one per architecture, say) are kept; older ones go.
		if len(disk) >= 4 {
			clear(disk)
		}
		disk[key] = c
		if data, err := json.Marshal(disk); err == nil && os.MkdirAll(cacheDir, 0o700) == nil {
			tmp := cacheFile + ".tmp" + strconv.Itoa(os.Getpid())
			if os.WriteFile(tmp, data, 0o600) == nil {
				_ = os.Rename(tmp, cacheFile)
			}
		}
	}
	return b, nil
}

// FromBytes is a Binary for a helper held in memory; args come before "serve".
func FromBytes(data []byte, args []string) *Binary {
	c, _, _ := sum(bytes.NewReader(data))
	return &Binary{Args: args, Size: int64(len(data)), SHA256: c.SHA256, CRC: c.CRC, data: data}
}

// Open returns the helper's content.
func (b *Binary) Open() (io.ReadCloser, error) {
	if b.Path == "" {
		return io.NopCloser(bytes.NewReader(b.data)), nil
	}
	return os.Open(b.Path)
}

// Bytes returns the helper's content, checked against its size and SHA-256.
func (b *Binary) Bytes() ([]byte, error) {
	if b.Path == "" {
		return b.data, nil
	}
	data, err := os.ReadFile(b.Path)
	if err != nil {
		return nil, err
	}
	if c, _, _ := sum(bytes.NewReader(data)); c.SHA256 != b.SHA256 {
		return nil, fmt.Errorf("helper %s changed since it was found; retry", b.Path)
	}
	return data, nil
}

// Name is a file name for the helper in a sandbox that changes with its content, so a new
// helper is uploaded again: agent-<first 12 hex digits of its SHA-256>.
func (b *Binary) Name() string { return "agent-" + b.SHA256[:min(12, len(b.SHA256))] }

// sum reads r to its end and returns its SHA-256, its POSIX cksum and its length.
func sum(r io.Reader) (checksums, int64, error) {
	h, c := sha256.New(), &cksum{}
	n, err := io.Copy(io.MultiWriter(h, c), r)
	if err != nil {
		return checksums{}, n, err
	}
	return checksums{SHA256: hex.EncodeToString(h.Sum(nil)), CRC: c.sum()}, n, nil
}

// cksum computes what POSIX cksum prints first: a CRC-32 (polynomial 0x04C11DB7, most
// significant bit first) over the content and then its length, complemented.
type cksum struct {
	crc uint32
	n   int64
}

var cksumTable = func() (t [256]uint32) {
	for i := range t {
		c := uint32(i) << 24
		for range 8 {
			if c&0x80000000 != 0 {
				c = c<<1 ^ 0x04C11DB7
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return t
}()

func (c *cksum) Write(p []byte) (int, error) {
	for _, x := range p {
		c.crc = c.crc<<8 ^ cksumTable[byte(c.crc>>24)^x]
	}
	c.n += int64(len(p))
	return len(p), nil
}

func (c *cksum) sum() uint32 {
	crc := c.crc
	for n := c.n; n > 0; n >>= 8 {
		crc = crc<<8 ^ cksumTable[byte(crc>>24)^byte(n)]
	}
	return ^crc
}

// Loader loads the helper once per architecture for a backend and keeps it; a failure is
// tried again on the next call. The zero value is ready to use.
type Loader struct {
	CacheDir string // for Load's checksum cache; "" for memory only

	mu   sync.Mutex
	bins map[string]*Binary // guarded by mu
}

// Load returns the helper for arch, loading it on first use.
func (l *Loader) Load(arch string) (*Binary, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if b := l.bins[arch]; b != nil {
		return b, nil
	}
	b, err := Load(arch, l.CacheDir)
	if err != nil {
		return nil, err
	}
	if l.bins == nil {
		l.bins = map[string]*Binary{}
	}
	l.bins[arch] = b
	return b, nil
}
