//go:build unix

package vercel

// The response schemas of validators.ts (@vercel/sandbox 3.1.0,
// ../../shared/specs/vercel-sandbox/validators.ts), written out as small Go checks. The
// fake checks each JSON body it sends against the schema the official client parses it
// with, so no test can pass on a response the SDK would refuse. As zod's default objects
// do, unknown keys are allowed; a missing required key, a null where the schema has no
// .nullable(), or a value of the wrong type is an error.

import (
	"encoding/json"
	"fmt"
	"slices"
)

// schema checks one decoded JSON value.
type schema func(v any) error

func str(v any) error {
	if _, ok := v.(string); !ok {
		return fmt.Errorf("want a string, got %s", jsonKind(v))
	}
	return nil
}

func num(v any) error {
	if _, ok := v.(float64); !ok {
		return fmt.Errorf("want a number, got %s", jsonKind(v))
	}
	return nil
}

func boolean(v any) error {
	if _, ok := v.(bool); !ok {
		return fmt.Errorf("want a boolean, got %s", jsonKind(v))
	}
	return nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

func nullable(s schema) schema {
	return func(v any) error {
		if v == nil {
			return nil
		}
		return s(v)
	}
}

func enum(vals ...string) schema {
	return func(v any) error {
		s, ok := v.(string)
		if !ok || !slices.Contains(vals, s) {
			return fmt.Errorf("want one of %q, got %v", vals, v)
		}
		return nil
	}
}

func arrayOf(s schema) schema {
	return func(v any) error {
		a, ok := v.([]any)
		if !ok {
			return fmt.Errorf("want an array, got %s", jsonKind(v))
		}
		for i, e := range a {
			if err := s(e); err != nil {
				return fmt.Errorf("[%d]: %w", i, err)
			}
		}
		return nil
	}
}

func recordOf(s schema) schema {
	return func(v any) error {
		m, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("want an object, got %s", jsonKind(v))
		}
		for k, e := range m {
			if err := s(e); err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
		}
		return nil
	}
}

// object is z.object(required + optional): an optional key may be absent, not null.
func object(required, optional map[string]schema) schema {
	return func(v any) error {
		m, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("want an object, got %s", jsonKind(v))
		}
		for k, s := range required {
			e, ok := m[k]
			if !ok {
				return fmt.Errorf("%s: missing", k)
			}
			if err := s(e); err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
		}
		for k, s := range optional {
			if e, ok := m[k]; ok {
				if err := s(e); err != nil {
					return fmt.Errorf("%s: %w", k, err)
				}
			}
		}
		return nil
	}
}

func union(alts ...schema) schema {
	return func(v any) error {
		var errs []error
		for _, s := range alts {
			err := s(v)
			if err == nil {
				return nil
			}
			errs = append(errs, err)
		}
		return fmt.Errorf("matches no alternative: %v", errs)
	}
}

type fields = map[string]schema

var (
	sessionStatus = enum("pending", "running", "stopping", "stopped", "failed", "aborted", "snapshotting")

	// NetworkPolicyResponseValidator.
	vPolicy = union(
		object(fields{"mode": enum("allow-all", "deny-all")}, nil),
		object(fields{"mode": enum("custom")}, fields{"allowedDomains": arrayOf(str), "allowedCIDRs": arrayOf(str),
			"deniedCIDRs": arrayOf(str), "injectionRules": arrayOf(recordOf(nil2any)), "forwardRules": arrayOf(recordOf(nil2any))}),
	)

	vSession = object(
		fields{"id": str, "memory": num, "vcpus": num, "region": str, "timeout": num, "status": sessionStatus,
			"requestedAt": num, "createdAt": num, "cwd": str, "updatedAt": num},
		fields{"runtime": str, "startedAt": num, "requestedStopAt": num, "stoppedAt": num, "abortedAt": num,
			"duration": num, "sourceSnapshotId": str, "snapshottedAt": num, "interactivePort": num,
			"networkPolicy": vPolicy, "activeCpuDurationMs": num,
			"networkTransfer": object(fields{"ingress": num, "egress": num}, nil)},
	)

	vRoute = object(fields{"url": str, "subdomain": str, "port": num}, nil)

	vSnapshot = object(
		fields{"id": str, "sourceSessionId": str, "region": str, "status": enum("created", "deleted", "failed"),
			"sizeBytes": num, "createdAt": num, "updatedAt": num},
		fields{"regions": arrayOf(str), "expiresAt": num, "lastUsedAt": num, "creationMethod": str, "parentId": str},
	)

	vPagination = object(fields{"count": num, "next": nullable(str)}, nil)

	vCommand = object(
		fields{"id": str, "name": str, "args": arrayOf(str), "cwd": str, "sessionId": str,
			"exitCode": nullable(num), "startedAt": num},
		fields{"durationMs": num},
	)
	vCommandFinished = object(
		fields{"id": str, "name": str, "args": arrayOf(str), "cwd": str, "sessionId": str,
			"exitCode": num, "startedAt": num},
		fields{"durationMs": num},
	)

	vSandbox = object(
		fields{"name": str, "persistent": boolean, "createdAt": num, "updatedAt": num, "currentSessionId": str,
			"status": sessionStatus},
		fields{"region": str, "failoverRegions": arrayOf(str), "vcpus": num, "memory": num, "runtime": str,
			"image": str, "timeout": num, "networkPolicy": vPolicy, "totalEgressBytes": num,
			"totalIngressBytes": num, "totalActiveCpuDurationMs": num, "totalDurationMs": num, "expiresAt": num,
			"currentSnapshotId": str, "statusUpdatedAt": num, "cwd": str, "tags": recordOf(str),
			"snapshotExpiration": num,
			"keepLastSnapshots":  object(fields{"count": num}, fields{"expiration": num, "deleteEvicted": boolean})},
	)

	// The responses, by the validator api-client.ts parses them with.
	vSessionResponse          = object(fields{"session": vSession}, nil)
	vSessionAndRoutesResponse = object(fields{"session": vSession, "routes": arrayOf(vRoute)}, nil)
	vStopSessionResponse      = object(fields{"session": vSession}, fields{"sandbox": vSandbox, "snapshot": vSnapshot})
	vCreateSnapshotResponse   = object(fields{"snapshot": vSnapshot, "session": vSession}, nil)
	vSnapshotResponse         = object(fields{"snapshot": vSnapshot}, nil)
	vSandboxAndSession        = object(fields{"sandbox": vSandbox, "session": vSession, "routes": arrayOf(vRoute)},
		fields{"resumed": boolean})
	vSandboxesPagination = object(fields{"sandboxes": arrayOf(vSandbox), "pagination": vPagination}, nil)
	vUpdateSandbox       = object(fields{"sandbox": vSandbox}, fields{"routes": arrayOf(vRoute)})
	vCommandResponse     = object(fields{"command": vCommand}, nil)
	vCommandFinishedResp = object(fields{"command": vCommandFinished}, nil)
	vLogLine             = union(
		object(fields{"stream": enum("stdout", "stderr"), "data": str}, nil),
		object(fields{"stream": enum("error"), "data": object(fields{"code": str, "message": str}, nil)}, nil),
	)
	// An error body as base-client.ts reads it (ErrorResponseBody) and the official mock
	// sends it (http.ts apiError).
	vErrorBody = object(fields{"error": object(fields{"code": str, "message": str}, nil)}, nil)
)

func nil2any(any) error { return nil }

// conforms reports whether the JSON encoding of v satisfies s.
func conforms(s schema, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var got any
	if err := json.Unmarshal(b, &got); err != nil {
		return err
	}
	return s(got)
}
