package cli

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/hermes-sandbox/hermes-sandbox/backends/docker"
)

// imageCmd manages docker images: pull from a registry, or import a root filesystem on an
// air-gapped machine.
func (a *app) imageCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "image", Short: "Get an image for the docker backend (pull REF, import --rootfs DIR|--tar FILE --tag T)"}
	pull := &cobra.Command{
		Use:   "pull REF",
		Short: "Pull an image from its registry, showing progress",
		Long: `Pulls REF through the Docker Engine API, with a progress display on a terminal and plain
lines otherwise. Credentials stored inline in ~/.docker/config.json are used. Then point the
docker backend at it with 'hermes-sandbox config set docker.image REF'.`,
		Example: "  hermes-sandbox image pull python:3.12-slim",
		Args:    exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := a.dockerBackend()
			if err != nil {
				return err
			}
			defer b.Close()
			out := docker.Output{W: a.stderr}
			if f, ok := a.stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
				out.Fd, out.IsTerminal = f.Fd(), true
			}
			if err := b.Pull(cmd.Context(), args[0], out); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "pulled %s; use it with `hermes-sandbox config set docker.image %s`\n", args[0], args[0])
			return nil
		},
	}
	var rootfs, tarFile, tag string
	imp := &cobra.Command{
		Use:   "import (--rootfs DIR | --tar FILE) --tag TAG",
		Short: "Make an image from a root filesystem, for machines without a registry",
		Long: `Imports a root filesystem as an image through the Docker Engine API: a directory (for
example made by 'debootstrap --variant=minbase bookworm DIR' or a busybox tree) or a tar file
(plain or compressed). The image gets ENV PATH and CMD ["/bin/sh"], which a bare root
filesystem lacks. Then point the docker backend at it with
'hermes-sandbox config set docker.image TAG'.`,
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
			b, err := a.dockerBackend()
			if err != nil {
				return err
			}
			defer b.Close()
			id, err := b.Import(cmd.Context(), docker.ImportSource{RootfsDir: rootfs, TarFile: tarFile}, tag, nil)
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "imported %s (%s); use it with `hermes-sandbox config set docker.image %s`\n", tag, id, tag)
			return nil
		},
	}
	imp.Flags().StringVar(&rootfs, "rootfs", "", "root filesystem directory to import")
	imp.Flags().StringVar(&tarFile, "tar", "", "tar file of a root filesystem to import")
	imp.Flags().StringVar(&tag, "tag", "", "name:tag for the new image")
	cmd.AddCommand(pull, imp, a.imageBuildCmd())
	return cmd
}

// dockerBackend builds the docker backend from the configuration, whatever backend is
// selected: images and gc are docker's business.
func (a *app) dockerBackend() (*docker.Backend, error) {
	cfg, err := a.loadConfig()
	if err != nil {
		return nil, err
	}
	return docker.NewWith(a.factoryOptions(cfg), docker.Options{})
}
