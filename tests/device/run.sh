#!/usr/bin/env bash
# Runs on a lent GPU machine, in a copy of the working tree with .gpukit carried
# (tests/device/pack.sh made it), in one call: the kit itself (every program finds its
# libraries and starts), the GPU tests (make test-gpu's set), the GPU benchmark with its
# PyTorch twin (make bench-gpu's script), the measured preflight's GPU figures against the
# benchmark's (tests/device/bench_agree.sh: within 20%), and ddptop end to end on the GPU
# (tests/device/e2e.sh: the agent against NVML, a run of ddptop-train, a PyTorch NCCL job, a
# CUDA OOM's root cause, the dashboard's GPU columns). Each part prints PASS, FAIL or
# "no GPU: skipped (why)", also into $OUT/summary.txt; logs go to $OUT (the device tool brings
# back 8 files: machine.txt, summary.txt, test-gpu.log, test-logs.tgz, bench-gpu.log with
# bench_agree's, e2e.log, e2e.tgz) and the end of each to stdout. TESTS=0, BENCH=0, E2E=0 skip a part; DEVICE_TESTS the tests' names (default '*gpu_*'); BENCH_STEPS (100 here) the benchmark's
# steps. Without a GPU (here, tests/it_device_kit.sh's dry run) every GPU part says so and the
# run succeeds when the kit's own checks pass; DEVICE_DRYRUN=1 makes a machine with a GPU do
# the same. GPUKIT: the kit (default .gpukit).
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
K=$(realpath -m "${GPUKIT:-.gpukit}")
[ -x "$K/build/ddptop-train" ] && [ -f "$K/MANIFEST" ] ||
    { echo "run: $K missing or not a kit: run tests/device/pack.sh here first and carry .gpukit"; exit 2; }
START=$SECONDS
if [ ! -d "$K/lib" ] && [ -f "$K/lib.tar.xz" ]; then   # pack.sh's, compressed to travel
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$K/lib.tar.xz" "$K" ||
        { echo "run: cannot unpack $K/lib.tar.xz"; exit 2; }
fi
ORIG_LD=${LD_LIBRARY_PATH:-}
# The kit's libraries that this machine lacks (by name: one it has is its own, built for it).
USE=$K/lib.use
rm -rf "$USE"
mkdir -p -m 700 "$USE"
have=$(ldconfig -p 2>/dev/null | awk '{print $1}')
n_used=0
for l in "$K"/lib/*; do
    [ -e "$l" ] || continue
    grep -qxF "${l##*/}" <<<"$have" && continue
    ln -s "$l" "$USE/${l##*/}"
    n_used=$((n_used + 1))
done
# CUDA's libraries from the machine: the toolkit's first, then the pip wheels of its Python
# (nvidia/*/lib: cuBLAS, the runtime, NCCL), which is where its image may keep NCCL
pip_libs=$(python3 -c 'import glob, nvidia, os
print(":".join(sorted(glob.glob(os.path.join(list(nvidia.__path__)[0], "*", "lib")))))' 2>/dev/null)
export LD_LIBRARY_PATH=$USE:/usr/local/cuda/lib64${pip_libs:+:$pip_libs}${ORIG_LD:+:$ORIG_LD}
export DDPTOP_KIT_ORIG_LD=$ORIG_LD     # e2e.sh gives PyTorch's ranks the machine's own
if [ -x "$K/bin/tmux" ] && ! command -v tmux >/dev/null; then
    export PATH=$PATH:$K/bin TERMINFO_DIRS=$K/terminfo${TERMINFO_DIRS:+:$TERMINFO_DIRS}
fi
BUILD=$(realpath -m --relative-to="$PWD" "$K/build")
export BUILD DDPTOP_BUILD=$K/build DDPTOP_KIT=$K OUT
rc=0
W=$(mktemp -d /tmp/ddptop-device.XXXXXX)
trap 'rm -rf "$W"' EXIT
say() { echo "$*" | tee -a "$OUT/summary.txt"; }
: >"$OUT/summary.txt"

# ---- the machine and its GPUs ----
if [ "${DEVICE_DRYRUN:-0}" = 1 ]; then
    export DDPTOP_NO_GPU="a dry run (DEVICE_DRYRUN=1)"
elif ! command -v nvidia-smi >/dev/null; then
    export DDPTOP_NO_GPU="nvidia-smi not found"
elif ! n=$(nvidia-smi -L 2>&1); then
    export DDPTOP_NO_GPU="nvidia-smi -L: $(head -1 <<<"$n")"
elif [ "$(grep -c '^GPU' <<<"$n")" = 0 ]; then
    export DDPTOP_NO_GPU="nvidia-smi lists no GPU"
else
    export DDPTOP_NO_GPU="" DDPTOP_GPUS=$(grep -c '^GPU' <<<"$n")
fi
{
    date -u '+date: %Y-%m-%d %H:%M UTC'
    head -1 "$K/MANIFEST"
    if [ -z "$DDPTOP_NO_GPU" ]; then
        nvidia-smi --query-gpu=index,name,memory.total,driver_version,clocks.max.sm --format=csv,noheader
    else
        echo "no GPU: $DDPTOP_NO_GPU"
    fi
    python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())' 2>&1 | tail -1
    ldd "$K/build/ddptop-train" | grep -E 'cublas|nccl|cudart|openblas'
    echo "kit libraries used (the machine lacks them): $(ls "$USE" | tr '\n' ' ')"
} 2>&1 | tee "$OUT/machine.txt"

# ---- the kit: every program finds its libraries and starts ----
missing=""
while read -r kind path _; do
    [ "$kind" = prog ] || continue
    m=$(ldd "$K/$path" 2>&1 | grep 'not found' | sed "s|^|$path: |")
    [ -n "$m" ] && missing+="$m"$'\n'
done <"$K/MANIFEST"
if [ -z "$missing" ]; then
    say "kit libraries: PASS (every program resolves every library; $n_used of the kit's $(ls "$K/lib" | wc -l) used, the rest are this machine's)"
else
    say "kit libraries: FAIL (LD_LIBRARY_PATH=$LD_LIBRARY_PATH):"
    say "$missing"
    exit 2
fi
B=$K/build
seen=""
v=$("$B/ddptop" --version 2>&1 | head -1) && seen+="ddptop: $v; " || { rc=1; seen+="ddptop --version failed: $v; "; }
"$B/ddptop-train" --help >/dev/null 2>&1 && seen+="ddptop-train --help ok; " || { rc=1; seen+="ddptop-train --help failed; "; }
for a in ddptop-agent ddptop-agent-x86_64; do
    f=$(echo '{"op":"facts","id":1}' | timeout 90 "$B/$a" 2>&1 | grep -m1 '"ev":"facts"')
    if [ -n "$f" ]; then seen+="$a answers facts (os $(sed -n 's/.*"os":"\([^"]*\)".*/\1/p' <<<"$f")); "
    else rc=1; seen+="$a gave no facts; "; fi
done
if command -v tmux >/dev/null; then seen+="$(tmux -V) ($(command -v tmux))"; else seen+="no tmux"; fi
if [ $rc = 0 ]; then say "kit programs: PASS ($seen)"; else say "kit programs: FAIL ($seen)"; fi

# ---- the GPU tests ----
if [ "${TESTS:-1}" != 0 ]; then
    if [ -n "$DDPTOP_NO_GPU" ]; then
        say "tests: no GPU: skipped ($DDPTOP_NO_GPU)"
    else
        t0=$SECONDS
        DDPTOP_TEST_TIMEOUT=300 bash tests/run.sh ${DEVICE_TESTS:-'*gpu_*'} >"$OUT/test-gpu.log" 2>&1 && r=PASS || { r=FAIL; rc=1; }
        tar czf "$OUT/test-logs.tgz" -C "$B" test-logs 2>/dev/null   # one file, not many
        tail -25 "$OUT/test-gpu.log"
        say "tests: $r ($(tail -1 "$OUT/test-gpu.log"); $((SECONDS - t0)) s)"
    fi
fi
# ---- the benchmark and its PyTorch twin, the preflight's figures against it ----
if [ "${BENCH:-1}" != 0 ]; then
    t0=$SECONDS
    BENCH_STEPS=${BENCH_STEPS:-100} bash tests/bench/gpu.sh >"$OUT/bench-gpu.log" 2>&1 && r=PASS || { r=FAIL; rc=1; }
    cat "$OUT/bench-gpu.log"
    case $(head -1 "$OUT/bench-gpu.log") in "no GPU: skipped"*) r="$(head -1 "$OUT/bench-gpu.log")" ;; esac
    say "bench: $r ($((SECONDS - t0)) s)"
    bash tests/device/bench_agree.sh >"$W/agree.log" 2>&1 && r=PASS || { r=FAIL; rc=1; }
    { echo "== bench_agree"; cat "$W/agree.log"; } | tee -a "$OUT/bench-gpu.log"   # 8 files come back
    case $(tail -1 "$W/agree.log") in "no GPU: skipped"*) r="$(tail -1 "$W/agree.log")" ;; esac
    say "bench_agree: $r"
fi
# ---- ddptop end to end on the GPU ----
if [ "${E2E:-1}" != 0 ]; then
    bash tests/device/e2e.sh >"$OUT/e2e.log" 2>&1 || rc=1
    grep -E '^e2e ' "$OUT/e2e.log" | tee -a "$OUT/summary.txt"
    grep -qE '^e2e ' "$OUT/e2e.log" || { say "e2e: FAIL (no result; see e2e.log)"; tail -20 "$OUT/e2e.log"; rc=1; }
fi
say "device run: $([ $rc = 0 ] && echo PASS || echo FAIL) in $((SECONDS - START)) s"
exit $rc
