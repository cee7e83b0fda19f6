package modal

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	modalsdk "github.com/modal-labs/modal-client/go"
)

// envMu serialises the short window in which newSDKClient changes the process environment.
var envMu sync.Mutex

// newSDKClient builds an SDK client for exactly the resolved credentials and server. The SDK
// reads the server URL and a few switches only from the process environment and
// ~/.modal.toml, so for the duration of the constructor the environment is set to what
// Hermes resolved (and the profile file is hidden, since Hermes already read it) and then
// restored. The V1 sandbox API is used: it is the one with GPUs, listing and tags.
func newSDKClient(c Credentials, builderVersion string, log *slog.Logger) (*modalsdk.Client, error) {
	envMu.Lock()
	defer envMu.Unlock()
	set := map[string]string{
		"MODAL_SERVER_URL":  c.ServerURL,
		"MODAL_CONFIG_PATH": filepath.Join(os.TempDir(), "hermes-sandbox-no-modal-profile.toml"),
		"MODAL_SANDBOX_V2":  "false",
		"MODAL_PROFILE":     "",
	}
	if builderVersion != "" {
		set["MODAL_IMAGE_BUILDER_VERSION"] = builderVersion
	}
	// OAuth variables would conflict with the token Hermes passes.
	for _, k := range []string{"MODAL_OAUTH_REFRESH_TOKEN", "MODAL_OAUTH_CLIENT_ID", "MODAL_OAUTH_CLIENT_SECRET", "MODAL_OAUTH_JWT_KEY"} {
		set[k] = ""
	}
	old := map[string]*string{}
	for k, v := range set {
		if prev, ok := os.LookupEnv(k); ok {
			old[k] = &prev
		} else {
			old[k] = nil
		}
		if v == "" {
			os.Unsetenv(k)
		} else {
			os.Setenv(k, v)
		}
	}
	defer func() {
		for k, v := range old {
			if v == nil {
				os.Unsetenv(k)
			} else {
				os.Setenv(k, *v)
			}
		}
	}()
	return modalsdk.NewClientWithOptions(&modalsdk.ClientParams{
		TokenID:     c.TokenID,
		TokenSecret: c.TokenSecret,
		Environment: c.Environment,
		Logger:      quietLogger(log),
	})
}

// quietLogger passes the SDK's errors to log and drops its chatter (it warns on every
// plaintext router connection to a local server, for one).
func quietLogger(log *slog.Logger) *slog.Logger {
	if os.Getenv("HERMES_SANDBOX_MODAL_SDK_DEBUG") != "" {
		return log
	}
	return slog.New(levelFilter{log.Handler(), slog.LevelError})
}

type levelFilter struct {
	slog.Handler
	min slog.Level
}

func (f levelFilter) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= f.min && f.Handler.Enabled(ctx, l)
}

func (f levelFilter) WithAttrs(a []slog.Attr) slog.Handler {
	return levelFilter{f.Handler.WithAttrs(a), f.min}
}

func (f levelFilter) WithGroup(n string) slog.Handler {
	return levelFilter{f.Handler.WithGroup(n), f.min}
}
