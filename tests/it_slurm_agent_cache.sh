#!/usr/bin/env bash
# Integration: the agent's copy by hash under srun, on a real Slurm cluster (tests/lib/slurm.sh;
# the build directory is no shared file system, so the first run copies the agent with --bcast).
# The agents started from that copy keep one as /tmp/ddptop-UID/bin/ddptop-agent-SHA256; the
# next run in the same allocation does not copy (no --bcast: a wrapper runs the kept copy after
# checking it). A kept copy that is not exactly the agent (changed bytes), that others could
# have written (group-writable), that is another user's, or that is a link, is never run: that
# run starts its agents again with --bcast, and succeeds.
set -u
cd "$(dirname "$0")/.."
. tests/lib/tap.sh
. tests/lib/slurm.sh
KEPT=""
cleanup() {
    # only the copy of this build's hash: other tests' agents may share the directory
    [ -n "$KEPT" ] && rm -f "$KEPT" "$KEPT.planted" "$(dirname "$KEPT")"/../srun-*"${HASH:0:16}" \
        "$(dirname "$KEPT")"/ddptop-agent-f0f0f0f0*
    slurm_down
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

DDP=$PWD/${BUILD:-build}/ddptop
AGENT=$PWD/${BUILD:-build}/ddptop-agent
export NO_COLOR=1 CUDA_VISIBLE_DEVICES=
HASH=$(sha256sum <"$AGENT" | cut -d' ' -f1)
KEPT=/tmp/ddptop-$(id -u)/bin/ddptop-agent-$HASH
rm -f "$KEPT" /tmp/ddptop-$(id -u)/srun-*"${HASH:0:16}"   # notes of other test clusters (same job ids)
# Copies of older builds, 1 to 5 days old: a node keeps the 4 newest copies only
mkdir -p -m 700 "/tmp/ddptop-$(id -u)/bin"
for k in 1 2 3 4 5; do
    old="/tmp/ddptop-$(id -u)/bin/ddptop-agent-f0f0f0f0$(printf '%056d' "$k")"
    printf 'old build %s\n' "$k" >"$old" && chmod 700 "$old" && touch -d "$k days ago" "$old"
done
slurm_up_or_end 2
D=$SLURM_DIR
cd "$D"
chmod 755 "$D"

# The runs, one after another in ONE allocation; between them the script changes the kept copy
# as the step named STEP says (inner.sh runs on the login node, inside salloc).
cat >inner.sh <<EOF
#!/usr/bin/env bash
run() { "$DDP" run --slurm --headless --no-check -v --log-dir "$D/logs" --run-id "\$1" -- hostname >"$D/\$1.out" 2>&1
        echo "rc=\$?" >>"$D/\$1.out"; }
run first
run second
printf x >>"$KEPT"                                 # the bytes changed: the hash differs
run tampered
run again
chmod g+w "$KEPT"                                  # group-writable: someone else may have written it
run groupw
chown 65534:65534 "$KEPT"                          # another user's file (the right bytes)
run otheruid
mv "$KEPT" "$KEPT.planted"; ln -s "$KEPT.planted" "$KEPT"   # a link to the right bytes
run link
rm -f "$KEPT.planted" "$KEPT"                      # none at all
run last
EOF
chmod 755 inner.sh
slurm_login salloc -N2 bash "$D/inner.sh" >salloc.out 2>&1

bcast() { grep -q -- '--bcast=/tmp/ddptop-agent\.' "$1.out"; }
wrapped() { grep -q -- "ddptop-agent $HASH --relay" "$1.out"; }
# alog RUN: the agents' log of that run (srun's messages and ddptop's notes on the step)
alog() { find "$D/logs" -path "*$1*" -name agent.log -exec cat {} + 2>/dev/null; }
fellback() { alog "$1" | grep -q "no usable copy of the agent: the agents' step starts again with srun --bcast"; }

if grep -q '^rc=0$' first.out && bcast first && ! fellback first; then
    tap_ok "first run of the allocation: copied with --bcast"
else
    tap_fail "first run: copied with --bcast" "$(tail -5 first.out)"
fi
if grep -q '^rc=0$' second.out && ! bcast second && wrapped second; then
    tap_ok "second run in the same allocation: no --bcast, the nodes' kept copy runs"
else
    tap_fail "second run: no --bcast" "$(grep -o 'agents: .*' second.out | cut -c1-300)" "$(tail -5 second.out)"
fi
for r in tampered groupw otheruid link; do
    if grep -q '^rc=0$' "$r.out" && wrapped "$r" && fellback "$r"; then
        tap_ok "kept copy '$r': not run; the run starts again with --bcast and succeeds"
    else
        tap_fail "kept copy '$r': falls back to --bcast" "$(tail -5 "$r.out")" \
            "$(alog "$r" | tail -5)"
    fi
done
if grep -q '^rc=0$' again.out && ! bcast again && wrapped again && ! fellback again; then
    tap_ok "after the fallback the nodes hold the right copy again: the next run does not copy"
else
    tap_fail "after the fallback the next run does not copy" "$(tail -5 again.out)"
fi
if grep -q '^rc=0$' last.out && fellback last; then
    tap_ok "the kept copy removed: the run still succeeds"
else
    tap_fail "the kept copy removed: the run succeeds" "$(tail -5 last.out)"
fi
if [ -f "$KEPT" ] && [ ! -L "$KEPT" ] && [ "$(stat -c '%a %u' "$KEPT")" = "700 $(id -u)" ] &&
   [ "$(stat -c '%a' "$(dirname "$KEPT")")" = 700 ] && [ "$(sha256sum <"$KEPT" | cut -d' ' -f1)" = "$HASH" ]; then
    tap_ok "the kept copy: 0700, ours, in a 0700 directory, the agent's bytes"
else
    tap_fail "the kept copy: 0700, ours, the agent's bytes" "$(ls -la "$(dirname "$KEPT")" 2>&1)"
fi
n=$(find "$(dirname "$KEPT")" -maxdepth 1 -name 'ddptop-agent-*' -type f | wc -l)
if [ "$n" -le 4 ] && [ ! -e "$(dirname "$KEPT")/ddptop-agent-f0f0f0f0$(printf '%056d' 5)" ]; then
    tap_ok "older copies pruned: $n copies left (at most the 4 newest), the 5-day-old one gone"
else
    tap_fail "older copies pruned to the 4 newest" "$(ls -la "$(dirname "$KEPT")" 2>&1)"
fi

tap_done
