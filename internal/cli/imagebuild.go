package cli

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hermes-sandbox/hermes-sandbox/internal/imagebuild"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// cacheDir is $XDG_CACHE_HOME/hermes-sandbox/NAME, else ~/.cache/hermes-sandbox/NAME.
func (a *app) cacheDir(name string) string {
	if x := a.getenv("XDG_CACHE_HOME"); filepath.IsAbs(x) {
		return filepath.Join(x, "hermes-sandbox", name)
	}
	return filepath.Join(a.getenv("HOME"), ".cache", "hermes-sandbox", name)
}

// imageBuildCmd builds a real image (python3, git…) from Debian's packages, for machines with
// no container registry: debootstrap into a cached root filesystem, then an import.
func (a *app) imageBuildCmd() *cobra.Command {
	var suite, packages, tag, mirror string
	cmd := &cobra.Command{
		Use:   "build --debian SUITE [--packages P1,P2] --tag TAG",
		Short: "Build an image from Debian's packages (no registry needed)",
		Long: `Builds a minimal Debian root filesystem with debootstrap (--variant=minbase) from the Debian
archive this machine's apt uses, with the packages you name, and imports it as TAG into the selected backend (one that can import images, e.g. docker). The root
filesystem is cached in $XDG_CACHE_HOME/hermes-sandbox/images (~/.cache/…), keyed by suite,
packages, mirror and architecture, so building the same image again is quick. Needs root and debootstrap
(apt-get install debootstrap).`,
		Example: "  hermes-sandbox image build --debian bookworm --packages python3,git --tag hermes/python:3\n  hermes-sandbox config set docker.image hermes/python:3",
		Args:    exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if suite == "" || tag == "" {
				return usagef("image build: --debian SUITE and --tag TAG are required")
			}
			var pkgs []string
			for p := range strings.SplitSeq(packages, ",") {
				if p = strings.TrimSpace(p); p != "" {
					pkgs = append(pkgs, p)
				}
			}
			start := time.Now()
			fmt.Fprintf(a.stderr, "image build: Debian %s with %s …\n", suite, orNone(strings.Join(pkgs, ", ")))
			tarPath, cached, err := imagebuild.Build(cmd.Context(), imagebuild.Options{Suite: suite, Packages: pkgs, Mirror: mirror,
				CacheDir: a.cacheDir("images"), Progress: a.stderr})
			if err != nil {
				return err
			}
			if cached {
				fmt.Fprintf(a.stderr, "image build: root filesystem from the cache (%s)\n", tarPath)
			}
			b, im, err := a.imageManager(cmd.Context())
			if err != nil {
				return err
			}
			defer b.Close()
			info, err := im.ImportImage(cmd.Context(), sandbox.ImageSource{TarFile: tarPath, Tag: tag}, a.progress())
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stderr, "image build: done in %.0f s\n", time.Since(start).Seconds())
			a.printImageResult("built", b.Name(), info)
			return nil
		},
	}
	cmd.Flags().StringVar(&suite, "debian", "", "Debian suite: bookworm, trixie…")
	cmd.Flags().StringVar(&packages, "packages", "", "comma-separated packages to install (e.g. python3,git)")
	cmd.Flags().StringVar(&tag, "tag", "", "name:tag for the new image")
	cmd.Flags().StringVar(&mirror, "mirror", "", "Debian archive URL (default: the one apt uses here)")
	return cmd
}
