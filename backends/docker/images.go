package docker

import (
	"archive/tar"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/distribution/reference"
	"github.com/moby/moby/api/pkg/authconfig"
	"github.com/moby/moby/api/types/jsonstream"
	"github.com/moby/moby/api/types/registry"
	"github.com/moby/moby/client"
	"github.com/moby/moby/client/pkg/jsonmessage"

	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// ImportChanges are the Dockerfile instructions applied to an imported root filesystem: a
// tarball has no ENV or CMD, and a shell without PATH finds nothing.
var ImportChanges = []string{"ENV PATH=" + defaultPath, `CMD ["/bin/sh"]`}

// image is the image sessions run: docker.image, or the built image (config.BuiltDockerImage)
// once resolveImage found that docker.image was left at its default, the engine lacks the
// default and has the built one.
func (b *Backend) image() string {
	b.imageMu.Lock()
	defer b.imageMu.Unlock()
	if b.imageOK != "" {
		return b.imageOK
	}
	return b.cfg.Image
}

// builtImage is the image `make run` builds (Options.BuiltImage in tests).
func (b *Backend) builtImage() string { return cmp.Or(b.extra.BuiltImage, config.BuiltDockerImage) }

// defaultImage reports whether docker.image is the default, set by nobody.
func (b *Backend) defaultImage() bool {
	return !b.opts.IsExplicit("docker.image") && b.cfg.Image == config.NewConfig().Docker.Image
}

// resolveImage decides which image sessions run: docker.image when the engine has it; for the
// default, left unset and missing, the built image when the engine has that. An image the user
// chose is never swapped for another: missing, it is an error (imageMissing). Nothing found is
// not remembered, so an image pulled or built later is found by the next call.
func (b *Backend) resolveImage(ctx context.Context) {
	b.imageMu.Lock()
	defer b.imageMu.Unlock()
	if b.imageOK != "" {
		return
	}
	_, err := b.cli.ImageInspect(ctx, b.cfg.Image)
	if err == nil {
		b.imageOK = b.cfg.Image
	}
	if err == nil || !cerrdefs.IsNotFound(err) || !b.defaultImage() {
		return
	}
	if _, err := b.cli.ImageInspect(ctx, b.builtImage()); err == nil {
		b.log.Info("docker.image is unset and its default is not here: using the built image", "default", b.cfg.Image, "image", b.builtImage())
		b.imageOK = b.builtImage()
	}
}

// ImageNote says which image sessions run when it is not the one docker.image names, and how
// to make that choice explicit ("" when docker.image is what runs).
func (b *Backend) ImageNote(ctx context.Context) string {
	b.resolveImage(ctx)
	if img := b.image(); img != b.cfg.Image {
		return fmt.Sprintf("image %s: docker.image is unset and its default %s is not on this machine, so the image "+
			"`make run` builds is used (make it the default: hermes-sandbox config set docker.image %s)", img, b.cfg.Image, img)
	}
	return ""
}

// PullImage pulls ref from its registry, showing progress. Credentials stored inline in the
// docker config file (~/.docker/config.json "auths") are used for the ref's registry.
func (b *Backend) PullImage(ctx context.Context, ref string, p sandbox.Progress) (sandbox.ImageInfo, error) {
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return sandbox.ImageInfo{}, &sandbox.Error{Backend: Name, Op: "pull", ID: ref, Err: fmt.Errorf("%v: %w", err, sandbox.ErrInvalidConfig)}
	}
	ref = reference.TagNameOnly(named).String()
	opts := client.ImagePullOptions{RegistryAuth: b.registryAuth(reference.Domain(named))}
	rc, err := b.cli.ImagePull(ctx, ref, opts)
	if err != nil {
		return sandbox.ImageInfo{}, b.pullErr(ref, b.engineErr("pull", ref, err))
	}
	defer rc.Close()
	w := p.W
	if w == nil {
		w = io.Discard
	}
	if err := jsonmessage.DisplayJSONMessagesStream(rc, w, p.Fd, p.Terminal, nil); err != nil {
		return sandbox.ImageInfo{}, b.pullErr(ref, &sandbox.Error{Backend: Name, Op: "pull", ID: ref, Err: err})
	}
	return b.imageInfo(ctx, ref)
}

// Images lists the engine's images, marking the one docker.image names.
func (b *Backend) Images(ctx context.Context) ([]sandbox.ImageInfo, error) {
	list, err := b.cli.ImageList(ctx, client.ImageListOptions{})
	if err != nil {
		return nil, b.engineErr("list images", "", err)
	}
	b.resolveImage(ctx)
	want := familiar(b.image())
	var out []sandbox.ImageInfo
	for _, im := range list.Items {
		for _, tag := range im.RepoTags {
			if tag == "<none>:<none>" {
				continue
			}
			out = append(out, sandbox.ImageInfo{Ref: familiar(tag), ID: im.ID, Size: im.Size,
				Created: time.Unix(im.Created, 0), Configured: familiar(tag) == want})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Ref < out[j].Ref })
	return out, nil
}

// familiar is the short form of an image reference, with its tag: python:3.12-slim for
// docker.io/library/python:3.12-slim, local/x:latest for local/x. Unparsable input stays.
func familiar(ref string) string {
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return ref
	}
	return reference.FamiliarString(reference.TagNameOnly(named))
}

// imageInfo describes one image the engine has.
func (b *Backend) imageInfo(ctx context.Context, ref string) (sandbox.ImageInfo, error) {
	ii, err := b.cli.ImageInspect(ctx, ref)
	if err != nil {
		return sandbox.ImageInfo{}, b.engineErr("inspect image", ref, err)
	}
	info := sandbox.ImageInfo{Ref: familiar(ref), ID: ii.ID, Size: ii.Size, Configured: familiar(ref) == familiar(b.image())}
	if t, err := time.Parse(time.RFC3339Nano, ii.Created); err == nil {
		info.Created = t
	}
	return info, nil
}

// pullErr adds the way out for a machine that cannot reach the registry.
func (b *Backend) pullErr(ref string, err error) error {
	var ue *unreachableError
	if errors.As(err, &ue) {
		return err
	}
	return fmt.Errorf("%w\n(without a registry, build an image from Debian's packages instead: %s; "+
		"or import a root filesystem: hermes-sandbox image import --rootfs DIR --tag %s)", err, config.BuildDockerImage, ref)
}

// registryAuth returns the encoded inline credentials for a registry, or "".
func (b *Backend) registryAuth(domain string) string {
	data, err := os.ReadFile(filepath.Join(dockerConfigDir(b.opts), "config.json"))
	if err != nil {
		return ""
	}
	var cf struct {
		Auths map[string]struct {
			Auth string `json:"auth"`
		} `json:"auths"`
	}
	if json.Unmarshal(data, &cf) != nil {
		return ""
	}
	keys := []string{domain, "https://" + domain, "https://" + domain + "/v1/"}
	if domain == "docker.io" {
		keys = append(keys, "https://index.docker.io/v1/", "index.docker.io")
	}
	for _, k := range keys {
		a, ok := cf.Auths[k]
		if !ok || a.Auth == "" {
			continue
		}
		raw, err := base64.StdEncoding.DecodeString(a.Auth)
		if err != nil {
			continue
		}
		user, pass, _ := strings.Cut(string(raw), ":")
		enc, err := authconfig.Encode(registry.AuthConfig{Username: user, Password: pass, ServerAddress: k})
		if err == nil {
			return enc
		}
	}
	return ""
}

// ImportImage makes an image tagged src.Tag from a root filesystem (a directory, or a tar
// file, plain or compressed, as the engine accepts) through the Engine API, with
// ImportChanges applied.
func (b *Backend) ImportImage(ctx context.Context, src sandbox.ImageSource, p sandbox.Progress) (sandbox.ImageInfo, error) {
	id, err := b.importImage(ctx, src)
	if err != nil {
		return sandbox.ImageInfo{}, err
	}
	p.Printf("imported %s (%s)\n", src.Tag, id)
	b.resolveImage(ctx) // the new image may be the built one, standing in for a missing default
	return b.imageInfo(ctx, src.Tag)
}

func (b *Backend) importImage(ctx context.Context, src sandbox.ImageSource) (string, error) {
	tag := src.Tag
	if _, err := reference.ParseNormalizedNamed(tag); err != nil {
		return "", &sandbox.Error{Backend: Name, Op: "import", ID: tag, Err: fmt.Errorf("bad tag %q: %v (give --tag NAME:TAG): %w", tag, err, sandbox.ErrInvalidConfig)}
	}
	if src.RootfsDir != "" && src.TarFile != "" {
		return "", &sandbox.Error{Backend: Name, Op: "import", ID: tag, Err: fmt.Errorf("give a root filesystem directory or a tar file, not both: %w", sandbox.ErrInvalidConfig)}
	}
	var r io.Reader
	wait := func() error { return nil }
	switch {
	case src.TarFile != "":
		f, err := os.Open(src.TarFile)
		if err != nil {
			return "", &sandbox.Error{Backend: Name, Op: "import", ID: tag, Err: err}
		}
		defer f.Close()
		r = f
	case src.RootfsDir != "":
		fi, err := os.Stat(src.RootfsDir)
		if err != nil {
			return "", &sandbox.Error{Backend: Name, Op: "import", ID: tag, Err: err}
		}
		if !fi.IsDir() {
			return "", &sandbox.Error{Backend: Name, Op: "import", ID: tag, Err: fmt.Errorf("%s is not a directory: %w", src.RootfsDir, sandbox.ErrInvalidConfig)}
		}
		pr, pw := io.Pipe()
		done := make(chan error, 1)
		go func() {
			err := WriteRootfsTar(pw, src.RootfsDir)
			pw.CloseWithError(err)
			done <- err
		}()
		defer pr.Close()
		r = pr
		wait = func() error { pr.Close(); return <-done }
	default:
		return "", &sandbox.Error{Backend: Name, Op: "import", ID: tag, Err: fmt.Errorf("nothing to import: give a root filesystem directory or a tar file: %w", sandbox.ErrInvalidConfig)}
	}
	rc, err := b.cli.ImageImport(ctx, client.ImageImportSource{Source: r, SourceName: "-"}, tag, client.ImageImportOptions{Changes: ImportChanges})
	if err != nil {
		werr := wait()
		if werr != nil && !errors.Is(werr, io.ErrClosedPipe) {
			return "", &sandbox.Error{Backend: Name, Op: "import", ID: tag, Err: werr}
		}
		return "", b.engineErr("import", tag, err)
	}
	defer rc.Close()
	var id string
	dec := json.NewDecoder(rc)
	for {
		var m jsonstream.Message
		if err := dec.Decode(&m); err == io.EOF {
			break
		} else if err != nil {
			wait()
			return "", &sandbox.Error{Backend: Name, Op: "import", ID: tag, Err: err}
		}
		if m.Error != nil {
			wait()
			return "", &sandbox.Error{Backend: Name, Op: "import", ID: tag, Err: m.Error}
		}
		if strings.HasPrefix(m.Status, "sha256:") {
			id = strings.TrimSpace(m.Status)
		}
	}
	if err := wait(); err != nil && !errors.Is(err, io.ErrClosedPipe) {
		return "", &sandbox.Error{Backend: Name, Op: "import", ID: tag, Err: err}
	}
	return id, nil
}

// WriteRootfsTar writes dir as a tar stream rooted at "/": owners, modes, symlinks, hard
// links and device nodes are kept, so a debootstrap or busybox tree imports faithfully.
func WriteRootfsTar(w io.Writer, dir string) error {
	tw := tar.NewWriter(w)
	links := map[fileID]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSocket != 0 {
			return nil
		}
		link := ""
		if fi.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		}
		hdr, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		hdr.Name = filepath.ToSlash(rel)
		if fi.IsDir() {
			hdr.Name += "/"
		}
		if key, ok := linkID(fi); ok && fi.Mode().IsRegular() {
			if first, seen := links[key]; seen {
				hdr.Typeflag, hdr.Linkname, hdr.Size = tar.TypeLink, first, 0
			} else {
				links[key] = hdr.Name
			}
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if hdr.Typeflag == tar.TypeReg && hdr.Size > 0 {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			_, err = io.CopyN(tw, f, hdr.Size)
			f.Close()
			if err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return tw.Close()
}
