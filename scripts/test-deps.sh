#!/usr/bin/env bash
# Installs what the tests need on a Debian machine: an OpenSSH server (the ssh backend's test
# peer), busybox-static (the root filesystem of the docker tests' image), python3 and an
# unprivileged user for the local backend's probe suite, etcd-server and a
# kube-apiserver built by scripts/kube-apiserver.sh (the kubernetes backend's test cluster,
# internal/testenv/kubeapi), runsc (gVisor, registered with the running Docker engine) and
# podman (its Docker-compatible service on a socket of its own, and a rootless one of the
# unprivileged user hermes-rootless), for the docker backend's runs under other runtimes and
# engines. Tests that still miss something skip with the
# reason, unless HERMES_SANDBOX_TEST_REQUIRE names it.
set -euo pipefail
need=()
[ -x /usr/sbin/sshd ] || need+=(openssh-server)
[ -x /bin/busybox ] && /bin/busybox --list >/dev/null 2>&1 && ldd /bin/busybox 2>&1 | grep -q "not a dynamic" || need+=(busybox-static)
[ -x /usr/bin/etcd ] || need+=(etcd-server)
command -v python3 >/dev/null || need+=(python3) # the local backend's probe suite
[ -x /usr/bin/runsc ] || need+=(runsc)
[ -x /usr/bin/podman ] || need+=(podman)
[ -x /usr/bin/newuidmap ] || need+=(uidmap) # rootless Podman's user namespace
command -v curl >/dev/null || need+=(curl) # to ask the podman service whether it answers
kube_apiserver=${HERMES_KUBE_APISERVER:-${HERMES_KUBE_CACHE:-/var/cache/hermes-sandbox}/kube-apiserver-v1.37.2}
if [ "$(id -u)" != 0 ]; then
  if [ ${#need[@]} -gt 0 ]; then
    echo "test-deps: missing ${need[*]}; install them as root (apt-get install ${need[*]}) or the related tests skip" >&2
  fi
  if [ ! -x "$kube_apiserver" ]; then
    echo "test-deps: no kube-apiserver at $kube_apiserver; build it with scripts/kube-apiserver.sh (as root, or with HERMES_KUBE_CACHE set to a directory you own) or the kubernetes tests skip" >&2
  fi
  exit 0
fi
if [ ${#need[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  # The package starts a system sshd on port 22; the tests run their own on loopback ports.
  # etcd-server starts a system etcd on 127.0.0.1:2379; the tests run their own on free loopback
  # ports, so stop it and keep it from starting at boot.
  if [[ " ${need[*]} " == *" etcd-server "* ]]; then
    (systemctl disable --now etcd || { service etcd stop; update-rc.d etcd disable; }) >/dev/null 2>&1 || true
  fi
fi
# The local backend's probe suite runs again as an unprivileged user (backends/local/probe_test.go).
id -u hermes-sandbox-test >/dev/null 2>&1 || useradd --system --create-home --shell /usr/sbin/nologin hermes-sandbox-test
# Built from the Go module proxy once per machine (about 9 minutes), then cached.
[ -x "$kube_apiserver" ] || "$(dirname "$0")/kube-apiserver.sh" >/dev/null

# gVisor: register runsc with the running engine without restarting it (daemon.json, then
# SIGHUP, which reloads runtimes). Other daemon.json keys are kept. ptrace works without KVM;
# --network=none because sessions run with network mode none (their only way out is the
# egress relay over the helper's exec stream).
if command -v docker >/dev/null && ! docker info --format '{{json .Runtimes}}' 2>/dev/null | grep -q '"runsc"'; then
  python3 - <<'PY'
import json, os
p = "/etc/docker/daemon.json"
d = json.load(open(p)) if os.path.exists(p) and os.path.getsize(p) > 0 else {}
d.setdefault("runtimes", {})["runsc"] = {"path": "/usr/bin/runsc", "runtimeArgs": ["--platform=ptrace", "--network=none"]}
os.makedirs(os.path.dirname(p), exist_ok=True)
with open(p + ".tmp", "w") as f:
    json.dump(d, f, indent=2)
    f.write("\n")
os.replace(p + ".tmp", p)
PY
  kill -HUP "$(pidof dockerd)" 2>/dev/null || true
  for _ in $(seq 1 20); do docker info --format '{{json .Runtimes}}' 2>/dev/null | grep -q '"runsc"' && break; sleep 0.5; done
fi
# Podman: its Docker-compatible service on a socket of its own (the tests'
# HERMES_SANDBOX_TEST_PODMAN_SOCKET), separate from Docker's storage.
podman_sock=/run/hermes-podman/podman.sock
podman_up() { curl -sf --unix-socket "$podman_sock" http://d/_ping >/dev/null 2>&1; }
if command -v podman >/dev/null && ! podman_up; then
  mkdir -p "$(dirname "$podman_sock")"
  rm -f "$podman_sock"
  nohup podman system service --time=0 "unix://$podman_sock" >/var/log/hermes-podman.log 2>&1 &
  for _ in $(seq 1 40); do podman_up && break; sleep 0.25; done
  podman_up || echo "test-deps: podman system service did not answer on $podman_sock (see /var/log/hermes-podman.log)" >&2
fi
# Rootless Podman: the same service run by an unprivileged user (the tests'
# HERMES_SANDBOX_TEST_PODMAN_ROOTLESS_SOCKET), in its own runtime directory; useradd gives the
# user its subordinate ids (/etc/subuid, /etc/subgid) and uidmap maps them. Its containers
# have network mode none, so slirp4netns is not needed.
rl_user=hermes-rootless
if command -v podman >/dev/null && [ -x /usr/bin/newuidmap ]; then
  id -u "$rl_user" >/dev/null 2>&1 || useradd --create-home --shell /usr/sbin/nologin "$rl_user"
  rl_uid=$(id -u "$rl_user")
  rl_run=/run/user/$rl_uid
  rl_sock=$rl_run/podman/podman.sock
  rl_up() { curl -sf --unix-socket "$rl_sock" http://d/_ping >/dev/null 2>&1; }
  if ! rl_up; then
    install -d -o "$rl_user" -g "$rl_user" -m 700 "$rl_run"
    install -d -o "$rl_user" -g "$rl_user" -m 755 "$rl_run/podman"
    rm -f "$rl_sock"
    # Every descriptor of the background job goes to the log: a shell left holding this script's
    # stdout would keep a caller that reads it to the end (make, CI) waiting for ever.
    (cd / && exec nohup runuser -u "$rl_user" -- env HOME="$(getent passwd "$rl_user" | cut -d: -f6)" XDG_RUNTIME_DIR="$rl_run" \
      podman system service --time=0 "unix://$rl_sock") </dev/null >/var/log/hermes-podman-rootless.log 2>&1 &
    for _ in $(seq 1 40); do rl_up && break; sleep 0.25; done
    rl_up || echo "test-deps: rootless podman system service did not answer on $rl_sock (see /var/log/hermes-podman-rootless.log)" >&2
  fi
fi
