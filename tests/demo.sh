#!/usr/bin/env bash
# What `make demo` runs: the embedded default, as a newcomer would start it. ddptop with no
# hostfile trains ddptop-train on 2 local CPU ranks and opens the dashboard (on a terminal;
# otherwise it prints the lines headless). Logs go to a throwaway directory. Press q to leave.
# `make demo-check` shows `ddptop check` against two throwaway local sshd hosts instead.
set -u
cd "$(dirname "$0")/.."
DDPTOP_BUILD=${DDPTOP_BUILD:-$PWD/${BUILD:-build}}
logs=$(mktemp -d /tmp/ddptop-demo.XXXXXX)
trap 'rm -rf "$logs"' EXIT
echo "demo: ddptop-train on 2 local CPU ranks under the dashboard (q quits; logs in $logs)"
"$DDPTOP_BUILD/ddptop" --log-dir "$logs" "$@"
rc=$?
echo "demo: ddptop exited with status $rc"
exit $rc
