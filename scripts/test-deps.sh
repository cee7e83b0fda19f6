#!/usr/bin/env bash
# Installs what the tests need on a Debian machine: an OpenSSH server (the ssh backend's test
# peer) and busybox-static (the root filesystem of the docker tests' image). Tests that still
# miss something skip with the reason, unless HERMES_SANDBOX_TEST_REQUIRE names it.
set -euo pipefail
need=()
[ -x /usr/sbin/sshd ] || need+=(openssh-server)
[ -x /bin/busybox ] && /bin/busybox --list >/dev/null 2>&1 && ldd /bin/busybox 2>&1 | grep -q "not a dynamic" || need+=(busybox-static)
if [ ${#need[@]} -eq 0 ]; then exit 0; fi
if [ "$(id -u)" != 0 ]; then
  echo "test-deps: missing ${need[*]}; install them as root (apt-get install ${need[*]}) or the related tests skip" >&2
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
# The package starts a system sshd on port 22; the tests run their own on loopback ports.
