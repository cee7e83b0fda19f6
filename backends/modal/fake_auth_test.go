//go:build unix

package modal

// The fake's door: what every call must carry, as the Modal Go SDK v0.11.1 sends it.
//
// Control plane (client.go): every call carries x-modal-client-type (a pb.ClientType, as a
// decimal string), x-modal-client-version, x-modal-libmodal-version, x-modal-host and the
// token pair x-modal-token-id / x-modal-token-secret (injectRequiredHeaders, installed on
// unary and streaming calls alike). Unary calls other than AuthTokenGet also carry
// x-modal-auth-token, a JWT from AuthTokenGet that the SDK refreshes before its exp claim
// (authTokenInterceptor; auth_token_manager.go); streaming calls never carry it, since only
// the header injector is installed on streams (newClient's streamInterceptors).
//
// Command router (task_command_router_client.go): calls carry only "authorization: Bearer
// <jwt>", the JWT from TaskGetCommandRouterAccess (authContext); the connection has no
// header injector (dialCommandRouter). On UNAUTHENTICATED the SDK fetches a new JWT, but
// only when the one it holds expires within 30 s (refreshJwt, callWithAuthRetry).

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	pb "github.com/modal-labs/modal-client/go/proto/modal_proto"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

const (
	controlPrefix = "/modal.client.ModalClient/"
	routerPrefix  = "/modal.task_command_router.TaskCommandRouter/"
)

// routerGrant is what a router JWT was issued for.
type routerGrant struct {
	task string
	exp  time.Time
}

// jwt makes a three-part token whose middle is base64url JSON with an exp claim.
func jwt(claims map[string]any) string {
	enc := base64.RawURLEncoding
	head, _ := json.Marshal(map[string]string{"alg": "none", "typ": "JWT"})
	body, _ := json.Marshal(claims)
	return enc.EncodeToString(head) + "." + enc.EncodeToString(body) + "." + enc.EncodeToString([]byte(randID("sig-")))
}

// now is the fake's clock: real time moved on by advance, so tests can let tokens expire.
func (f *fakeModal) now() time.Time { return time.Now().Add(time.Duration(f.skew.Load())) }

// advance moves the fake's clock (only token expiry reads it) forward by d.
func (f *fakeModal) advance(d time.Duration) { f.skew.Add(int64(d)) }

// check runs before every call: injected failures, then the metadata the SDK attaches.
func (f *fakeModal) check(ctx context.Context, method string, unary bool) error {
	short := method[strings.LastIndex(method, "/")+1:]
	f.mu.Lock()
	f.calls[short]++
	if q := f.failures[short]; len(q) > 0 {
		f.failures[short] = q[1:]
		f.mu.Unlock()
		return status.Errorf(q[0], "injected failure of %s", short)
	}
	f.mu.Unlock()
	md, _ := metadata.FromIncomingContext(ctx)
	get := func(k string) string {
		if v := md.Get(k); len(v) > 0 {
			return v[0]
		}
		return ""
	}
	switch {
	case strings.HasPrefix(method, controlPrefix):
		ct, err := strconv.Atoi(get("x-modal-client-type"))
		if _, known := pb.ClientType_name[int32(ct)]; err != nil || !known || ct == int(pb.ClientType_CLIENT_TYPE_UNSPECIFIED) {
			return status.Errorf(codes.InvalidArgument, "x-modal-client-type %q is not a client type", get("x-modal-client-type"))
		}
		if get("x-modal-client-version") == "" {
			return status.Error(codes.InvalidArgument, "missing x-modal-client-version")
		}
		if get("x-modal-token-id") != f.tokenID || get("x-modal-token-secret") != f.tokenSecret {
			return status.Error(codes.Unauthenticated, "Token ID or secret is invalid. Please check your Modal credentials.")
		}
		tok := get("x-modal-auth-token")
		if short == "AuthTokenGet" || (!unary && tok == "") {
			return nil
		}
		f.mu.Lock()
		exp, ok := f.authTokens[tok]
		f.mu.Unlock()
		switch {
		case !ok:
			return status.Error(codes.Unauthenticated, "missing or invalid x-modal-auth-token")
		case !f.now().Before(exp):
			return status.Error(codes.Unauthenticated, "the x-modal-auth-token has expired")
		}
	case strings.HasPrefix(method, routerPrefix):
		tok, ok := strings.CutPrefix(get("authorization"), "Bearer ")
		f.mu.Lock()
		g, known := f.jwts[tok]
		f.mu.Unlock()
		switch {
		case !ok || !known:
			return status.Error(codes.Unauthenticated, "invalid or missing router JWT")
		case !f.now().Before(g.exp):
			return status.Error(codes.Unauthenticated, "the router JWT has expired")
		}
	}
	return nil
}

// loseReplies makes the next n calls of method take effect and then fail with Unavailable,
// as when the network drops the reply: the client cannot know whether they ran.
func (f *fakeModal) loseReplies(method string, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lostReplies[method] += n
}

func (f *fakeModal) unaryAuth(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if err := f.check(ctx, info.FullMethod, true); err != nil {
		return nil, err
	}
	resp, err := h(ctx, req)
	short := info.FullMethod[strings.LastIndex(info.FullMethod, "/")+1:]
	f.mu.Lock()
	lose := err == nil && f.lostReplies[short] > 0
	if lose {
		f.lostReplies[short]--
	}
	f.mu.Unlock()
	if lose {
		return nil, status.Errorf(codes.Unavailable, "injected: the reply of %s was lost", short)
	}
	return resp, err
}

func (f *fakeModal) streamAuth(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	if err := f.check(ss.Context(), info.FullMethod, false); err != nil {
		return err
	}
	return h(srv, ss)
}

// taskOfJWT returns the task a router call's JWT was issued for.
func (f *fakeModal) taskOfJWT(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	v := md.Get("authorization")
	if len(v) == 0 {
		return ""
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.jwts[strings.TrimPrefix(v[0], "Bearer ")].task
}

// control plane: tokens and environments --------------------------------------------------

func (f *fakeModal) AuthTokenGet(ctx context.Context, _ *pb.AuthTokenGetRequest) (*pb.AuthTokenGetResponse, error) {
	exp := f.now().Add(f.authTTL)
	tok := jwt(map[string]any{"exp": exp.Unix()})
	f.mu.Lock()
	f.authTokens[tok] = exp
	f.mu.Unlock()
	return pb.AuthTokenGetResponse_builder{Token: tok}.Build(), nil
}

// fakeEnvironment is the workspace's one environment; "" names the default, which it is.
const fakeEnvironment = "main"

// environment refuses an environment the workspace does not have, as Modal does for every
// request naming one (the SDK sends the profile's environment, "" for the default).
func environment(name string) error {
	if name != "" && name != fakeEnvironment {
		return status.Errorf(codes.NotFound, "Environment '%s' not found", name)
	}
	return nil
}

func (f *fakeModal) EnvironmentGetOrCreate(ctx context.Context, req *pb.EnvironmentGetOrCreateRequest) (*pb.EnvironmentGetOrCreateResponse, error) {
	if err := environment(req.GetDeploymentName()); err != nil {
		return nil, err
	}
	return pb.EnvironmentGetOrCreateResponse_builder{EnvironmentId: f.envID,
		Metadata: pb.EnvironmentMetadata_builder{Name: fakeEnvironment,
			Settings: pb.EnvironmentSettings_builder{ImageBuilderVersion: "2024.10"}.Build()}.Build()}.Build(), nil
}
