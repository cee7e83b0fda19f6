package daytona

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/moby/moby/client"
)

// The fake's snapshots and forks, as the control-plane document (v0.190.0) describes them:
//
//   - createSandboxSnapshot (POST /sandbox/{id}/snapshot, CreateSandboxSnapshot {name,
//     includeMemory}) puts the sandbox in "snapshotting" and answers at once ("initiated");
//     when the copy is made the sandbox returns to its previous state, and a Snapshot of that
//     name appears in the snapshots API, "pending" for a while and then "active". The fake's
//     sandboxes are containers: includeMemory is refused ("container sandboxes do not support
//     memory snapshots"), as are a name already taken, a sandbox in a state change, and one
//     neither started nor stopped. The body is checked against the schema by serve (a missing
//     name or an unknown field fails the test and gets a 400).
//   - forkSandbox (POST /sandbox/{id}/fork, ForkSandbox {name?}) puts the source in "forking"
//     and answers the new sandbox, "creating", which starts with a copy of the source's files
//     (no processes) and the source's labels; the source is started again when the copy is
//     made. A taken name is a 409; a sandbox that is not started cannot be forked.
//   - replaceLabels, getSnapshot (by id or name), removeSnapshot (by id: "removing", then gone),
//     and createSandbox with snapshot naming an active snapshot (id or name); an unknown one is
//     a 404, one not active a 400.
//
// A copy is a docker commit of the container; the images go when the fake closes.

type fakeSnap struct {
	id, name, state string
	image           string
	created         time.Time
}

func (f *fakeDaytona) snapByIDOrName(v string) *fakeSnap {
	if s := f.snaps[v]; s != nil {
		return s
	}
	for _, s := range f.snaps {
		if s.name == v {
			return s
		}
	}
	return nil
}

func (f *fakeDaytona) snapView(s *fakeSnap) map[string]any {
	ts := s.created.UTC().Format(time.RFC3339Nano)
	return map[string]any{"id": s.id, "organizationId": "org-test", "general": false, "name": s.name, "imageName": s.name,
		"state": s.state, "size": 0.01, "entrypoint": nil, "cpu": 1, "gpu": 0, "mem": 1, "disk": 3, "errorReason": nil,
		"createdAt": ts, "updatedAt": ts, "lastUsedAt": nil, "sandboxClass": "container"}
}

// commit copies b's container into a new image of the fake's.
func (f *fakeDaytona) commit(ctx context.Context, b *fakeBox) (string, error) {
	f.mu.Lock()
	ctr := b.ctr
	f.mu.Unlock()
	res, err := f.cli.ContainerCommit(ctx, ctr, client.ContainerCommitOptions{Comment: "fake Daytona copy of " + b.name})
	if err != nil {
		return "", err
	}
	f.mu.Lock()
	f.images = append(f.images, res.ID)
	f.mu.Unlock()
	return res.ID, nil
}

func newFakeID() string {
	var id [8]byte
	rand.Read(id[:])
	return hex.EncodeToString(id[:])
}

// branch serves the snapshot and fork operations; f.mu is held. It reports whether op was one.
func (f *fakeDaytona) branch(w http.ResponseWriter, r *http.Request, op string, b *fakeBox, params map[string]string, body []byte) bool {
	inChange := func() bool {
		switch b.state {
		case "creating", "starting", "stopping", "archiving", "restoring", "destroying", "snapshotting", "forking":
			conflict(w, r, "Sandbox state change in progress")
			return true
		}
		return false
	}
	switch op {
	case "createSandboxSnapshot":
		var req struct {
			Name          string `json:"name"`
			IncludeMemory bool   `json:"includeMemory"`
		}
		json.Unmarshal(body, &req)
		switch {
		case b == nil:
			notFound(w, r, "Sandbox")
		case inChange():
		case req.IncludeMemory:
			controlError(w, r, http.StatusBadRequest, "Container sandboxes do not support memory snapshots")
		case b.state != "started" && b.state != "stopped":
			controlError(w, r, http.StatusBadRequest, "Sandbox must be started or stopped to create a snapshot, it is "+b.state)
		case req.Name == "":
			controlError(w, r, http.StatusBadRequest, "name must not be empty")
		case f.snapByIDOrName(req.Name) != nil:
			conflict(w, r, fmt.Sprintf("Snapshot with name %s already exists", req.Name))
		default:
			prev := b.state
			b.state = "snapshotting"
			name := req.Name
			f.change(b, prev, func(ctx context.Context, b *fakeBox) error {
				img, err := f.commit(ctx, b)
				if err != nil {
					return err
				}
				s := &fakeSnap{id: newFakeID(), name: name, state: "pending", image: img, created: time.Now()}
				f.mu.Lock()
				f.snaps[s.id] = s
				f.mu.Unlock()
				f.later(2*f.transition, func() {
					if s.state == "pending" {
						s.state = "active"
					}
				})
				return nil
			})
			writeJSON(w, http.StatusOK, f.view(b))
		}
	case "forkSandbox":
		var req struct {
			Name string `json:"name"`
		}
		json.Unmarshal(body, &req)
		if req.Name == "" {
			req.Name = "fork-" + newFakeID()
		}
		switch {
		case b == nil:
			notFound(w, r, "Sandbox")
		case inChange():
		case b.state != "started":
			controlError(w, r, http.StatusBadRequest, "Sandbox must be started to be forked, it is "+b.state)
		case f.byName(req.Name) != nil:
			conflict(w, r, fmt.Sprintf("Sandbox with name %s already exists", req.Name))
		default:
			src := b
			nb := &fakeBox{id: newFakeID(), name: req.Name, state: "creating", labels: map[string]string{}, body: src.body,
				autoStop: src.autoStop, autoArchive: src.autoArchive, autoDelete: src.autoDelete, created: time.Now(),
				active: time.Now(), ptys: map[string]*fakePty{}, sessions: map[string]*fakeSession{}}
			for k, v := range src.labels {
				nb.labels[k] = v
			}
			f.boxes[nb.id] = nb
			src.state = "forking"
			f.change(nb, "started", func(ctx context.Context, nb *fakeBox) error {
				img, err := f.commit(ctx, src)
				f.mu.Lock()
				if src.state == "forking" {
					src.state = "started"
				}
				nb.image = img
				f.mu.Unlock()
				if err != nil {
					return err
				}
				return f.createContainer(ctx, nb)
			})
			writeJSON(w, http.StatusOK, f.view(nb))
		}
	case "replaceLabels":
		var req struct {
			Labels map[string]string `json:"labels"`
		}
		json.Unmarshal(body, &req)
		if b == nil {
			notFound(w, r, "Sandbox")
			return true
		}
		b.labels = map[string]string{}
		for k, v := range req.Labels {
			b.labels[k] = v
		}
		writeJSON(w, http.StatusOK, map[string]any{"labels": b.labels})
	case "getSnapshot":
		s := f.snapByIDOrName(params["id"])
		if s == nil {
			notFound(w, r, "Snapshot")
			return true
		}
		writeJSON(w, http.StatusOK, f.snapView(s))
	case "removeSnapshot":
		s := f.snaps[params["id"]]
		if s == nil || s.state == "removing" {
			notFound(w, r, "Snapshot")
			return true
		}
		s.state = "removing"
		f.later(f.transition, func() { delete(f.snaps, s.id) })
		w.WriteHeader(http.StatusOK)
	default:
		return false
	}
	return true
}

// fromSnapshot checks createSandbox's snapshot (id or name) and returns its image; f.mu is
// held. It answers the refusal itself and returns ok false.
func (f *fakeDaytona) fromSnapshot(w http.ResponseWriter, r *http.Request, v string) (string, bool) {
	s := f.snapByIDOrName(v)
	switch {
	case s == nil || s.state == "removing":
		controlError(w, r, http.StatusNotFound, fmt.Sprintf("Snapshot %s not found", v))
		return "", false
	case s.state != "active":
		controlError(w, r, http.StatusBadRequest, fmt.Sprintf("Snapshot %s is %s, not active", v, s.state))
		return "", false
	}
	return s.image, true
}

// later runs fn with f.mu held after d, unless the fake closes first.
func (f *fakeDaytona) later(d time.Duration, fn func()) {
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		select {
		case <-time.After(d):
		case <-f.stopped:
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		fn()
	}()
}

// removeImages removes the images the fake made (after their containers are gone).
func (f *fakeDaytona) removeImages(ctx context.Context) {
	f.mu.Lock()
	imgs := f.images
	f.images = nil
	f.mu.Unlock()
	for i := len(imgs) - 1; i >= 0; i-- {
		f.cli.ImageRemove(ctx, imgs[i], client.ImageRemoveOptions{Force: true})
	}
}
