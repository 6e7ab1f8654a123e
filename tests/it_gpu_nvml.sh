#!/usr/bin/env bash
# GPU telemetry without a GPU: the agent's NVML sampler (agent/agent_nvml.c) against
# tests/fakenvml, a TEST DOUBLE of the driver's libnvidia-ml.so.1 found on LD_LIBRARY_PATH as
# the real one would be, whose GPUs' state a file sets while the agent runs. Through the agent
# alone: gpu_watch answers, a sample carries every value the state file sets, a change shows in
# the next sample, an XID arrives once, a node without NVML or with a broken one says why.
# Through `ddptop run --headless`: the throttle/ECC/XID events name the GPU and its rank (the
# rank's pid is the group of the process NVML lists), a stalled rank's event says its GPU is
# busy, and a run without NVML prints no GPU line at all. What this cannot show (the real
# driver's values): docs/gpu.md, "Telemetry".
set -u
cd "$(dirname "$0")/.."
. tests/lib/tap.sh
B=${DDPTOP_BUILD:-$PWD/build}
T=$(mktemp -d /tmp/ddptop-telemetry.XXXXXX)   # a name without "gpu": the last check greps for it
trap 'pkill -9 -f "$T/" 2>/dev/null; rm -rf "$T"' EXIT
FAKE=$B/fakenvml
[ -e "$FAKE/libnvidia-ml.so.1" ] || { tap_fail "test double built" "missing $FAKE/libnvidia-ml.so.1 (make tests)"; tap_done; exit 1; }

# The fake goes first on LD_LIBRARY_PATH, before what the caller set there (the device kit
# finds its own libraries, cJSON among them, through it).
FAKE_LD=$FAKE${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# The checks "without NVML" must not find this machine's own NVML (a GPU machine has one): they
# run in a mount namespace of their own with /dev/null bound over every libnvidia-ml.so.1 the
# loader would find (its cache and LD_LIBRARY_PATH), so dlopen fails there as on a CPU node.
NVML_REAL=$( { ldconfig -p 2>/dev/null | awk '/libnvidia-ml\.so\.1 /{print $NF}'
    IFS=:; for d in ${LD_LIBRARY_PATH:-}; do [ -e "$d/libnvidia-ml.so.1" ] && echo "$d/libnvidia-ml.so.1"; done
} | sort -u | tr '\n' ' ')
export NVML_REAL
without_nvml() {
    if [ -z "${NVML_REAL// /}" ]; then "$@"; return; fi
    unshare --mount -- sh -c 'for f in $NVML_REAL; do mount --bind /dev/null "$f" || exit 97; done; exec "$@"' sh "$@"
}
[ -n "${NVML_REAL// /}" ] && echo "# this machine has NVML ($NVML_REAL): hidden from the checks without NVML"

# --- the agent alone ---
cat >"$T/state" <<'S'
gpu 0 name=Fake_H100 util=37 mem_used=1000 mem_total=80000 power=250 limit=700 temp=55 sm=1980 throttle=0 ecc=0
gpu 1 name=Fake_H100 util=90 mem_used=70000 mem_total=80000 power=690 limit=700 temp=84 sm=1500 throttle=0 ecc=0
S
cat >"$T/drive.py" <<'PY'
import json, os, select, subprocess, sys, time
agent, state, mode = sys.argv[1], sys.argv[2], sys.argv[3]
env = dict(os.environ)
if mode != "none":
    env["LD_LIBRARY_PATH"] = os.environ["FAKE"] + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    env["FAKE_NVML_STATE"] = state
p = subprocess.Popen([agent], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
def send(m):
    p.stdin.write((json.dumps(m) + "\n").encode()); p.stdin.flush()
buf = b""
def pump(secs):
    global buf
    end = time.time() + secs
    while time.time() < end:
        r, _, _ = select.select([p.stdout], [], [], 0.05)
        if r:
            d = os.read(p.stdout.fileno(), 65536)
            if not d: return
            buf += d
send({"op": "gpu_watch", "id": 1, "interval_ms": 200})
if mode == "ok":
    pump(0.8)
    with open(state, "a") as f:
        f.write("gpu 1 name=Fake_H100 util=90 mem_used=70000 mem_total=80000 power=690 limit=700 temp=84 sm=1500 throttle=64 ecc=0\n")
        f.write("xid 1 79\n")
    pump(1.7)
else:
    pump(1.0)
send({"op": "gpu_watch", "id": 2, "interval_ms": 0})
pump(0.3)
p.stdin.close()
pump(0.5)
p.wait(5)
for l in buf.decode().splitlines():
    m = json.loads(l)
    if m.get("ev") in ("gpu", "gpu_watch"): print(json.dumps(m))
PY
FAKE=$FAKE /usr/bin/python3 "$T/drive.py" "$B/ddptop-agent" "$T/state" ok >"$T/ok.jsonl" 2>"$T/ok.err"
cat >"$T/check.py" <<'PY'
import json, sys
msgs = [json.loads(l) for l in open(sys.argv[1])]
ans = [m for m in msgs if m["ev"] == "gpu_watch"]
smp = [m for m in msgs if m["ev"] == "gpu"]
first = smp[0]["gpus"] if smp else []
def g(s, i): return s["gpus"][i] if len(s.get("gpus", [])) > i else {}
checks = {
 "watch": ans[:1] and ans[0].get("ok") is True and ans[0].get("gpus") == 2 and ans[0].get("driver") == "999.99-fake",
 "values": len(first) == 2 and first[0].get("name") == "Fake H100" and first[0].get("util") == 37 and
     first[0].get("mem_used_mib") == 1000 and first[0].get("mem_total_mib") == 80000 and first[0].get("power_w") == 250
     and first[0].get("power_limit_w") == 700 and first[0].get("temp_c") == 55 and first[0].get("sm_mhz") == 1980
     and first[0].get("throttle") == 0 and first[0].get("ecc_uncorrected") == 0,
 "rate": 6 <= len(smp) <= 16,
 "change": any(g(s, 1).get("throttle") == 64 for s in smp) and g(smp[0], 1).get("throttle") == 0,
 "xid": sum(len(s.get("xids", [])) for s in smp) == 1 and any(s.get("xids") == [[1, 79]] for s in smp),
 "stop": ans[-1:] and ans[-1].get("id") == 2 and ans[-1].get("ok") is True,
}
for k, v in checks.items():
    print(("ok" if v else "FAIL"), k)
PY
res=$(/usr/bin/python3 "$T/check.py" "$T/ok.jsonl" 2>&1)
chk() { if grep -qx "ok $1" <<<"$res"; then tap_ok "$2"; else tap_fail "$2" "$res" "$(head -c 1500 "$T/ok.jsonl")"; fi; }
chk watch "gpu_watch with NVML: ok, 2 GPUs, the driver version"
chk values "a sample carries name, utilisation, memory, power and limit, temperature, SM clock, throttle reasons, ECC"
chk rate "one sample per interval (200 ms over 2.5 s)"
chk change "a GPU that starts throttling shows it in the next samples"
chk xid "an XID arrives once, with its GPU"
chk stop "interval 0 stops the sampler"
FAKE=$FAKE without_nvml /usr/bin/python3 "$T/drive.py" "$B/ddptop-agent" "$T/state" none >"$T/none.jsonl" 2>&1
if grep -q '"ok": false' "$T/none.jsonl" && grep -q 'no NVML on this node: [^"]*libnvidia-ml\.so\.1' "$T/none.jsonl" &&
   ! grep -q '"ev": "gpu",' "$T/none.jsonl"; then tap_ok "a node without NVML: ok false, 'no NVML on this node', no samples"
else tap_fail "a node without NVML: ok false, 'no NVML on this node', no samples" "$(cat "$T/none.jsonl")"; fi
echo "init_error 18" >"$T/broken"
FAKE=$FAKE /usr/bin/python3 "$T/drive.py" "$B/ddptop-agent" "$T/broken" broken >"$T/broken.jsonl" 2>&1
if grep -q 'nvmlInit failed: RM has detected an NVML/RM version mismatch' "$T/broken.jsonl" &&
   grep -q 'driver loaded' "$T/broken.jsonl"; then tap_ok "a broken NVML: the error says what and what to check"
else tap_fail "a broken NVML: the error says what and what to check" "$(cat "$T/broken.jsonl")"; fi

# --- facts (ddptop check's view): NVML's health of each GPU, the driver and MIG mode to compare ---
printf 'gpu 0 name=Fake_H100 ecc=2 mem_total=81559 cc=9.0\ngpu 1 name=Fake_H100 persistence=0 mig=1 retired_pending=1 throttle=8 mem_total=40960 cc=8.0\n' >"$T/health"
echo '{"op":"facts","id":1}' | FAKE_NVML_STATE=$T/health LD_LIBRARY_PATH=$FAKE_LD "$B/ddptop-agent" >"$T/facts.jsonl" 2>&1
echo '{"op":"facts","id":1}' | without_nvml "$B/ddptop-agent" >"$T/facts-none.jsonl" 2>&1
res=$(/usr/bin/python3 - "$T/facts.jsonl" "$T/facts-none.jsonl" <<'PY'
import json, sys
def facts(p):
    for l in open(p):
        m = json.loads(l)
        if m.get("ev") == "facts": return m
    return {}
f, n = facts(sys.argv[1]), facts(sys.argv[2])
h = f.get("gpu_health", {})
g = h.get("gpus", [{}, {}])
ok = (f.get("gpu_driver") == "999.99-fake" and f.get("gpu_mig") == "mixed" and len(g) == 2 and
      g[0].get("ecc_uncorrected") == 2 and g[0].get("persistence") is True and g[0].get("mig") is False and
      g[1].get("retired_pending") is True and g[1].get("persistence") is False and g[1].get("throttle") == 8 and
      g[0].get("memory_mib") == 81559 and g[1].get("compute_capability") == "8.0" and
      f.get("gpu_memory") == "80 GiB, 40 GiB" and f.get("gpu_cc") == "9.0, 8.0")
none = "gpu_health" not in n and "gpu_driver" not in n and "gpu_memory" not in n and n.get("ev") == "facts"
print("health", "ok" if ok else "FAIL " + json.dumps(f.get("gpu_health")) + " " + str(f.get("gpu_mig")))
print("none", "ok" if none else "FAIL " + json.dumps(n)[:300])
PY
)
if grep -qx "health ok" <<<"$res"; then tap_ok "facts carry NVML's health: ECC, retired pages, persistence, MIG, throttle; driver, MIG mode, memory size and compute capability to compare"
else tap_fail "facts carry NVML's health: ECC, retired pages, persistence, MIG, throttle; driver, MIG mode, memory size and compute capability to compare" "$res"; fi
if grep -qx "none ok" <<<"$res"; then tap_ok "facts without NVML: no gpu_health, no gpu_driver"
else tap_fail "facts without NVML: no gpu_health, no gpu_driver" "$res"; fi

# --- through ddptop run ---
cat >"$T/state2" <<'S'
gpu 0 name=Fake_H100 util=98 mem_used=1000 mem_total=80000 power=250 limit=700 temp=55 sm=1980 throttle=0 ecc=0
gpu 1 name=Fake_H100 util=97 mem_used=1000 mem_total=80000 power=250 limit=700 temp=55 sm=1980 throttle=0 ecc=0
S
# Each rank puts its own pid on its GPU (as a CUDA context would), waits, then rank 1's GPU
# throttles, shows an ECC error and an XID; rank 0 never prints a step: --hang-timeout 2 stalls it.
RANK_SH='echo "pid $LOCAL_RANK $$" >>"$STATE"; sleep 2;
if [ "$LOCAL_RANK" = 1 ]; then echo "gpu 1 name=Fake_H100 util=97 mem_used=1000 mem_total=80000 power=690 limit=700 temp=91 sm=1200 throttle=64 ecc=1" >>"$STATE"; echo "xid 1 48" >>"$STATE"; fi; sleep 3'
STATE=$T/state2 FAKE_NVML_STATE=$T/state2 LD_LIBRARY_PATH=$FAKE_LD timeout 60 "$B/ddptop" run --headless --no-check \
    --nproc-per-node 2 --gpu-interval 200 --hang-timeout 2 --log-dir "$T/logs" -- sh -c "$RANK_SH" \
    >"$T/run.out" 2>&1
rc=$?
ev() { grep -qF -- "$1" "$T/run.out"; }
tap_check "ddptop run with the fake NVML: success" test "$rc" = 0
if ev "GPU 1 on localhost (rank 1) throttling: thermal (hardware)"; then tap_ok "a throttling GPU is an event naming the GPU, node, rank and reason"
else tap_fail "a throttling GPU is an event naming the GPU, node, rank and reason" "$(grep -i gpu "$T/run.out")"; fi
if ev "GPU 1 on localhost (rank 1): 1 new uncorrectable ECC error" && ev "GPU 1 on localhost (rank 1): XID 48 (double-bit ECC error)"; then
    tap_ok "ECC errors and an XID with its meaning are events"
else tap_fail "ECC errors and an XID with its meaning are events" "$(grep -i gpu "$T/run.out")"; fi
if ev "rank 0 on localhost stalled: no step reported" && grep -q "rank 0 on localhost stalled.*its GPU 0 is busy (98%): stuck in a kernel or a collective" "$T/run.out"; then
    tap_ok "a stalled rank's event says its GPU is busy"
else tap_fail "a stalled rank's event says its GPU is busy" "$(grep -i stall "$T/run.out")"; fi
if grep -q '"kind": *"gpu"' "$T"/logs/*/events.jsonl 2>/dev/null; then tap_ok "GPU events are in events.jsonl as kind gpu"
else tap_fail "GPU events are in events.jsonl as kind gpu" "$(head -c 600 "$T"/logs/*/events.jsonl)"; fi
res=$(/usr/bin/python3 - "$T"/logs/*/gpu.jsonl <<'PY' 2>&1
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
first = lines[0]
g = {x["index"]: x for x in first["gpus"]}
# Kept: the first sample (the ranks may not be on their GPUs yet); the first one 1 s or more
# after the ranks were seen running (both on their GPUs: a short run records its GPUs at work);
# the last one when the run ends (rank 1's GPU throttling since 2 s in). The next regular line
# would come 10 s after the first, after this 5 s run.
busy, last = lines[1] if len(lines) > 1 else {}, lines[-1]
gb = {x["index"]: x for x in busy.get("gpus", [])}
gl = {x["index"]: x for x in last["gpus"]}
ok = (len(lines) == 3 and first["host"] == "localhost" and first["time"].endswith("Z") and
      first["attempt"] == 0 and g[0].get("util") == 98 and g[1].get("util") == 97 and
      g[0].get("mem_total_mib") == 80000 and g[1].get("throttle") == 0 and
      gb.get(0, {}).get("rank") == 0 and gb.get(1, {}).get("rank") == 1 and busy["time"] < last["time"] and
      gl.get(1, {}).get("throttle") == 64 and gl.get(1, {}).get("temp_c") == 91)
print("ok" if ok else "FAIL " + json.dumps(lines)[:600])
PY
)
if [ "$res" = ok ]; then tap_ok "gpu.jsonl keeps a node's first sample, one 1 s into the ranks' run, the last at the end (then one every 10 s): host, time, attempt, each GPU's values and rank"
else tap_fail "gpu.jsonl keeps a node's first sample, one 1 s into the ranks' run, the last at the end" "$res"; fi
# Without NVML (a CPU node): not one GPU line.
without_nvml timeout 60 "$B/ddptop" run --headless --no-check --nproc-per-node 1 --log-dir "$T/logs" -- sh -c 'sleep 1' >"$T/cpu.out" 2>&1
rc=$?
if [ "$rc" = 0 ] && ! grep -qi 'gpu\|nvml' "$T/cpu.out"; then tap_ok "a node without NVML: the run says nothing about GPUs"
else tap_fail "a node without NVML: the run says nothing about GPUs" "rc=$rc" "$(cat "$T/cpu.out")"; fi
tap_done
