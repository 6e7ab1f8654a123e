#!/usr/bin/env bash
# Benchmark: `ddptop run` against what a user would use instead, on real sshd servers on
# loopback ports (one per "node"):
#  1. launch: time from start until every one of 16 nodes x 4 ranks printed its first line,
#     ddptop (headless, --no-check, agent already uploaded; and with the preflight) side by
#     side with `pdsh -R ssh -f 64` starting the same 4 processes per node;
#  2. log throughput: 8 ranks (8 nodes x 1) printing 100-byte lines as fast as they can, ddptop
#     (every byte to its log file, headless output to /dev/null) side by side with 8 parallel
#     `ssh host CMD > /dev/null`;
#  3. the controller's CPU and peak RSS during a 64-rank run (16 x 4) where every rank prints a
#     metrics line 10 times a second for 10 s.
# Best of BENCH_REPEAT (default 3) rounds for 1 and 2, the contenders taking turns. Prints a table, the ratios and a markdown
# snippet for docs/performance.md. BENCH_RUN_MB: MB per rank in 2 (default 25).
set -u
cd "$(dirname "$0")/../.."
. tests/lib/tap.sh      # run_job.sh's assertions print TAP lines; unused here
. tests/lib/sshd.sh
. tests/lib/run_job.sh

REPEAT=${BENCH_REPEAT:-3}
MB=${BENCH_RUN_MB:-25}
NODES=16
PY=/usr/bin/python3

bench_cleanup() {
    rj_cleanup
    sshd_cleanup
}
trap bench_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

[ -x "$DDPTOP" ] || { echo "bench: $DDPTOP not built (make all)" >&2; exit 1; }
command -v pdsh >/dev/null || { echo "bench: pdsh missing (make deps)" >&2; exit 1; }
sshd_setup || exit 1
D=$SSHD_DIR
echo "starting $NODES sshd servers on loopback ..."
sshd_start_fleet n "$NODES" || { echo "bench: the sshd servers did not start" >&2; exit 1; }
for ((i = 0; i < NODES; i++)); do
    echo "127.0.0.1:${SSHD_FLEET_PORTS[i]} slots=4" >>"$D/hosts16x4"
    [ "$i" -lt 8 ] && echo "127.0.0.1:${SSHD_FLEET_PORTS[i]} slots=1" >>"$D/hosts8x1"
done
SSHOPT=(--known-hosts "$D/known_hosts" -i "$D/id_ed25519" -F "$D/ssh_config" --agent-dir "$D/agent"
        --timeout 30 --log-dir "$D/logs" --headless)
now_ms() { echo $(($(date +%s%N) / 1000000)); }

# first_lines N CMD...: runs CMD, reads its stdout; prints the ms until N lines holding
# "first " arrived, then the ms until CMD ended. Fails when CMD fails or fewer lines came.
cat >"$D/first_lines.py" <<'PY'
import subprocess, sys, time
n, cmd = int(sys.argv[1]), sys.argv[2:]
t0 = time.monotonic()
p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
seen, t_all = 0, None
for line in p.stdout:
    if b"first " in line:
        seen += 1
        if seen == n:
            t_all = time.monotonic()
rc = p.wait()
t_end = time.monotonic()
if rc != 0 or t_all is None:
    print(f"rc={rc} seen={seen}", file=sys.stderr); sys.exit(1)
print(f"{(t_all - t0) * 1000:.0f} {(t_end - t0) * 1000:.0f}")
PY

# best_turns VAR=FUNC...: one warm-up of each FUNC, then REPEAT rounds in which every FUNC runs
# once in turn (so that load coming and going on a shared machine hits all of them alike).
# Each FUNC prints "MS [MORE]"; VAR gets the output with the smallest MS.
best_turns() {
    local spec var fn out r
    for spec in "$@"; do
        "${spec#*=}" >/dev/null || { echo "bench: ${spec#*=} failed" >&2; return 1; }
        printf -v "${spec%%=*}" '%s' ""
    done
    for ((r = 0; r < REPEAT; r++)); do
        for spec in "$@"; do
            var=${spec%%=*} fn=${spec#*=}
            out=$("$fn") || { echo "bench: $fn failed" >&2; return 1; }
            if [ -z "${!var}" ] || [ "${out%% *}" -lt "$(echo "${!var}" | cut -d' ' -f1)" ]; then
                printf -v "$var" '%s' "$out"
            fi
        done
    done
}

# --- 1. launch: 64 ranks' first lines -------------------------------------------------------
RANK_CMD='echo "first $RANK"'
launch_ddptop() {
    $PY "$D/first_lines.py" 64 "$DDPTOP" run "$D/hosts16x4" "${SSHOPT[@]}" "$@" \
        --master-port "$(sshd_pick_port)" --run-id "launch-$RANDOM$RANDOM" -- sh -c "$RANK_CMD"
}
launch_nocheck() { launch_ddptop --no-check; }
launch_check() { launch_ddptop; }
PDSH_CMD='for r in 0 1 2 3; do RANK=$r sh -c '"'"'echo "first $RANK"'"'"' & done; wait'
launch_pdsh() {
    PDSH_SSH_ARGS_APPEND="-F $D/pdsh_config" $PY "$D/first_lines.py" 64 \
        pdsh -R ssh -f 64 -w "n[01-16]" "$PDSH_CMD"
}
echo "1. launch: 16 nodes x 4 ranks, best of $REPEAT ..."
LOAD0=$(cut -d' ' -f1 /proc/loadavg)
best_turns L_DDP=launch_nocheck L_CHK=launch_check L_PDSH=launch_pdsh || exit 1

# --- 2. log throughput: 8 ranks as fast as they can ------------------------------------------
PRINT="head -c ${MB}000000 /dev/zero | tr '\\0' x | fold -w 99"
BYTES=$((8 * MB * 1000000 / 99 * 100))   # fold adds a newline per 99 bytes (the last line has one too)
tput_ddptop() {
    local rid=tput-$RANDOM$RANDOM t0 t
    t0=$(now_ms)
    "$DDPTOP" run "$D/hosts8x1" "${SSHOPT[@]}" --no-check --master-port "$(sshd_pick_port)" \
        --run-id "$rid" -- sh -c "$PRINT" >/dev/null 2>"$D/tput.err" || return 1
    t=$(($(now_ms) - t0))
    local got
    got=$(cat "$D/logs/$rid"/attempt-0/rank-*.log | wc -c)
    rm -rf "${D:?}/logs/$rid"
    [ "$got" -ge $((8 * MB * 1000000)) ] || { echo "bench: logs hold $got bytes" >&2; return 1; }
    echo "$t $got"
}
tput_ssh() {
    local t0 t i pids=()
    t0=$(now_ms)
    for ((i = 1; i <= 8; i++)); do
        ssh -F "$D/pdsh_config" "$(printf 'n%02d' "$i")" "$PRINT" >/dev/null &
        pids+=($!)
    done
    for i in "${pids[@]}"; do wait "$i" || return 1; done
    t=$(($(now_ms) - t0))
    echo "$t"
}
echo "2. log throughput: 8 ranks x $MB MB, best of $REPEAT ..."
best_turns T_DDP=tput_ddptop T_SSH=tput_ssh || { cat "$D/tput.err" >&2; exit 1; }
T_BYTES=${T_DDP#* }

# --- 3. controller CPU and RSS, 64 ranks printing metrics lines ------------------------------
STEPPER='$|=1; for $i (1..100) { printf "{\"event\":\"step\",\"v\":1,\"rank\":%d,\"step\":%d,\"loss\":%.4f,\"step_ms\":100.0}\n", $ENV{RANK}, $i, 5/$i; select(undef,undef,undef,0.1) }'
echo "3. controller CPU and RSS: 64 ranks, 10 metrics lines/s each for 10 s ..."
rj_start "$D/c64.out" --discard "$D/hosts16x4" "${SSHOPT[@]}" --no-check --master-port "$(sshd_pick_port)" \
    --run-id "cpu64-$RANDOM" -- perl -e "$STEPPER"
rj_wait 120
[ "$RJ_RC" = 0 ] || { echo "bench: 64-rank run failed (exit $RJ_RC)" >&2; tail "$D/c64.out.err" >&2; exit 1; }
HZ=$(getconf CLK_TCK)
C64_CPU=$(awk -v t="$RJ_CPU_TICKS" -v hz="$HZ" 'BEGIN { printf "%.2f", t / hz }')
C64_WALL=$(awk -v ms="$RJ_MS" 'BEGIN { printf "%.1f", ms / 1000 }')
C64_PCT=$(awk -v c="$C64_CPU" -v w="$C64_WALL" 'BEGIN { printf "%.1f", 100 * c / w }')
C64_RSS=$(awk -v k="$RJ_HWM_KB" 'BEGIN { printf "%.1f", k / 1024 }')
LOAD1=$(cut -d' ' -f1 /proc/loadavg)

# --- report ---------------------------------------------------------------------------------
sec() { awk -v ms="$1" 'BEGIN { printf "%.2f s", ms / 1000 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
mbs() { awk -v b="$1" -v ms="$2" 'BEGIN { printf "%.1f", b / 1e6 / (ms / 1000) }'; }
kls() { awk -v b="$1" -v ms="$2" 'BEGIN { printf "%.0f", b / 100 / (ms / 1000) / 1000 }'; }
l_ddp=${L_DDP%% *} l_chk=${L_CHK%% *} l_pdsh=${L_PDSH%% *}
t_ddp=${T_DDP%% *} t_ssh=${T_SSH%% *}
CPU=$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
DATE=$(date -u '+%Y-%m-%d %H:%M UTC')
echo
printf '%-44s %-12s %-12s %s\n' "" ddptop baseline "ddptop/baseline"
printf '%-44s %-12s %-12s %s\n' "launch 16x4, all first lines (--no-check)" "$(sec "$l_ddp")" "$(sec "$l_pdsh")" "$(ratio "$l_ddp" "$l_pdsh")"
printf '%-44s %-12s %-12s %s\n' "launch 16x4, all first lines (preflight)" "$(sec "$l_chk")" "$(sec "$l_pdsh")" "$(ratio "$l_chk" "$l_pdsh")"
printf '%-44s %-12s %-12s %s\n' "8 ranks x $MB MB output, wall" "$(sec "$t_ddp")" "$(sec "$t_ssh")" "$(ratio "$t_ddp" "$t_ssh")"
printf '%-44s %-12s %-12s %s\n' "  MB/s" "$(mbs "$T_BYTES" "$t_ddp")" "$(mbs "$T_BYTES" "$t_ssh")" "$(ratio "$t_ssh" "$t_ddp")"
printf '%-44s %-12s %-12s\n' "  thousand lines/s" "$(kls "$T_BYTES" "$t_ddp")" "$(kls "$T_BYTES" "$t_ssh")"
echo "64-rank run (16x4, 6400 metrics lines in ${C64_WALL} s): controller CPU ${C64_CPU} s (${C64_PCT}% of one core), peak RSS ${C64_RSS} MiB"
echo "load average (1 min) before/after: $LOAD0 / $LOAD1"
echo
echo "--- markdown for docs/performance.md ---"
echo "Measured $DATE on $(nproc) CPU cores ($CPU), $NODES sshd servers on loopback, best of $REPEAT;"
echo "load average $LOAD0 before, $LOAD1 after."
echo
echo "| measurement | ddptop run | baseline | ddptop / baseline |"
echo "|---|---:|---:|---:|"
echo "| launch, 16 nodes x 4 ranks, until every rank's first line (\`--no-check\`, agent cached) | $(sec "$l_ddp") | $(sec "$l_pdsh") (pdsh -R ssh -f 64) | $(ratio "$l_ddp" "$l_pdsh") |"
echo "| the same with the preflight | $(sec "$l_chk") | $(sec "$l_pdsh") | $(ratio "$l_chk" "$l_pdsh") |"
echo "| 8 ranks x $MB MB of 100-byte lines, wall | $(sec "$t_ddp") | $(sec "$t_ssh") (8 x ssh CMD > /dev/null) | $(ratio "$t_ddp" "$t_ssh") |"
echo "| throughput, MB/s | $(mbs "$T_BYTES" "$t_ddp") | $(mbs "$T_BYTES" "$t_ssh") | $(ratio "$t_ssh" "$t_ddp") |"
echo "| throughput, thousand lines/s | $(kls "$T_BYTES" "$t_ddp") | $(kls "$T_BYTES" "$t_ssh") | |"
echo
echo "- 64-rank run (16 x 4, every rank 10 metrics lines/s for 10 s): controller CPU ${C64_CPU} s in ${C64_WALL} s"
echo "  (${C64_PCT}% of one core), peak RSS (VmHWM) ${C64_RSS} MiB"
