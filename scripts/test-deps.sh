#!/usr/bin/env bash
# Installs what the tests need on a Debian machine: an OpenSSH server (the ssh backend's test
# peer), busybox-static (the root filesystem of the docker tests' image), python3 and an
# unprivileged user for the local backend's probe suite, etcd-server and a
# kube-apiserver built by scripts/kube-apiserver.sh (the kubernetes backend's test cluster,
# internal/testenv/kubeapi). Tests that still miss something skip with the reason, unless
# HERMES_SANDBOX_TEST_REQUIRE names it.
set -euo pipefail
need=()
[ -x /usr/sbin/sshd ] || need+=(openssh-server)
[ -x /bin/busybox ] && /bin/busybox --list >/dev/null 2>&1 && ldd /bin/busybox 2>&1 | grep -q "not a dynamic" || need+=(busybox-static)
[ -x /usr/bin/etcd ] || need+=(etcd-server)
command -v python3 >/dev/null || need+=(python3) # the local backend's probe suite
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
