#!/usr/bin/env bash
# The GPU device kit's dry run (docs/gpu.md, "On a lent GPU"): tests/device/pack.sh packs this
# build (no rebuild) into a private temporary kit, compressed as it travels; tests/device/run.sh
# runs it here as it would on a lent GPU machine. The kit holds ddptop, both agents,
# ddptop-train, the NVML test double and every library they need that is not glibc's or
# CUDA's; run.sh unpacks it, every program resolves its libraries and starts (the agents answer
# facts), and each GPU part (the GPU tests, the benchmark and its PyTorch twin, bench_agree,
# the five end-to-end parts) says "no GPU: skipped (why)" instead of failing, and the run
# succeeds. A machine with a GPU does the same with DEVICE_DRYRUN=1. Without a kit run.sh says
# what to do, and the PyTorch twin (tests/bench/torch_twin.py) trains a tiny model on the CPU
# from the loss of knowing nothing, ln(256).
set -u
cd "$(dirname "$0")/.."
. tests/lib/tap.sh
B=${DDPTOP_BUILD:-$PWD/${BUILD:-build}}
T=$(mktemp -d /tmp/it_device_kit.XXXXXX)
cleanup() {
    for p in $(pgrep -f -- "$T/" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
    rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
PY=/usr/bin/python3
K=$T/kit
[ -x "$B/ddptop" ] || { tap_fail "ddptop is built ($B/ddptop: make all)"; tap_done; exit 1; }

# ---- pack: this build as it is, compressed fast ----
cuda=1
[ -x "$B/bench/bench_gpu" ] && [ -x "$B/tests/test_gpu_ops" ] || cuda=0   # a build without CUDA
if GPUKIT=$K BUILD=$(realpath -m --relative-to="$PWD" "$B") PACK_BUILD=0 PACK_CUDA=$cuda PACK_COMPRESS=fast \
        bash tests/device/pack.sh >"$T/pack.out" 2>&1; then
    tap_ok "pack.sh packs this build: $(tail -1 "$T/pack.out")"
else
    tap_fail "pack.sh packs this build" "$(cat "$T/pack.out")"; tap_done; exit 1
fi
missing=""
for p in build/ddptop build/ddptop-agent build/ddptop-agent-x86_64 build/ddptop-train build/fakenvml/libnvidia-ml.so.1; do
    grep -qx "prog $p" "$K/MANIFEST" && [ -e "$K/$p" ] || missing+=" $p"
done
if [ -z "$missing" ] && [ -f "$K/lib.tar.xz" ] && [ ! -e "$K/lib" ]; then
    tap_ok "the kit has ddptop, both agents, ddptop-train, the NVML test double; its libraries as lib.tar.xz"
else
    tap_fail "the kit has ddptop, both agents, ddptop-train, the NVML test double; lib.tar.xz" "missing:$missing" "$(ls -R "$K" | head -30)"
fi
bad=$(find "$K" \( -perm /077 \) -printf '%m %p\n' | head -5)
if [ "$(stat -c %a "$K")" = 700 ] && [ -z "$bad" ]; then tap_ok "the kit is private (0700, nothing open to others)"
else tap_fail "the kit is private" "$(stat -c '%a %n' "$K")" "$bad"; fi

# ---- run.sh, the dry run ----
dry=0
command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU' && dry=1
start=$SECONDS
GPUKIT=$K OUT=$T/out DEVICE_DRYRUN=$dry timeout 120 bash tests/device/run.sh >"$T/run.out" 2>&1
rc=$?
took=$((SECONDS - start))
S=$T/out/summary.txt
if [ $rc = 0 ] && grep -q '^device run: PASS' "$S" 2>/dev/null; then tap_ok "run.sh: the dry run succeeds ($took s)"
else tap_fail "run.sh: the dry run succeeds" "exit $rc" "$(tail -30 "$T/run.out")"; fi
# every library every program needs: packed (run.sh resolved them with the kit's where this
# machine lacks one), and the packed set is complete (each one ldd names that is not glibc's,
# libstdc++'s or CUDA's is in the kit)
if [ -d "$K/lib" ] && grep -q '^kit libraries: PASS' "$S"; then
    need=$(while read -r kind path; do [ "$kind" = prog ] && ldd "$K/$path" 2>/dev/null; done <"$K/MANIFEST" |
           awk '/=> \//{print $1}' | sort -u |
           grep -vE '^(libc|libm|libpthread|libdl|librt|libresolv|libutil|libstdc\+\+|libgcc_s)\.so|^ld-linux|^libcu|^libnccl|^libnvidia')
    absent=$(for l in $need; do [ -e "$K/lib/$l" ] || echo "$l"; done)
    if [ -z "$absent" ]; then tap_ok "run.sh unpacked the libraries; each one the programs need is in the kit ($(echo $need | wc -w))"
    else tap_fail "each library the programs need is in the kit" "not packed: $absent"; fi
else
    tap_fail "run.sh unpacked the libraries and resolved them" "$(grep '^kit libraries' "$S")" "$(ls "$K")"
fi
l=$(grep '^kit programs:' "$S")
if grep -q '^kit programs: PASS' <<<"$l" && grep -q 'ddptop-agent answers facts' <<<"$l" &&
   grep -q 'ddptop-agent-x86_64 answers facts' <<<"$l" && grep -q 'ddptop: ddptop ' <<<"$l"; then
    tap_ok "the kit's programs start: $l"
else
    tap_fail "the kit's programs start" "$l"
fi
why=$(grep -m1 -o 'no GPU: skipped (.*' "$S" | head -1)
n=$(grep -cE '^e2e \([a-e]\) .*: no GPU: skipped \(.+\)$' "$S")
if grep -qE '^tests: no GPU: skipped \(.+\)' "$S" && grep -qE '^bench: no GPU: skipped \(.+\)' "$S" &&
   grep -qE '^bench_agree: no GPU: skipped \(.+\)' "$S" && [ "$n" = 5 ]; then
    tap_ok "each GPU part says no GPU with the reason: tests, bench, bench_agree, e2e (a)-(e): $why"
else
    tap_fail "each GPU part says no GPU with the reason" "$n of 5 e2e parts" "$(cat "$S")"
fi
if grep -qE '^torch twin: skipped \(.+\)' "$T/out/bench-gpu.log"; then
    tap_ok "the benchmark says why the PyTorch twin was skipped: $(grep -m1 '^torch twin' "$T/out/bench-gpu.log")"
else
    tap_fail "the benchmark says why the PyTorch twin was skipped" "$(cat "$T/out/bench-gpu.log")"
fi
if ! grep -q 'FAIL' "$S"; then tap_ok "nothing in the summary failed"
else tap_fail "nothing in the summary failed" "$(grep FAIL "$S")"; fi

# ---- bad input: no kit, a kit directory that is not one ----
out=$(GPUKIT=$T/nokit OUT=$T/out2 bash tests/device/run.sh 2>&1)
rc=$?
if [ $rc = 2 ] && grep -q "run tests/device/pack.sh here first and carry .gpukit" <<<"$out"; then
    tap_ok "run.sh without a kit: exit 2, says to pack and carry it"
else
    tap_fail "run.sh without a kit: exit 2, says to pack and carry it" "exit $rc: $out"
fi
out=$(GPUKIT=/ PACK_BUILD=0 bash tests/device/pack.sh 2>&1)
rc=$?
if [ $rc = 2 ] && grep -q "is not a kit directory" <<<"$out"; then tap_ok "pack.sh refuses GPUKIT=/ (exit 2)"
else tap_fail "pack.sh refuses GPUKIT=/" "exit $rc: $out"; fi

# ---- the PyTorch twin on the CPU (tiny sizes): it trains, from ln(256) ----
if out=$($PY tests/bench/torch_twin.py --device cpu --hidden 32 --layers 2 --batch-size 16 --steps 4 --warmup 1 \
         --precision fp32 --label smoke 2>&1) &&
   $PY -c 'import json, math, sys
o = json.loads(sys.argv[1].splitlines()[-1])
assert o["label"] == "smoke" and o["device"] == "cpu" and o["steps"] == 4
assert abs(o["first_loss"] - math.log(256)) < 0.3, o["first_loss"]
assert math.isfinite(o["last_loss"]) and o["tokens_per_s"] > 0 and o["step_ms"] > 0' "$out" 2>"$T/twin.err"; then
    tap_ok "torch_twin.py --device cpu: 4 steps, first loss ln(256): $out"
else
    tap_fail "torch_twin.py --device cpu trains a tiny model" "$out" "$(cat "$T/twin.err")"
fi
out=$($PY tests/bench/torch_twin.py --device cpu --steps 5 --warmup 5 2>&1)
rc=$?
if [ $rc = 2 ] && grep -q -- '--warmup (5) must be below --steps (5)' <<<"$out"; then tap_ok "torch_twin.py: a bad --warmup is refused, said"
else tap_fail "torch_twin.py: a bad --warmup is refused" "exit $rc: $out"; fi
if $PY -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    tap_ok "torch_twin.py --device cuda: this torch has CUDA (the twin runs in tests/bench/gpu.sh)"
else
    out=$($PY tests/bench/torch_twin.py --device cuda --steps 2 --warmup 1 2>&1)
    rc=$?
    if [ $rc = 2 ] && grep -q 'sees no CUDA device' <<<"$out"; then tap_ok "torch_twin.py --device cuda without CUDA: exit 2, says so"
    else tap_fail "torch_twin.py --device cuda without CUDA: exit 2, says so" "exit $rc: $out"; fi
fi

if [ -z "$(pgrep -f -- "$T/")" ]; then tap_ok "no process of the test outlives it"
else tap_fail "no process of the test outlives it" "$(pgrep -af -- "$T/")"; fi
tap_done
