#!/usr/bin/env bash
# The main job (`make run`): on a fresh machine, get what the demo needs, show which backends
# work here, then run the README's examples in a persistent docker session whose image has
# python3 and git — built from Debian's packages, since there may be no registry to pull from.
# Without a Docker engine (or without root to build the image) it says why and chooses local.
#
# It touches none of your settings or history: config, state and audit log live in a scratch
# directory that is removed at the end. What stays is said at the end: the image (reused by the
# next run) and the cached root filesystem it came from.
set -euo pipefail
cd "$(dirname "$0")/.."
hs=$PWD/bin/hermes-sandbox
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
export HERMES_SANDBOX_CONFIG=$scratch/config.yaml XDG_STATE_HOME=$scratch/state \
  HERMES_SANDBOX_AUDIT_LOG_DESTINATION=$scratch/audit.log
image=hermes-sandbox/python:3
say() { printf '\n== %s\n' "$*"; }

# show prints a command so it can be pasted back into a shell, then runs it.
quote() {
  local out="" a
  for a in "$@"; do
    if [[ $a =~ ^[A-Za-z0-9_./:=@%+,-]+$ ]]; then out+=" $a"; else out+=" '${a//\'/\'\\\'\'}'"; fi
  done
  printf '%s' "${out# }"
}
show() { printf '$ hermes-sandbox %s\n' "$(quote "$@")"; "$hs" "$@"; }

# image_id prints the id of $image ("" when it or the docker CLI is missing).
image_id() {
  command -v docker >/dev/null 2>&1 || return 0
  docker image inspect -f '{{.Id}}' "$image" 2>/dev/null || true
}
short() { local s=${1#sha256:}; printf %s "${s:0:12}"; }
# drop_replaced removes the previous build of $image when the new one took its tag. An image a
# container still uses stays (docker refuses), and the message says how to remove it later.
drop_replaced() {
  local old=$1 new
  new=$(image_id)
  if [ -z "$old" ] || [ -z "$new" ] || [ "$old" = "$new" ]; then return 0; fi
  if docker image rm "$old" >/dev/null 2>&1; then
    echo "(removed the previous build of $image, $(short "$old"): nothing names it any more)"
  else
    echo "(the previous build of $image, $(short "$old"), is still used by a container; remove it later with: docker image rm $old)" >&2
  fi
}

"$hs" version
backend=local
engine=no
if [ -S /var/run/docker.sock ] || [ -n "${DOCKER_HOST:-}" ]; then engine=yes; fi
if [ "$engine" = yes ]; then
  if ! command -v debootstrap >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ]; then
      say "Installing debootstrap (builds the image from Debian's packages)"
      export DEBIAN_FRONTEND=noninteractive
      apt-get update -qq && apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
    else
      echo "debootstrap is missing and this is not root: run 'sudo apt-get install debootstrap', then make run again" >&2
    fi
  fi
  if command -v debootstrap >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    say "Building $image from Debian bookworm with python3 and git (cached after the first time)"
    # A rebuild gets a new id under the same tag; the build it replaces is removed below, so
    # re-running make run leaves no dangling image behind.
    old_id=$(image_id)
    if show image build --debian bookworm --packages python3,git --tag "$image"; then
      drop_replaced "$old_id"
      backend=docker
    else
      echo "(the image build failed; the demo goes on with the local backend)" >&2
    fi
  elif [ "$(id -u)" != 0 ]; then
    echo "building an image needs root; the demo goes on with the local backend" >&2
  fi
else
  echo "no Docker engine answers here; the demo goes on with the local backend" >&2
fi
if [ "$backend" = local ]; then
  # auto never picks local (it runs commands unisolated on this host): the demo chooses it.
  "$hs" config set sandbox local 2>/dev/null
fi
# With docker nothing is configured: auto picks docker, and docker runs the image just built
# while docker.image is unset and its default (python:3.12-slim, from a registry) is missing,
# as your own first command will.

say "What works on this machine"
"$hs" doctor || true

say "The README's examples, in a $backend session"
show exec --session demo -c 'cd /tmp && export GREETING=hello'
show exec --session demo -c 'pwd; echo "$GREETING from $(uname -sm) as uid $(id -u)"'
show exec --session demo --timeout 10s -- python3 -c 'print(42)' || true
show exec --session demo --json -c 'ls / | head -3'
if [ "$backend" = docker ]; then
  show exec --session demo -c 'grep -E "^(CapEff|NoNewPrivs)" /proc/self/status; ls /sys/class/net; touch /etc/x 2>&1 || true'
fi
show exec --session demo --timeout 1s -c 'sleep 30' || echo "(exit $? — the timeout killed the whole process tree)"
show policy check 'rm -rf /' || true
show audit show --session demo || true
show sessions rm demo

say "Left behind"
if [ "$backend" = docker ]; then
  echo "- the image $image, so the next run starts at once (remove it with: docker image rm $image)"
  echo "- its root filesystem, cached in ${XDG_CACHE_HOME:-$HOME/.cache}/hermes-sandbox/images"
  echo "Use it yourself: with nothing configured, 'bin/hermes-sandbox exec -- python3 -c \"print(42)\"' runs in it"
  echo "(docker is used, and this image stands in for the missing default docker.image python:3.12-slim)."
  echo "Make it the default for good: hermes-sandbox config set sandbox docker && hermes-sandbox config set docker.image $image"
else
  echo "- nothing (config, state and audit log were in $scratch, now removed)"
fi
