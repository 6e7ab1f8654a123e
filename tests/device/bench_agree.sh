#!/usr/bin/env bash
# The measured preflight's GPU figures (`ddptop check --bench`: the agent's bench_host request,
# docs/check.md "Measured preflight") against the GPU benchmark's (tests/bench/gpu.sh's
# bench_gpu): per precision the agent's matrix product in TFLOP/s against the best "cuBLAS
# alone" forward figure, and the agent's device-to-device copy against the best memory-bound
# kernel's bandwidth. Each must agree within 20% (issue 29); the ratios are printed for
# docs/performance.md. Runs on a lent GPU (tests/device/run.sh calls it); without one it prints
# "no GPU: skipped (...)" and succeeds.
# Env: AGENT (the agent to ask; default $DDPTOP_BUILD/ddptop-agent-x86_64, else ddptop-agent),
# BENCH_GPU_BIN (default $DDPTOP_BUILD/bench/bench_gpu), AGREE_TOLERANCE (0.2).
set -u
cd "$(dirname "$0")/../.."
DDPTOP_BUILD=${DDPTOP_BUILD:-$PWD/${BUILD:-build}}
AGENT=${AGENT:-$DDPTOP_BUILD/ddptop-agent-$(uname -m)}
[ -x "$AGENT" ] || AGENT=$DDPTOP_BUILD/ddptop-agent
BIN=${BENCH_GPU_BIN:-$DDPTOP_BUILD/bench/bench_gpu}
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
[ -x "$BIN" ] || { echo "no GPU: skipped (bench_gpu not built: $BIN)"; exit 0; }
probe=$("$BIN" probe 2>&1 | head -1)
case $probe in "no GPU: skipped"*) echo "$probe"; exit 0 ;; esac
[ -x "$AGENT" ] || { echo "bench_agree: no agent at $AGENT" >&2; exit 1; }

T=$(mktemp -d /tmp/bench_agree.XXXXXX)
trap 'rm -rf "$T"' EXIT
"$BIN" kernels tf32 >"$T/tf32.txt" 2>&1 || { cat "$T/tf32.txt"; exit 1; }
"$BIN" kernels bf16 >"$T/bf16.txt" 2>&1 || { cat "$T/bf16.txt"; exit 1; }

# The agent on its own, as ddptop drives it: one request on stdin, its answer on stdout.
"$PY" - "$AGENT" >"$T/host.json" <<'PY' || { echo "bench_agree: the agent's bench_host failed" >&2; exit 1; }
import json, subprocess, sys, time
ag = subprocess.Popen([sys.argv[1]], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
ag.stdin.write(json.dumps({"op": "bench_host", "id": 7, "gpu_seconds": 3}) + "\n")
ag.stdin.flush()
deadline = time.time() + 120
for line in ag.stdout:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("ev") == "bench_host":
        print(json.dumps(m))
        break
    if time.time() > deadline:
        break
ag.stdin.close()
ag.wait(timeout=30)
PY

"$PY" - "$T/host.json" "$T/tf32.txt" "$T/bf16.txt" "${AGREE_TOLERANCE:-0.2}" <<'PY'
import json, re, sys
host = json.load(open(sys.argv[1]))
tol = float(sys.argv[4])
def best(path, pat):
    vals = [float(m.group(1)) for l in open(path) for m in [re.search(pat, l)] if m]
    return max(vals) if vals else None
ref = {
    "tf32_tflops": best(sys.argv[2], r"^gemm tf32 .* forward .*cuBLAS alone\s+([0-9.]+) TFLOP/s"),
    "bf16_tflops": best(sys.argv[3], r"^gemm bf16 .* forward .*cuBLAS alone\s+([0-9.]+) TFLOP/s"),
    # TB/s -> GB/s; the agent counts a copy's bytes read and written, as the kernels do
    "d2d_gbs": (lambda v: v * 1000 if v else None)(best(sys.argv[2], r"^bandwidth \S+\s+[0-9.]+ ms\s+([0-9.]+) TB/s")),
}
gpus = host.get("gpus") or []
if not gpus:
    print("bench_agree: the agent measured no GPU: %s" % host.get("gpu_error"))
    sys.exit(1)
bad = 0
for g in gpus:
    for key, want in ref.items():
        got = g.get(key)
        if not want or got is None:
            print("gpu %s %-12s agent %s  bench %s  (missing)" % (g.get("index"), key, got, want))
            bad += 1
            continue
        ratio = got / want
        ok = abs(ratio - 1) <= tol
        bad += not ok
        print("gpu %s %-12s agent %9.1f  bench_gpu %9.1f  ratio %.2f  %s" % (
            g.get("index"), key, got, want, ratio, "ok" if ok else "DIFFERS by more than %d%%" % (tol * 100)))
print("bench_agree: %s" % ("every figure within %d%%" % (tol * 100) if not bad else "%d figure(s) outside" % bad))
sys.exit(1 if bad else 0)
PY
