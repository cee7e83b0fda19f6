package modal

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// DefaultServerURL is Modal's API, used when neither modal.server_url, MODAL_SERVER_URL nor
// the ~/.modal.toml profile names one.
const DefaultServerURL = "https://api.modal.com:443"

// MaxArgvBytes is the most a command line may carry in one Modal exec (the SDK refuses more).
const MaxArgvBytes = 1 << 16

// Credentials are the resolved token and where it came from.
type Credentials struct {
	TokenID     string
	TokenSecret string
	// Source says where the token came from, for doctor: "secrets.yaml", "environment
	// (MODAL_TOKEN_ID)", "~/.modal.toml profile NAME".
	Source      string
	ServerURL   string
	Environment string
}

// Precedence documents, in order, where the token is looked for.
const Precedence = "HERMES_SANDBOX_MODAL_TOKEN_ID/_SECRET, then secrets.yaml (modal.token_id/token_secret), " +
	"then MODAL_TOKEN_ID/MODAL_TOKEN_SECRET, then the active profile of ~/.modal.toml " +
	"(MODAL_PROFILE, MODAL_CONFIG_PATH)"

// ErrNoCredentials says no Modal token was found anywhere.
var ErrNoCredentials = errors.New("no Modal credentials")

// profile is one [name] table of ~/.modal.toml, as the SDK reads it.
type profile struct {
	ServerURL   string `toml:"server_url"`
	TokenID     string `toml:"token_id"`
	TokenSecret string `toml:"token_secret"`
	Environment string `toml:"environment"`
	Active      bool   `toml:"active"`
}

// modalTOMLPath is where the SDK looks for profiles.
func modalTOMLPath(opts sandbox.FactoryOptions) string {
	if p, ok := opts.Getenv("MODAL_CONFIG_PATH"); ok && p != "" {
		return p
	}
	home, _ := opts.Getenv("HOME")
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	return filepath.Join(home, ".modal.toml")
}

// readProfile returns the profile the SDK would use (MODAL_PROFILE, else the active one) and
// its name; a missing file is no profile.
func readProfile(opts sandbox.FactoryOptions) (profile, string, error) {
	p := modalTOMLPath(opts)
	data, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return profile{}, "", nil
	}
	if err != nil {
		return profile{}, "", fmt.Errorf("read %s: %w", p, err)
	}
	var all map[string]profile
	if err := toml.Unmarshal(data, &all); err != nil {
		return profile{}, "", fmt.Errorf("parse %s: %v: fix the file or run `modal token set`: %w", p, err, sandbox.ErrInvalidConfig)
	}
	name, _ := opts.Getenv("MODAL_PROFILE")
	if name == "" {
		for n, pr := range all {
			if pr.Active {
				name = n
				break
			}
		}
	}
	if name == "" {
		return profile{}, "", nil
	}
	pr, ok := all[name]
	if !ok {
		return profile{}, "", fmt.Errorf("%s has no profile %q (MODAL_PROFILE): %w", p, name, sandbox.ErrInvalidConfig)
	}
	return pr, name, nil
}

// ResolveCredentials finds the token and server in the documented order (Precedence).
func ResolveCredentials(m config.ModalConfig, opts sandbox.FactoryOptions) (Credentials, error) {
	pr, prName, perr := readProfile(opts)
	c := Credentials{ServerURL: m.ServerURL, Environment: pr.Environment}
	if c.ServerURL == "" {
		c.ServerURL = pr.ServerURL
	}
	if c.ServerURL == "" {
		c.ServerURL = DefaultServerURL
	}
	switch {
	case m.TokenID != "" || m.TokenSecret != "":
		c.TokenID, c.TokenSecret = m.TokenID.Reveal(), m.TokenSecret.Reveal()
		c.Source = "secrets.yaml (modal.token_id)"
		if v, _ := opts.Getenv("HERMES_SANDBOX_MODAL_TOKEN_ID"); v != "" && v == c.TokenID {
			c.Source = "environment (HERMES_SANDBOX_MODAL_TOKEN_ID)"
		} else if v, _ := opts.Getenv("MODAL_TOKEN_ID"); v != "" && v == c.TokenID {
			c.Source = "environment (MODAL_TOKEN_ID)"
		} else if !opts.IsExplicit("modal.token_id") {
			c.Source = "configuration (modal.token_id)"
		}
	case pr.TokenID != "" || pr.TokenSecret != "":
		c.TokenID, c.TokenSecret = pr.TokenID, pr.TokenSecret
		c.Source = fmt.Sprintf("%s profile %q", modalTOMLPath(opts), prName)
	}
	if perr != nil && c.TokenID == "" {
		return c, perr
	}
	if c.TokenID == "" && c.TokenSecret == "" {
		return c, fmt.Errorf("%w: run `hermes-sandbox setup modal`, or set MODAL_TOKEN_ID and MODAL_TOKEN_SECRET (looked in %s): %w",
			ErrNoCredentials, Precedence, sandbox.ErrInvalidConfig)
	}
	if c.TokenID == "" || c.TokenSecret == "" {
		missing := "modal.token_secret"
		if c.TokenID == "" {
			missing = "modal.token_id"
		}
		return c, fmt.Errorf("%s is missing (from %s): set both the token id and secret (hermes-sandbox setup modal): %w", missing, c.Source, sandbox.ErrInvalidConfig)
	}
	u, err := url.Parse(c.ServerURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return c, fmt.Errorf("modal server URL %q is not an http(s) URL (modal.server_url, MODAL_SERVER_URL): %w", c.ServerURL, sandbox.ErrInvalidConfig)
	}
	return c, nil
}

var gpuType = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-]*$`)

// ParseGPU checks a GPU request the way the SDK reads it: TYPE or TYPE:COUNT with a positive
// COUNT ("T4", "A100:2", "A100-80GB:4"). It returns the upper-cased type and the count.
func ParseGPU(s string) (string, int, error) {
	if s == "" {
		return "", 0, nil
	}
	typ, count := s, 1
	if t, c, ok := strings.Cut(s, ":"); ok {
		typ = t
		n, err := strconv.ParseUint(c, 10, 32)
		if err != nil || n < 1 {
			return "", 0, fmt.Errorf("modal.gpu %q: the count %q must be a positive integer, as in \"A100:2\": %w", s, c, sandbox.ErrInvalidConfig)
		}
		count = int(n)
	}
	if !gpuType.MatchString(typ) {
		return "", 0, fmt.Errorf("modal.gpu %q: name a GPU type such as \"T4\", \"L4\", \"A100\" or \"H100\", optionally with a count (\"A100:2\"): %w", s, sandbox.ErrInvalidConfig)
	}
	return strings.ToUpper(typ), count, nil
}

// validate checks what the configuration loader cannot (the backend can be built from a
// config that was never validated).
func validate(m config.ModalConfig) error {
	var errs []error
	if _, _, err := ParseGPU(m.GPU); err != nil {
		errs = append(errs, err)
	}
	if strings.TrimSpace(m.Image) == "" {
		errs = append(errs, fmt.Errorf("modal.image is empty: name a registry image such as python:3.12-slim: %w", sandbox.ErrInvalidConfig))
	}
	for key, d := range map[string]time.Duration{"modal.timeout": m.Timeout, "modal.idle_timeout": m.IdleTimeout} {
		if d <= 0 || d%time.Second != 0 {
			errs = append(errs, fmt.Errorf("%s must be a positive whole number of seconds, got %s: %w", key, d, sandbox.ErrInvalidConfig))
		}
	}
	if len(m.CIDRAllowlist) > 0 && m.BlockNetwork {
		errs = append(errs, fmt.Errorf("modal.cidr_allowlist needs modal.block_network: false: %w", sandbox.ErrInvalidConfig))
	}
	return errors.Join(errs...)
}
