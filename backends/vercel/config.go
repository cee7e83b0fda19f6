package vercel

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// credentials are the token and the team and project every request names.
type credentials struct {
	token   string
	teamID  string
	project string
	kind    string // "token" or "oidc", for messages
}

// oidcClaims are the claims of a Vercel OIDC token the SDK reads (owner_id = team).
type oidcClaims struct {
	OwnerID   string `json:"owner_id"`
	ProjectID string `json:"project_id"`
}

// decodeOIDC reads the unverified claims of a JWT, as the SDK does: the server verifies it.
func decodeOIDC(tok string) (oidcClaims, error) {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return oidcClaims{}, fmt.Errorf("VERCEL_OIDC_TOKEN is not a JWT (want three dot-separated parts)")
	}
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return oidcClaims{}, fmt.Errorf("VERCEL_OIDC_TOKEN: payload is not base64url: %v", err)
	}
	var c oidcClaims
	if err := json.Unmarshal(raw, &c); err != nil {
		return oidcClaims{}, fmt.Errorf("VERCEL_OIDC_TOKEN: payload is not JSON: %v", err)
	}
	if c.OwnerID == "" {
		return oidcClaims{}, fmt.Errorf("VERCEL_OIDC_TOKEN has no owner_id claim (the team); run `vercel env pull` for a fresh token, or use VERCEL_TOKEN with vercel.team_id")
	}
	return c, nil
}

// resolveCredentials picks vercel.token (secrets.yaml or VERCEL_TOKEN) with vercel.team_id
// and vercel.project_id, or else VERCEL_OIDC_TOKEN with the team and project from its
// claims (vercel.project_id overrides a missing project claim).
func resolveCredentials(cfg config.VercelConfig, opts sandbox.FactoryOptions) (credentials, error) {
	token := cfg.Token.Reveal()
	if token == "" {
		token, _ = opts.Getenv("VERCEL_TOKEN")
	}
	oidc := cfg.OIDCToken.Reveal()
	if oidc == "" {
		oidc, _ = opts.Getenv("VERCEL_OIDC_TOKEN")
	}
	switch {
	case token != "":
		var missing []string
		if cfg.TeamID == "" {
			missing = append(missing, "vercel.team_id")
		}
		if cfg.ProjectID == "" {
			missing = append(missing, "vercel.project_id")
		}
		if len(missing) > 0 {
			return credentials{}, fmt.Errorf("a Vercel token needs %s: set them with `hermes-sandbox config set` or `hermes-sandbox setup vercel`: %w",
				strings.Join(missing, " and "), sandbox.ErrInvalidConfig)
		}
		return credentials{token: token, teamID: cfg.TeamID, project: cfg.ProjectID, kind: "token"}, nil
	case oidc != "":
		c, err := decodeOIDC(oidc)
		if err != nil {
			return credentials{}, fmt.Errorf("%v: %w", err, sandbox.ErrInvalidConfig)
		}
		project := c.ProjectID
		if project == "" {
			project = cfg.ProjectID
		}
		if project == "" {
			return credentials{}, fmt.Errorf("VERCEL_OIDC_TOKEN has no project_id claim: set vercel.project_id: %w", sandbox.ErrInvalidConfig)
		}
		return credentials{token: oidc, teamID: c.OwnerID, project: project, kind: "oidc"}, nil
	}
	return credentials{}, fmt.Errorf("no credentials: set VERCEL_TOKEN (with vercel.team_id and vercel.project_id) or "+
		"VERCEL_OIDC_TOKEN, or run `hermes-sandbox setup vercel`: %w", sandbox.ErrInvalidConfig)
}

// settings are the resolved sandbox settings.
type settings struct {
	runtime string
	vcpus   int
	timeout time.Duration
	ports   []int
	allow   []string
	// fromShared says allow was mapped from terminal.egress_allow (vercel.network_allow
	// empty); leftOut are its entries with a port, which a domain list cannot express.
	fromShared bool
	leftOut    []string
}

func resolveSettings(cfg config.VercelConfig) (settings, error) {
	s := settings{runtime: cfg.Runtime, vcpus: cfg.VCPUs, timeout: cfg.Timeout, allow: cfg.NetworkAllow}
	if s.timeout <= 0 {
		return s, fmt.Errorf("vercel.timeout must be positive (the VM lifetime, extended while in use): %w", sandbox.ErrInvalidConfig)
	}
	for _, p := range cfg.Ports {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return s, fmt.Errorf("vercel.ports: %q is not a port number: %w", p, sandbox.ErrInvalidConfig)
		}
		s.ports = append(s.ports, n)
	}
	return s, nil
}

// networkPolicy is deny-all unless vercel.network_allow lists domains.
func (s settings) networkPolicy() *NetworkPolicy {
	if len(s.allow) == 0 {
		return &NetworkPolicy{Mode: "deny-all"}
	}
	return &NetworkPolicy{Allow: append([]string(nil), s.allow...)}
}
