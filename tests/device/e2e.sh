#!/usr/bin/env bash
# ddptop end to end on a lent GPU (tests/device/run.sh calls it; E2E=0 there skips it), with the
# programs of the kit (DDPTOP_BUILD) and the machine's driver, NCCL and PyTorch:
#   (a) the agent's facts and gpu_watch against the real NVML: the driver, every GPU, samples;
#   (b) `ddptop run --headless` of ddptop-train on the GPU (--device cuda): it succeeds and its
#       gpu.jsonl holds real samples, the GPU busy (util > 0) with rank 0 on it;
#   (c) a PyTorch DDP job on NCCL (2 ranks with 2 GPUs or more, else 1: NCCL still sets up):
#       it succeeds, `ddptop logs --nccl` reads NCCL's version, and no rank is told that
#       NCCL_ASYNC_ERROR_HANDLING is deprecated (ddptop sets it only for a torch before 2.2);
#   (d) a PyTorch CUDA OOM (far more than the GPU has): the root cause's class is cuda_oom;
#   (e) the dashboard in tmux (the machine's, else the kit's) with ddptop-train on the GPU:
#       the ranks table's GPU columns, rank 0's GPU busy;
#   (f) the measured preflight's NCCL process (`ddptop-agent --bench-nccl`, what `check --bench`
#       runs on each node) against the machine's NCCL and CUDA runtime, every GPU one rank: its
#       written-out prototypes hold, it makes an id and times a 256 MiB all-reduce.
# What each part saw in detail (outputs, the runs' log directories, the screen) goes to
# $OUT/e2e.tgz.
# Each part prints one line "e2e (x) WHAT: PASS|FAIL (what it saw)", or "no GPU: skipped
# (why)" where run.sh found no GPU (DDPTOP_NO_GPU); exit 1 when a part failed. Every process
# it starts is ended by id (tmux's server and what runs under it too).
set -u
cd "$(dirname "$0")/../.."
B=${DDPTOP_BUILD:-$PWD/build}
OUT=${OUT:-/tmp/gpu-out}
DDPTOP=$B/ddptop
TRAIN=${E2E_TRAIN:-$B/ddptop-train}   # E2E_TRAIN: another build (a rehearsal on fakecuda)
PY=${DDPTOP_KIT_PYTHON:-python3}     # the machine's python3 is the one with torch
W=$(mktemp -d /tmp/ddptop-e2e.XXXXXX)
chmod 700 "$W"
KEEP=$W/keep          # what comes back: $OUT/e2e.tgz (the device tool brings back 8 files)
mkdir "$KEEP"
SOCK=ddpt-e2e-$$
. tests/lib/tmux.sh
cleanup() {
    tmux_cleanup 2>/dev/null
    [ -d "$W/logs" ] && cp -r "$W/logs" "$KEEP/" 2>/dev/null
    tar czf "$OUT/e2e.tgz" -C "$W" keep 2>/dev/null
    for p in $(pgrep -f -- "$W/" 2>/dev/null); do [ "$p" != $$ ] && kill -KILL "$p" 2>/dev/null; done
    rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
rc=0
result() {   # result PART WHAT OK|FAIL SEEN
    local verdict=PASS
    [ "$3" = ok ] || { verdict=FAIL; rc=1; }
    echo "e2e ($1) $2: $verdict ($4)"
}
# ranks of PyTorch get the machine's own libraries, not the kit's (run.sh saved them)
TORCH_ENV=(--env "LD_LIBRARY_PATH=${DDPTOP_KIT_ORIG_LD:-}")
NGPU=${DDPTOP_GPUS:-0}

if [ -n "${DDPTOP_NO_GPU:-}" ]; then
    for p in "(a) the agent against NVML" "(b) ddptop run of ddptop-train on the GPU" \
             "(c) a PyTorch DDP job on NCCL" "(d) a PyTorch CUDA OOM's root cause" \
             "(e) the dashboard's GPU columns" "(f) the agent's NCCL all-reduce (check --bench)"; do
        echo "e2e $p: no GPU: skipped ($DDPTOP_NO_GPU)"
    done
    # what can be seen without one: the agent says why it has no GPU to watch
    echo '{"op":"gpu_watch","id":1,"interval_ms":0}' | timeout 30 "$B/ddptop-agent" 2>&1 | grep -m1 '"gpu_watch"' |
        sed 's/^/# the agent here: /'
    exit 0
fi

# ---- (a) the agent's facts and gpu_watch against the driver's NVML ----
timeout 120 "$PY" - "$B/ddptop-agent" "$NGPU" >"$W/a.txt" 2>&1 <<'PY'
import json, os, select, subprocess, sys, time
agent, ngpu = sys.argv[1], int(sys.argv[2])
p = subprocess.Popen([agent], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
def send(m):
    p.stdin.write((json.dumps(m) + "\n").encode()); p.stdin.flush()
msgs, buf = [], b""
def pump(secs, until=None):
    global buf
    end = time.time() + secs
    while time.time() < end:
        r, _, _ = select.select([p.stdout], [], [], 0.05)
        if r:
            d = os.read(p.stdout.fileno(), 1 << 16)
            if not d: return
            buf += d
            while b"\n" in buf:
                l, buf = buf.split(b"\n", 1)
                try: msgs.append(json.loads(l))
                except ValueError: pass
        if until and any(until(m) for m in msgs): return
send({"op": "facts", "id": 1})
pump(90, lambda m: m.get("ev") == "facts")
send({"op": "gpu_watch", "id": 2, "interval_ms": 250})
pump(2.0)
send({"op": "gpu_watch", "id": 3, "interval_ms": 0})
pump(0.3)
p.stdin.close(); p.wait(10)
facts = next((m for m in msgs if m.get("ev") == "facts"), {})
watch = next((m for m in msgs if m.get("ev") == "gpu_watch" and m.get("id") == 2), {})
smp = [m for m in msgs if m.get("ev") == "gpu"]
g0 = smp[-1]["gpus"][0] if smp and smp[-1].get("gpus") else {}
hg = (facts.get("gpu_health") or {}).get("gpus") or []
ok = (bool(facts.get("gpu_driver")) and len(hg) == ngpu and watch.get("ok") is True and
      watch.get("gpus") == ngpu and len(smp) >= 4 and "NVIDIA" in g0.get("name", "") and
      g0.get("mem_total_mib", 0) > 0 and g0.get("temp_c") is not None and g0.get("power_w") is not None)
print("ok" if ok else "FAIL")
print("driver %s, cuda %s, nccl %s, torch %s; facts: %d GPU(s) %s; gpu_watch ok=%s gpus=%s; %d samples in 2 s; GPU 0: %s, %s MiB, %s C, %s W, util %s" % (
    facts.get("gpu_driver"), facts.get("cuda_runtime"), facts.get("nccl"), facts.get("torch"), len(hg),
    facts.get("gpu_memory"), watch.get("ok"), watch.get("gpus"), len(smp), g0.get("name"),
    g0.get("mem_total_mib"), g0.get("temp_c"), g0.get("power_w"), g0.get("util")))
PY
cp "$W/a.txt" "$KEEP/agent.txt" 2>/dev/null
result a "the agent's facts and gpu_watch against NVML" "$(head -1 "$W/a.txt")" "$(sed -n 2p "$W/a.txt" | head -c 600)"

# ---- (b) ddptop run --headless of ddptop-train on the GPU: gpu.jsonl with real samples ----
# about 5 s of steps (the big model, tf32: 6 ms a step on an H200), long enough for the sample
# taken 1 s into the ranks' run
TRAIN_ARGS=(--device cuda --precision tf32 --hidden 4096 --layers 4 --batch-size 4096 --log-every 50)
timeout 180 "$DDPTOP" run --headless --no-check --nproc-per-node 1 --gpu-interval 250 --log-dir "$W/logs" \
    --run-id e2e-train -- "$TRAIN" "${TRAIN_ARGS[@]}" --steps 800 >"$W/b.out" 2>&1
brc=$?
cp "$W/b.out" "$KEEP/train.txt" 2>/dev/null
seen=$("$PY" - "$W/logs/e2e-train/gpu.jsonl" <<'PY' 2>&1
import json, sys
try:
    lines = [json.loads(l) for l in open(sys.argv[1])]
except OSError as e:
    print("FAIL no gpu.jsonl: %s" % e); sys.exit()
busy = [g for l in lines for g in l["gpus"] if g.get("util", 0) > 0 and g.get("rank") == 0]
utils = [g.get("util") for l in lines for g in l["gpus"] if g.get("rank") == 0]
print("%s %d lines; rank 0's GPU util %s; %s" % ("ok" if busy else "FAIL", len(lines), utils,
      ("busy sample: %s" % json.dumps(busy[0])) if busy else "no sample with util > 0"))
PY
)
loss=$(grep -m1 -oE '"loss": ?[0-9.]+' "$W/b.out" | head -1)
if [ $brc = 0 ] && [ "${seen%% *}" = ok ]; then r=ok; else r=FAIL; fi
result b "ddptop run --headless of ddptop-train --device cuda, gpu.jsonl" $r "exit $brc; ${loss:-no loss line}; ${seen#* }"

# ---- (c) a PyTorch DDP job on NCCL, ddptop logs --nccl ----
NR=$((NGPU >= 2 ? 2 : 1))
cat >"$W/ddp.py" <<'PY'
import os, torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
local = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local)
dist.init_process_group("nccl", device_id=torch.device("cuda", local))
model = DDP(torch.nn.Linear(1024, 1024).cuda(), device_ids=[local])
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(20):
    x = torch.randn(64, 1024, device="cuda")
    loss = model(x).square().mean()
    opt.zero_grad(); loss.backward(); opt.step()
    if step % 5 == 0:
        print(f"step {step} loss {loss.item():.4f}", flush=True)
dist.barrier()
dist.destroy_process_group()
PY
timeout 180 "$DDPTOP" run --headless --no-check --nproc-per-node $NR --log-dir "$W/logs" --run-id e2e-nccl \
    "${TORCH_ENV[@]}" -- "$PY" "$W/ddp.py" >"$W/c.out" 2>&1
crc=$?
cp "$W/c.out" "$KEEP/nccl.txt" 2>/dev/null
"$DDPTOP" logs e2e-nccl --log-dir "$W/logs" --nccl >"$W/c.nccl" 2>&1
ver=$("$DDPTOP" logs e2e-nccl --log-dir "$W/logs" --nccl --json 2>/dev/null |
      "$PY" -c 'import json, sys; print(" ".join(sorted({n.get("nccl_version") or "?" for n in json.load(sys.stdin)["nodes"]})))' 2>&1)
dep=$(grep -rl 'NCCL_ASYNC_ERROR_HANDLING is deprecated' "$W/logs/e2e-nccl" 2>/dev/null | wc -l)
if [ $crc = 0 ] && [[ $ver =~ ^[0-9]+\.[0-9]+\.[0-9]+ ]] && [ "$dep" = 0 ]; then r=ok; else r=FAIL; fi
result c "a PyTorch DDP job on NCCL ($NR rank(s)), ddptop logs --nccl" $r \
    "exit $crc; NCCL version read: ${ver:-none}; $dep rank log(s) warn NCCL_ASYNC_ERROR_HANDLING is deprecated; $(grep -c 'loss' "$W/c.out") loss lines; $(head -3 "$W/c.nccl" | tr '\n' '|' | head -c 300)"

# ---- (d) a PyTorch CUDA OOM, classed by the root cause ----
cat >"$W/oom.py" <<'PY'
import torch
total = torch.cuda.get_device_properties(0).total_memory
print(f"GPU 0 has {total / 2**30:.0f} GiB; asking for {4 * total / 2**30:.0f} GiB", flush=True)
x = torch.empty(4 * total, dtype=torch.uint8, device="cuda")
PY
timeout 120 "$DDPTOP" run --headless --no-check --nproc-per-node 1 --log-dir "$W/logs" --run-id e2e-oom \
    "${TORCH_ENV[@]}" -- "$PY" "$W/oom.py" >"$W/d.out" 2>&1
drc=$?
cp "$W/d.out" "$KEEP/oom.txt" 2>/dev/null
cls=$("$PY" - "$W/logs/e2e-oom/events.jsonl" <<'PY' 2>&1
import json, sys
c = [e for e in map(json.loads, open(sys.argv[1])) if e.get("kind") == "root_cause"]
c = c[-1] if c else {}
print(c.get("class"), "|", (c.get("evidence") or "")[:160])
PY
)
if [ $drc = 1 ] && [ "${cls%% *}" = cuda_oom ]; then r=ok; else r=FAIL; fi
result d "a PyTorch CUDA OOM's root cause" $r "exit $drc; class $cls; $(grep -m1 'root cause' "$W/d.out" | head -c 200)"

# ---- (e) the dashboard's GPU columns, in tmux ----
if ! command -v tmux >/dev/null; then
    result e "the dashboard's GPU columns" FAIL "no tmux on this machine and none in the kit (pack.sh packs this machine's)"
else
    mkdir -m 700 "$W/xdg"
    cmd="cd $W && XDG_RUNTIME_DIR=$W/xdg LD_LIBRARY_PATH=$LD_LIBRARY_PATH LANG=C.UTF-8 TERM=screen-256color"
    cmd+=" $DDPTOP --nproc-per-node 1 --gpu-interval 250 --log-dir $W/logs --run-id e2e-tui --hang-timeout 0"
    cmd+=" -- $TRAIN ${TRAIN_ARGS[*]} --steps 4000; echo DDPTOP-EXIT=\$?; sleep 600"
    T new-session -d -s e2e -x 200 -y 50 "$cmd"
    if wait_screen e2e '^ *0 localhost .* [1-9][0-9]* +[0-9.]+G +[0-9]+C +[0-9]+W' 60; then r=ok; else r=FAIL; fi
    printf '%s\n' "$SCREEN" >"$KEEP/dashboard.txt"
    row=$(grep -E '^ *0 localhost ' <<<"$SCREEN" | head -1 | tr -s ' ' | head -c 200)
    head=$(grep -oE 'GPU% +GMEM +GTMP +GPOW' <<<"$SCREEN" | head -1 | tr -s ' ')
    T send-keys -t e2e q
    wait_screen e2e 'y/n|stop' 5 && T send-keys -t e2e y
    wait_screen e2e 'DDPTOP-EXIT=' 30 >/dev/null
    result e "the dashboard's GPU columns ($(tmux -V), 200x50)" $r "header '${head:-none}'; rank 0: '${row:-no row}'; screen in e2e.tgz keep/dashboard.txt"
fi

# ---- (f) the measured preflight's NCCL all-reduce, through the machine's NCCL ----
g=$NGPU; [ "$g" -ge 1 ] 2>/dev/null || g=1; [ "$g" -gt 8 ] && g=8
timeout 120 "$B/ddptop-agent" --bench-nccl "$g" 0 "$g" 268435456 2 10 - >"$W/f.txt" 2>&1
frc=$?
cp "$W/f.txt" "$KEEP/nccl-bench.txt"
us=$(awk '$1 == "ok" {print $2}' "$W/f.txt")
if [ $frc -eq 0 ] && grep -qE '^id [0-9a-f]{256}$' "$W/f.txt" && [ -n "$us" ]; then
    # as nccl-tests reports it: algbw = bytes / time, busbw = algbw x 2(n-1)/n
    fig=$(awk -v us="$us" -v n="$g" 'BEGIN { a = 268435456 / (us * 1e3); printf "%d GPU(s): %.0f us, algbw %.1f GB/s, busbw %.1f GB/s", n, us, a, a * 2 * (n - 1) / n }')
    result f "the agent's NCCL all-reduce (check --bench)" ok "$fig"
else
    result f "the agent's NCCL all-reduce (check --bench)" FAIL "exit $frc: $(tr '\n' ' ' <"$W/f.txt" | head -c 300)"
fi
exit $rc
