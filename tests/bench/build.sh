#!/usr/bin/env bash
# The build's cost of agents for every node (issue 27; docs/performance.md, "Agents for every
# node"): `make` from a fresh clone of this commit, side by side in one run,
#   - PORTABLE=0: one agent for this machine, linked against its own glibc (the build before
#     the portable agents, as near as the same tree gets),
#   - the default: the x86_64 and aarch64 agents against Debian 11's sysroot, cached,
#   - the same with an empty sysroot cache (the first build on a machine: Debian's archive),
# then `make dist` on the built tree. Serial make, as a user types it. The clones and the cold
# cache live in a temporary directory, removed at the end.
set -u
cd "$(dirname "$0")/../.." || exit 1
src=$PWD
t=$(mktemp -d /tmp/ddptop-bench-build.XXXXXX)
trap 'rm -rf "$t"' EXIT

secs() { # DIR LOG MAKE-ARGS...: a fresh clone of HEAD in DIR built with make ARGS; prints seconds
    local dir=$1 log=$2 t0 t1; shift 2
    git clone -q "$src" "$dir" || return 1
    t0=$(date +%s.%N)
    (cd "$dir" && make "$@") >"$log" 2>&1 || { echo "make $* failed: $(tail -5 "$log")" >&2; return 1; }
    t1=$(date +%s.%N)
    echo "$t0 $t1" | awk '{printf "%.1f", $2 - $1}'
}

echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), commit $(git rev-parse --short HEAD)"
# the cached sysroot must be there for the warm figure: one build makes it when missing
launcher/dist/sysroot.sh "/var/tmp/ddptop-build-$(id -u)" amd64 >/dev/null && launcher/dist/sysroot.sh "/var/tmp/ddptop-build-$(id -u)" arm64 >/dev/null && launcher/dist/sysroot.sh "/var/tmp/ddptop-build-$(id -u)" cjson >/dev/null || exit 1

old=$(secs "$t/old" "$t/old.log" PORTABLE=0) || exit 1
warm=$(secs "$t/warm" "$t/warm.log") || exit 1
cold=$(secs "$t/cold" "$t/cold.log" SYSROOT_CACHE="$t/cache") || exit 1
t0=$(date +%s.%N)
(cd "$t/warm" && make dist) >"$t/dist.log" 2>&1 || { echo "make dist failed: $(tail -5 "$t/dist.log")"; exit 1; }
dist=$(echo "$t0 $(date +%s.%N)" | awk '{printf "%.1f", $2 - $1}')

printf '%-58s %7s s\n' "make, PORTABLE=0 (this machine's agent only)" "$old"
printf '%-58s %7s s   %+.1f s\n' "make, agents for x86_64 and aarch64, sysroot cached" "$warm" "$(echo "$warm $old" | awk '{print $1 - $2}')"
printf '%-58s %7s s   %+.1f s\n' "make, agents for x86_64 and aarch64, empty sysroot cache" "$cold" "$(echo "$cold $old" | awk '{print $1 - $2}')"
printf '%-58s %7s s\n' "make dist after make (both tarballs)" "$dist"
for f in "$t"/warm/build/dist/*.tar.gz; do printf '  %s  %s\n' "$(basename "$f")" "$(du -h "$f" | cut -f1)"; done
printf 'ratio make (cached) / make PORTABLE=0: %.2fx; empty cache: %.2fx\n' \
    "$(echo "$warm $old" | awk '{print $1 / $2}')" "$(echo "$cold $old" | awk '{print $1 / $2}')"
