#!/usr/bin/env bash
# Proves on a Mac that the Seatbelt profile local sessions get confines commands: it runs
# backends/local's TestSeatbeltOnMac, which generates a profile and runs commands under
# /usr/bin/sandbox-exec -p PROFILE, and TestSeatbeltSessionOnMac, which opens local sessions
# as a Mac user gets them (the helper under sandbox-exec) and tries writes, reads and
# connections from inside. It makes and removes a directory
# ~/.hermes-sandbox-seatbelt-test-* (writes outside the temporary directories must be
# tried somewhere). Needs Go (1.26+) and a clone of this repository.
# Prints one PASS or FAIL line per check and exits non-zero on any FAIL.
set -uo pipefail
cd "$(dirname "$0")/.."
if [ "$(uname -s)" != Darwin ]; then
  echo "FAIL not macOS ($(uname -s)): run this on a Mac" >&2
  exit 2
fi
out=$(CGO_ENABLED=0 go test -count=1 -v -run '^TestSeatbelt(OnMac|SessionOnMac)$' ./backends/local/ 2>&1)
rc=$?
# Each check logs "PASS name" or "FAIL name: why".
printf '%s\n' "$out" | sed -n 's/^.*_darwin_test.go:[0-9]*: \(PASS .*\)$/\1/p; s/^.*_darwin_test.go:[0-9]*: \(FAIL .*\)$/\1/p'
if printf '%s\n' "$out" | grep -q -- '--- SKIP'; then
  printf '%s\n' "$out" | grep -A2 -- '--- SKIP'
  echo "FAIL the check was skipped"
  exit 1
fi
if [ $rc -ne 0 ]; then
  printf '%s\n' "$out" | tail -20
  echo "FAIL go test exited $rc"
  exit 1
fi
echo "PASS all Seatbelt checks"
