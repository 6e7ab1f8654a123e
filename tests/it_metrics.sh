#!/usr/bin/env bash
# Integration: `--metrics` (docs/integrations.md, "Prometheus") with real components. A 4-rank
# local run whose ranks print their step and a loss of their own (rank 2: 3.325) ten times a
# second, and a timestamped "tick" line each time, on 4 GPUs of tests/fakenvml (the TEST
# DOUBLE of libnvidia-ml.so.1: utilisation 11, 22, 33, 44%), is scraped every second by a real
# Prometheus server (Debian's prometheus, started here with its own config, data directory and
# port); its HTTP API must give rank 2's loss and GPU 2's utilisation as the ranks and NVML
# had them, and the target must be up (Prometheus parsed every line). The endpoint's own
# answer is checked too (type, # EOF, an XID counted). Then hostile clients against the
# endpoint while the job runs (tests/lib/metrics_clients.py: a garbage request line, a
# slowloris sending a header byte a second, a 1 MB header, 500 connections at once): each gets
# its status or a closed connection, the ranks' lines keep arriving (measured: their delay
# and gaps while the clients run), ddptop stays alive and the run ends normally (exit 0).
# Bad --metrics values are usage errors (exit 2); a port in use, a configuration error.
# Every process started here (ddptop, Prometheus, the line stamper) is ended by its id.
set -u
cd "$(dirname "$0")/.."
. tests/lib/tap.sh

BUILD_DIR=${DDPTOP_BUILD:-$PWD/${BUILD:-build}}
DDPTOP=$BUILD_DIR/ddptop
PY=/usr/bin/python3
MC="$PY tests/lib/metrics_clients.py"
D="" DPID="" PROM="" STAMP=""
cleanup() {
    local p i
    for p in $DPID $PROM $STAMP; do kill "$p" 2>/dev/null; done
    for i in $(seq 50); do   # Prometheus closes its data directory on SIGTERM
        alive=""
        for p in $DPID $PROM $STAMP; do kill -0 "$p" 2>/dev/null && alive=1; done
        [ -z "$alive" ] && break
        sleep 0.1
    done
    for p in $DPID $PROM $STAMP; do kill -9 "$p" 2>/dev/null; done
    wait 2>/dev/null
    [ -n "$D" ] && rm -rf "$D"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if ! command -v prometheus >/dev/null; then tap_fail "prometheus is installed (make deps)"; tap_done; exit; fi
if [ ! -e "$BUILD_DIR/fakenvml/libnvidia-ml.so.1" ]; then tap_fail "the NVML test double is built (make tests)"; tap_done; exit; fi
D=$(mktemp -d /tmp/ddpt-metrics.XXXXXX) || { tap_fail "test directory"; tap_done; exit; }
free_port() { $PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
MPORT=$(free_port)
PPORT=$(free_port)
PROM_URL=http://127.0.0.1:$PPORT
M_URL=http://127.0.0.1:$MPORT/metrics

# ---- the option's errors -----------------------------------------------------------------

for bad in x 70000 "::1:9400" ":9400"; do
    "$DDPTOP" run --headless --metrics "$bad" -- true >"$D/bad.out" 2>&1
    rc=$?
    if [ $rc = 2 ] && grep -q -- "--metrics wants \[ADDR:\]PORT" "$D/bad.out"; then
        tap_ok "--metrics '$bad' is a usage error (exit 2) saying what it wants"
    else tap_fail "--metrics '$bad' is a usage error (exit 2) saying what it wants" "exit $rc" "$(cat "$D/bad.out")"; fi
done
$PY -c 'import socket,time,sys; s=socket.socket(); s.bind(("127.0.0.1",int(sys.argv[1]))); s.listen(); time.sleep(30)' "$MPORT" &
holder=$!
sleep 0.3
"$DDPTOP" run --headless --log-dir "$D/logs" --metrics "$MPORT" -- true >"$D/busy.out" 2>&1
rc=$?
kill "$holder" 2>/dev/null; wait "$holder" 2>/dev/null
if [ $rc = 2 ] && grep -q "cannot listen there: Address already in use" "$D/busy.out"; then
    tap_ok "a port in use: exit 2, naming the address and why"
else tap_fail "a port in use: exit 2, naming the address and why" "exit $rc" "$(cat "$D/busy.out")"; fi

# ---- the run -------------------------------------------------------------------------------

cat >"$D/state" <<'S'
gpu 0 name=Fake_H100 util=11 mem_used=1024 mem_total=81920 power=100 limit=700 temp=40 sm=1980 throttle=0 ecc=0
gpu 1 name=Fake_H100 util=22 mem_used=2048 mem_total=81920 power=200 limit=700 temp=50 sm=1980 throttle=0 ecc=0
gpu 2 name=Fake_H100 util=33 mem_used=3072 mem_total=81920 power=300 limit=700 temp=60 sm=1980 throttle=0 ecc=0
gpu 3 name=Fake_H100 util=44 mem_used=4096 mem_total=81920 power=400 limit=700 temp=70 sm=1980 throttle=64 ecc=0
S
cat >"$D/rank.sh" <<'EOF'
#!/bin/bash
# a CUDA context's process on the rank's GPU (tests/fakenvml), then a step line and a tick with
# the time it was printed, ten times a second until told to stop
echo "pid $LOCAL_RANK $$" >>"$STATE"
loss="$((RANK + 1)).$((RANK + 1))25"
i=0
while [ ! -e "$STOP" ] && [ $i -lt 3000 ]; do
    i=$((i + 1))
    printf '{"event":"step","v":1,"rank":%d,"step":%d,"loss":%s,"step_ms":100}\ntick %d %d %s\n' \
        "$RANK" "$i" "$loss" "$RANK" "$i" "$EPOCHREALTIME"
    sleep 0.1
done
EOF
chmod +x "$D/rank.sh"
mkfifo "$D/lines"
$MC stamp <"$D/lines" >"$D/out" &
STAMP=$!
STATE=$D/state STOP=$D/stop FAKE_NVML_STATE=$D/state LD_LIBRARY_PATH=$BUILD_DIR/fakenvml \
    "$DDPTOP" run --headless --nproc-per-node 4 --gpu-interval 200 --log-dir "$D/logs" --run-id metrics \
    --hang-timeout 0 --metrics "127.0.0.1:$MPORT" -- "$D/rank.sh" >"$D/lines" 2>"$D/err" &
DPID=$!

wait_for() {   # wait_for SECONDS CMD...: until CMD succeeds
    local until=$((SECONDS + $1)); shift
    while [ $SECONDS -lt $until ]; do "$@" && return 0; sleep 0.3; done
    return 1
}
if wait_for 20 grep -q "metrics: OpenMetrics at $M_URL" "$D/out"; then
    tap_ok "the run says where its metrics are: $M_URL"
else tap_fail "the run says where its metrics are" "$(tail -5 "$D/out")" "$(tail -5 "$D/err")"; fi

exposition_has() {   # exposition_has REGEX: the endpoint's answer now has a line matching it
    $MC get "$M_URL" "$D/expo" >"$D/expo.head" 2>/dev/null && grep -qE "$1" "$D/expo"
}
if wait_for 30 exposition_has '^ddptop_rank_loss\{run="metrics",rank="2",node="localhost"\} 3\.325$' &&
   wait_for 15 exposition_has '^ddptop_gpu_utilization_ratio\{run="metrics",node="localhost",gpu="2"\} 0\.33$'; then
    tap_ok "GET $M_URL: rank 2's loss (3.325) and GPU 2's utilisation (0.33)"
else tap_fail "GET $M_URL: rank 2's loss (3.325) and GPU 2's utilisation (0.33)" "$(grep -E 'loss|utilization' "$D/expo" | head)"; fi
if grep -qx '200 application/openmetrics-text; version=1.0.0; charset=utf-8' "$D/expo.head" &&
   [ "$(tail -n 1 "$D/expo")" = "# EOF" ] && grep -qx '# TYPE ddptop_rank_loss gauge' "$D/expo" &&
   grep -qx '# UNIT ddptop_gpu_temperature_celsius celsius' "$D/expo" &&
   grep -qE '^ddptop_gpu_throttle_reason\{run="metrics",node="localhost",gpu="3",reason="hw_thermal"\} 1$' "$D/expo" &&
   grep -qE '^ddptop_rank_state\{run="metrics",rank="0",node="localhost",state="running"\} 1$' "$D/expo"; then
    tap_ok "the answer is OpenMetrics: its type, TYPE and UNIT lines, a throttle reason, a rank's state, # EOF last"
else tap_fail "the answer is OpenMetrics" "$(cat "$D/expo.head")" "$(head -5 "$D/expo")" "$(tail -2 "$D/expo")"; fi
echo "xid 1 79" >>"$D/state"
if wait_for 15 exposition_has '^ddptop_gpu_xid_errors_total\{run="metrics",node="localhost",gpu="1"\} 1$' &&
   grep -qE '^ddptop_gpu_last_xid\{run="metrics",node="localhost",gpu="1"\} 79$' "$D/expo"; then
    tap_ok "an XID of GPU 1 is counted (ddptop_gpu_xid_errors_total 1, ddptop_gpu_last_xid 79)"
else tap_fail "an XID of GPU 1 is counted" "$(grep xid "$D/expo")"; fi

# ---- Prometheus --------------------------------------------------------------------------

cat >"$D/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: ddptop
    static_configs:
      - targets: ['127.0.0.1:$MPORT']
EOF
prometheus --config.file="$D/prometheus.yml" --storage.tsdb.path="$D/tsdb" \
    --web.listen-address="127.0.0.1:$PPORT" --log.level=warn >"$D/prometheus.log" 2>&1 &
PROM=$!
prom_ready() { $PY -c 'import urllib.request,sys; urllib.request.urlopen(sys.argv[1] + "/-/ready", timeout=2)' "$PROM_URL" 2>/dev/null; }
if wait_for 60 prom_ready; then tap_ok "Prometheus $(prometheus --version 2>&1 | head -1 | awk '{print $3}') is ready on port $PPORT"
else tap_fail "Prometheus is ready" "$(tail -5 "$D/prometheus.log")"; fi
query_is() {   # query_is EXPR VALUE: Prometheus answers VALUE (to 1e-9) for EXPR, one series
    got=$($MC query "$PROM_URL" "$1" 2>/dev/null)
    [ -n "$got" ] && [ "$(wc -l <<<"$got")" = 1 ] &&
        awk -v a="${got##* }" -v b="$2" 'BEGIN { d = a - b; exit !(d < 1e-9 && d > -1e-9) }'
}
if wait_for 40 query_is 'ddptop_rank_loss{rank="2"}' 3.325; then
    tap_ok "Prometheus has rank 2's loss as it printed it: $got"
else tap_fail "Prometheus has rank 2's loss as it printed it (3.325)" "got: $got" "$(tail -5 "$D/prometheus.log")"; fi
if wait_for 20 query_is 'ddptop_gpu_utilization_ratio{gpu="2"}' 0.33; then
    tap_ok "Prometheus has GPU 2's utilisation as NVML gave it: $got"
else tap_fail "Prometheus has GPU 2's utilisation as NVML gave it (0.33)" "got: $got"; fi
if query_is 'avg by (node) (ddptop_gpu_utilization_ratio)' 0.275 &&
   query_is 'sum(ddptop_job_ranks{state="running"})' 4; then
    tap_ok "the Grafana panel's PromQL works: GPU utilisation by node ($got), ranks by state"
else tap_fail "the Grafana panel's PromQL works" "got: $got"; fi
targets=$($MC targets "$PROM_URL" 2>&1)
if [ "$targets" = "up -" ]; then tap_ok "the scrape target is up with no error (every line parsed)"
else tap_fail "the scrape target is up with no error" "$targets"; fi

# ---- hostile clients while the job runs ------------------------------------------------

$MC hostile 127.0.0.1 "$MPORT" >"$D/hostile" 2>&1
while IFS=$'\t' read -r verdict what detail; do
    case $verdict in
        PASS) tap_ok "$what: $detail" ;;
        FAIL) tap_fail "$what" "$detail" ;;
    esac
done <"$D/hostile"
window=$(sed -n 's/^WINDOW //p' "$D/hostile")
if [ -z "$window" ]; then tap_fail "the hostile clients ran to their end" "$(tail -5 "$D/hostile")"; window="0 0"; fi
if kill -0 "$DPID" 2>/dev/null; then tap_ok "ddptop is alive after the hostile clients"
else tap_fail "ddptop is alive after the hostile clients" "$(tail -5 "$D/err")"; fi
sleep 1   # the last lines of the window arrive
read -r t0 t1 <<<"$window"
flow=$($MC flow "$D/out" "$t0" "$t1")
read -r _ n _ rate _ delay _ gap <<<"$flow"
secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
# 4 ranks x 10 lines/s when the machine keeps up; the bounds are for a loaded machine, the
# figures are printed either way
if [ "${n:-0}" -ge $(awk -v s="$secs" 'BEGIN { printf "%d", s * 4 * 10 * 0.3 }') ] && [ "${delay:-99999}" -lt 2000 ] &&
   [ "${gap:-99999}" -lt 3000 ]; then
    tap_ok "the ranks' lines kept flowing during the ${secs} s of hostile clients: $n lines ($rate/s), largest delay ${delay} ms, largest gap of a rank ${gap} ms"
else tap_fail "the ranks' lines kept flowing during the hostile clients" "$flow over ${secs} s"; fi
if wait_for 10 query_is 'up{job="ddptop"}' 1; then tap_ok "Prometheus still scrapes the endpoint after them"
else tap_fail "Prometheus still scrapes the endpoint after them" "got: $got"; fi

# ---- the end -------------------------------------------------------------------------------

touch "$D/stop"
end=$((SECONDS + 30))
while kill -0 "$DPID" 2>/dev/null && [ $SECONDS -lt $end ]; do sleep 0.2; done
if kill -0 "$DPID" 2>/dev/null; then
    tap_fail "the run ends when its ranks do" "still running after 30 s"
else
    wait "$DPID"
    rc=$?
    DPID=""
    if [ $rc = 0 ]; then tap_ok "the run ends normally when its ranks do (exit 0)"
    else tap_fail "the run ends normally when its ranks do (exit 0)" "exit $rc" "$(tail -5 "$D/err")" "$(tail -5 "$D/out")"; fi
fi
tap_done
