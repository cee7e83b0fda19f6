package docker

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// userIDs is the numeric user and group the sandbox runs as.
type userIDs struct{ uid, gid int }

// userIDs resolves docker.user to numbers: given as numbers (the default 1000:1000) it costs
// nothing; a name (or an empty user, meaning the image's) is looked up in the image's
// /etc/passwd and /etc/group once per backend, so a name the image lacks is a clear error
// before any sandbox is created.
func (b *Backend) userIDs(ctx context.Context) (userIDs, error) {
	u, g := userSpec(b.cfg.User)
	if isNumeric(u) && (g == "" || isNumeric(g)) {
		return numericIDs(u, g), nil
	}
	b.usersMu.Lock()
	defer b.usersMu.Unlock()
	if b.users != nil {
		return *b.users, nil
	}
	if u == "" {
		img, err := b.cli.ImageInspect(ctx, b.image())
		if err != nil {
			if isNotFound(err) {
				return userIDs{}, b.imageMissing(ctx, err)
			}
			return userIDs{}, b.engineErr("inspect image", b.image(), err)
		}
		if img.Config != nil {
			u, g = userSpec(img.Config.User)
		}
		if u == "" {
			u = "0"
		}
		if isNumeric(u) && (g == "" || isNumeric(g)) {
			ids := numericIDs(u, g)
			b.users = &ids
			return ids, nil
		}
	}
	ids, err := b.lookupUser(ctx, u, g)
	if err != nil {
		return userIDs{}, err
	}
	b.users = &ids
	return ids, nil
}

func numericIDs(u, g string) userIDs {
	uid, _ := strconv.Atoi(u)
	gid := uid
	if g != "" {
		gid, _ = strconv.Atoi(g)
	}
	return userIDs{uid: uid, gid: gid}
}

// lookupUser reads the image's user and group files from a container that is created and
// removed without ever starting.
func (b *Backend) lookupUser(ctx context.Context, u, g string) (userIDs, error) {
	labels := map[string]string{labelOurs: "1", labelScope: b.scope, labelRole: rolePrep,
		labelCreated: time.Now().UTC().Format(time.RFC3339Nano)}
	for k, v := range b.extra.Labels {
		labels[k] = v
	}
	resp, err := b.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config:     &container.Config{Image: b.image(), Entrypoint: []string{agentInCtr}, Labels: labels},
		HostConfig: &container.HostConfig{NetworkMode: "none", LogConfig: container.LogConfig{Type: "none"}},
		Name:       "hermes-prep-" + b.scope + "-" + sandbox.RandomHex(5)})
	if err != nil {
		if isNotFound(err) {
			return userIDs{}, b.imageMissing(ctx, err)
		}
		return userIDs{}, b.engineErr("look up user", b.cfg.User, err)
	}
	defer func() {
		cctx, cancel := cleanupContext(ctx)
		defer cancel()
		b.cli.ContainerRemove(cctx, resp.ID, client.ContainerRemoveOptions{Force: true})
	}()
	fail := func(format string, args ...any) (userIDs, error) {
		return userIDs{}, &sandbox.Error{Backend: Name, Op: "user", ID: b.cfg.User,
			Err: fmt.Errorf(format+": %w", append(args, sandbox.ErrInvalidConfig)...)}
	}
	var ids userIDs
	if isNumeric(u) {
		ids.uid, _ = strconv.Atoi(u)
		ids.gid = ids.uid
	} else {
		passwd, err := b.readImageFile(ctx, resp.ID, "/etc/passwd")
		if err != nil {
			return fail("docker.user %q is a name, but the image %s has no readable /etc/passwd (%v): use a "+
				"numeric uid:gid such as 1000:1000 (hermes-sandbox config set docker.user 1000:1000)", b.cfg.User, b.image(), err)
		}
		var ok bool
		if ids.uid, ids.gid, ok = lookupPasswd(passwd, u); !ok {
			return fail("docker.user %q does not exist in the image %s: use a numeric uid:gid such as 1000:1000 "+
				"(hermes-sandbox config set docker.user 1000:1000), or a user the image has", b.cfg.User, b.image())
		}
	}
	if g != "" {
		if isNumeric(g) {
			ids.gid, _ = strconv.Atoi(g)
		} else {
			group, _ := b.readImageFile(ctx, resp.ID, "/etc/group")
			gid, ok := lookupGroup(group, g)
			if !ok {
				return fail("docker.user %q: group %q does not exist in the image %s: use a numeric uid:gid", b.cfg.User, g, b.image())
			}
			ids.gid = gid
		}
	}
	return ids, nil
}

// readImageFile reads one small file from a created container's filesystem.
func (b *Backend) readImageFile(ctx context.Context, id, path string) ([]byte, error) {
	res, err := b.cli.CopyFromContainer(ctx, id, client.CopyFromContainerOptions{SourcePath: path})
	if err != nil {
		return nil, err
	}
	defer res.Content.Close()
	tr := tar.NewReader(res.Content)
	for {
		hdr, err := tr.Next()
		if err != nil {
			return nil, err
		}
		if hdr.Typeflag == tar.TypeReg {
			return io.ReadAll(io.LimitReader(tr, 1<<20))
		}
	}
}

// lookupPasswd finds name's uid and gid in an /etc/passwd file.
func lookupPasswd(passwd []byte, name string) (uid, gid int, ok bool) {
	sc := bufio.NewScanner(bytes.NewReader(passwd))
	for sc.Scan() {
		f := strings.Split(sc.Text(), ":")
		if len(f) >= 4 && f[0] == name {
			u, err1 := strconv.Atoi(f[2])
			g, err2 := strconv.Atoi(f[3])
			return u, g, err1 == nil && err2 == nil
		}
	}
	return 0, 0, false
}

// lookupGroup finds name's gid in an /etc/group file.
func lookupGroup(group []byte, name string) (int, bool) {
	sc := bufio.NewScanner(bytes.NewReader(group))
	for sc.Scan() {
		f := strings.Split(sc.Text(), ":")
		if len(f) >= 3 && f[0] == name {
			g, err := strconv.Atoi(f[2])
			return g, err == nil
		}
	}
	return 0, false
}
