#!/usr/bin/env bash
# Builds a kube-apiserver from the Go module proxy (no Debian package has one) and caches it per
# machine, for the kubernetes backend's tests. Prints the binary's path.
#   scripts/kube-apiserver.sh [CACHE_DIR]   (default: $HERMES_KUBE_CACHE or /var/cache/hermes-sandbox)
# A wrapper module requires k8s.io/kubernetes and replaces each k8s.io/<staging> module (which
# kubernetes' own go.mod points at ./staging) with its v0.x release of the same minor.
set -euo pipefail
K8S_VERSION=v1.37.2
STAGING_VERSION=v0.37.2
cache=${1:-${HERMES_KUBE_CACHE:-/var/cache/hermes-sandbox}}
out=$cache/kube-apiserver-$K8S_VERSION
if [ -x "$out" ]; then echo "$out"; exit 0; fi
export PATH=/usr/local/go/bin:$PATH
mkdir -p "$cache"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
modfile=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')
{
  echo "module hermes-sandbox.local/kube-apiserver"
  echo
  sed -n 's/^go \(.*\)/go \1/p' "$modfile"
  echo
  echo "require k8s.io/kubernetes $K8S_VERSION"
  echo
  echo "replace ("
  sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/.*#\t\1 => \1 '"$STAGING_VERSION"'#p' "$modfile"
  echo ")"
} >go.mod
cat >main.go <<'GO'
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() { os.Exit(cli.Run(app.NewAPIServerCommand())) }
GO
echo "kube-apiserver.sh: building kube-apiserver $K8S_VERSION from the module proxy (about 9 minutes on 2 cores)" >&2
GOFLAGS=-mod=mod go mod tidy >&2
v=k8s.io/component-base/version
major=${K8S_VERSION#v}; minor=${major#*.}; major=${major%%.*}; minor=${minor%%.*}
CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X $v.gitVersion=$K8S_VERSION -X $v.gitMajor=$major -X $v.gitMinor=$minor -X $v.gitTreeState=clean" -o "$out.tmp" . >&2
mv "$out.tmp" "$out"
echo "$out"
