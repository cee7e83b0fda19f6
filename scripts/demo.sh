#!/usr/bin/env bash
# The main job on a fresh machine: show which backends work here, then run commands in a
# persistent sandbox session — docker, with a small image built from this machine's
# busybox-static when the engine answers (there may be no registry to pull from), else local.
# It uses a scratch config, so your own settings are left alone.
set -euo pipefail
cd "$(dirname "$0")/.."
hs=$PWD/bin/hermes-sandbox
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
export HERMES_SANDBOX_CONFIG=$scratch/config.yaml

$hs version
backend=local
if docker info >/dev/null 2>&1 && [ -x /bin/busybox ]; then
  image=hermes-demo/busybox:1
  if ! docker image inspect "$image" >/dev/null 2>&1; then
    rootfs=$scratch/rootfs
    mkdir -p "$rootfs/bin" "$rootfs/tmp" "$rootfs/etc"
    cp /bin/busybox "$rootfs/bin/busybox"
    for applet in $(/bin/busybox --list); do
      [ "$applet" = busybox ] || ln -sf busybox "$rootfs/bin/$applet"
    done
    echo "root:x:0:0:root:/root:/bin/sh" > "$rootfs/etc/passwd"
    $hs image import --rootfs "$rootfs" --tag "$image"
  fi
  $hs config set docker.image "$image"
  backend=docker
fi
$hs config set sandbox "$backend"
$hs doctor || true
echo
run() { echo "\$ hermes-sandbox $*"; $hs "$@"; }
run exec --session demo -c 'cd /tmp && export GREETING=hello'
run exec --session demo -c 'pwd; echo "$GREETING from $(uname -sm) as uid $(id -u)"'
if [ "$backend" = docker ]; then
  run exec --session demo -c 'grep -E "^(CapEff|NoNewPrivs)" /proc/self/status; ls /sys/class/net; touch /etc/x 2>&1 || true'
fi
run exec --session demo --timeout 1s -c 'sleep 30' || echo "(exit $? — the timeout killed the whole process tree)"
run policy check 'rm -rf /' || true
run sessions rm demo
