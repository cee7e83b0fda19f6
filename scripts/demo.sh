#!/usr/bin/env bash
# The main job on a fresh machine: show which backends work here, then run commands in a
# persistent session of the best one (docker when an engine and image are usable, else local).
set -euo pipefail
cd "$(dirname "$0")/.."
hs=./bin/hermes-sandbox
$hs version
$hs doctor || true
echo
echo '$ hermes-sandbox exec -c "cd /tmp && export GREETING=hello"'
$hs exec -c 'cd /tmp && export GREETING=hello'
echo '$ hermes-sandbox exec -c "pwd; echo \$GREETING from \$(uname -sm)"'
$hs exec -c 'pwd; echo $GREETING from $(uname -sm)'
echo '$ hermes-sandbox policy check "rm -rf /"'
$hs policy check 'rm -rf /' || true
