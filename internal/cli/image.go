package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// imageCmd gets images for backends that keep them on this machine (sandbox.ImageManager):
// pull from a registry, import a root filesystem on an air-gapped machine, list.
func (a *app) imageCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "image",
		Short: "Get images for the backends that keep them here (pull REF, import --rootfs DIR|--tar FILE --tag T, list)",
		Long: `Manages the images of the selected backend (--sandbox, else the configured one; with
nothing configured, the first backend that has images). docker pulls and imports through the
Engine API; singularity converts remote references and root filesystem directories into SIF
files in its cache. Other backends have no local images and say so.`,
	}
	pull := &cobra.Command{
		Use:   "pull REF",
		Short: "Pull an image from its registry, showing progress",
		Long: `Pulls REF, with a progress display on a terminal and plain lines otherwise. For docker,
credentials stored inline in ~/.docker/config.json are used; for singularity, REF is a remote
reference (docker://…) converted once into a SIF file. Then point the backend at it with
'hermes-sandbox config set BACKEND.image REF'.`,
		Example: "  hermes-sandbox image pull python:3.12-slim\n  hermes-sandbox --sandbox singularity image pull docker://python:3.12-slim",
		Args:    exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, im, err := a.imageManager(cmd.Context())
			if err != nil {
				return err
			}
			defer b.Close()
			info, err := im.PullImage(cmd.Context(), args[0], a.progress())
			if err != nil {
				return err
			}
			a.printImageResult("pulled", b.Name(), info)
			return nil
		},
	}
	var rootfs, tarFile, tag string
	imp := &cobra.Command{
		Use:   "import (--rootfs DIR | --tar FILE) --tag TAG",
		Short: "Make an image from a root filesystem, for machines without a registry",
		Long: `Makes an image from a root filesystem: a directory (for example made by
'debootstrap --variant=minbase bookworm DIR' or a busybox tree) or, for docker, a tar file
(plain or compressed). A docker image gets ENV PATH and CMD ["/bin/sh"], which a bare root
filesystem lacks. Then point the backend at it with 'hermes-sandbox config set BACKEND.image REF'.`,
		Example: `  sudo debootstrap --variant=minbase bookworm /tmp/rootfs
  hermes-sandbox image import --rootfs /tmp/rootfs --tag local/bookworm:1`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if (rootfs == "") == (tarFile == "") {
				return usagef("image import: give exactly one of --rootfs DIR and --tar FILE")
			}
			if tag == "" {
				return usagef("image import: --tag is required")
			}
			b, im, err := a.imageManager(cmd.Context())
			if err != nil {
				return err
			}
			defer b.Close()
			info, err := im.ImportImage(cmd.Context(), sandbox.ImageSource{RootfsDir: rootfs, TarFile: tarFile, Tag: tag}, a.progress())
			if err != nil {
				return err
			}
			a.printImageResult("imported", b.Name(), info)
			return nil
		},
	}
	imp.Flags().StringVar(&rootfs, "rootfs", "", "root filesystem directory to import")
	imp.Flags().StringVar(&tarFile, "tar", "", "tar file of a root filesystem to import")
	imp.Flags().StringVar(&tag, "tag", "", "name for the new image (name:tag for docker)")
	var asJSON bool
	list := &cobra.Command{
		Use:   "list [--json]",
		Short: "List the backend's images; * marks the configured one",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, im, err := a.imageManager(cmd.Context())
			if err != nil {
				return err
			}
			defer b.Close()
			images, err := im.Images(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				if images == nil {
					images = []sandbox.ImageInfo{}
				}
				return json.NewEncoder(a.stdout).Encode(images)
			}
			if len(images) == 0 {
				fmt.Fprintf(a.stdout, "%s has no images here; get one with `hermes-sandbox image pull REF` or `image import`\n", b.Name())
			}
			for _, im := range images {
				mark := " "
				if im.Configured {
					mark = "*"
				}
				fmt.Fprintf(a.stdout, "%s %s  %s  %.1f MB\n", mark, im.Ref, im.ID, float64(im.Size)/1e6)
			}
			return nil
		},
	}
	list.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.AddCommand(pull, imp, list, a.imageBuildCmd())
	return cmd
}

func (a *app) printImageResult(verb, backend string, info sandbox.ImageInfo) {
	if info.Configured {
		fmt.Fprintf(a.stdout, "%s %s (%s); the %s backend runs it already\n", verb, info.Ref, info.ID, backend)
		return
	}
	fmt.Fprintf(a.stdout, "%s %s (%s); use it with `hermes-sandbox config set %s.image %s`\n", verb, info.Ref, info.ID, backend, info.Ref)
}

// progress reports on stderr: progress bars on a terminal, plain lines otherwise.
func (a *app) progress() sandbox.Progress {
	p := sandbox.Progress{W: a.stderr}
	if f, ok := underlying(a.stderr).(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.Fd, p.Terminal = f.Fd(), true
	}
	return p
}

func (a *app) imageManager(ctx context.Context) (sandbox.Backend, sandbox.ImageManager, error) {
	b, err := a.backendWith(ctx, "images", func(b sandbox.Backend) bool { _, ok := b.(sandbox.ImageManager); return ok })
	if err != nil {
		return nil, nil, err
	}
	return b, b.(sandbox.ImageManager), nil
}

// backendWith builds the backend an image or gc command acts on: --sandbox, else the
// configured one; with nothing configured, the first built-in backend that has the ability.
// A backend without it is an error that names the backends with it.
func (a *app) backendWith(ctx context.Context, ability string, has func(sandbox.Backend) bool) (sandbox.Backend, error) {
	cfg, err := a.loadConfig()
	if err != nil {
		return nil, err
	}
	name := a.selectedName(cfg)
	if name == "" {
		for _, n := range sandbox.BuiltinNames {
			if !a.registry.Has(n) {
				continue
			}
			if b, err := a.registry.New(n, cfg, a.factoryOptions(cfg)); err == nil {
				if has(b) {
					return b, nil
				}
				b.Close()
			}
		}
		return nil, fmt.Errorf("no backend built into this binary has %s", ability)
	}
	if !sandbox.ValidName(name) {
		return nil, unknownBackend("", name)
	}
	var able []string
	for _, n := range a.registry.Names() {
		b, err := a.registry.New(n, cfg, a.factoryOptions(cfg))
		if err != nil {
			if n == name {
				return nil, err
			}
			continue
		}
		if has(b) {
			if n == name {
				return b, nil
			}
			able = append(able, n)
		}
		b.Close()
	}
	return nil, fmt.Errorf("backend %s has no %s (or is not built into this binary); backends that do: %s (choose one with --sandbox NAME)", name, ability, strings.Join(able, ", "))
}
