#!/usr/bin/env bash
# Benchmark: `ddptop run` against what a user would use instead, on real sshd servers on
# loopback ports (one per "node"), every contender logging in as a throwaway user with a plain
# shell (see "login user" below):
#  logins: how many SSH logins (sshd's "Accepted publickey" lines) each node sees during one
#     `ddptop run` with its preflight: the first run (agent uploaded) and one with the agent
#     already on the node;
#  launch: time from start until every one of 16 nodes x 4 ranks printed its first line,
#     ddptop (headless, agent already uploaded) with the preflight and with --no-check, side by
#     side with `pdsh -R ssh -f 64` starting the same 4 processes per node;
#  slow: the same launch (with the preflight, ddptop's default --timeout) against pdsh, once,
#     on 16 nodes of which one's login takes 12 s (a plain `ssh` to that node alone is timed
#     too, to show the slowness is real): that node's sshd alone has PermitUserRC yes, and the
#     user's ~/.ssh/rc sleeps, so every session there starts 12 s late, as behind a slow
#     ~/.bashrc. (Not sshd's SetEnv BASH_ENV=slow.sh: Debian's bash, started by sshd, reads
#     ~/.bashrc and returns before it would read $BASH_ENV.)
#     ddptop's outcome (exit status, its last error line) is printed, a refusal is a figure too;
#  tput: log throughput, 8 ranks (8 nodes x 1) printing 100-byte lines as fast as they can,
#     ddptop (every byte to its log file, headless output to /dev/null) side by side with 8
#     parallel `ssh host CMD > /dev/null` and 8 parallel `ssh host CMD > file` (files beside
#     ddptop's log dir: ddptop writes every byte to disk, so this is the fairer baseline);
#  cpu: the controller's CPU and peak RSS during a 64-rank run (16 x 4) where every rank prints
#     a metrics line 10 times a second for 10 s.
# Login user: many concurrent logins as root can serialize on whatever root's ~/.bashrc does
# (bash sources it for every `ssh host CMD`; on the dev machine pyenv's init takes a lock, and
# 16 concurrent `ssh host true` took 22 s), which would measure root's dotfiles, not the
# launchers. So the bench creates user ddpbench<pid> (login shell bash, empty ~/.bashrc, its
# own ed25519 key) and removes it with its home and processes at the end, on failure and
# Ctrl-C too (tests/lib/sshd.sh: sshd_user_create, sshd_cleanup). Needs root.
# Env: BENCH_ONLY=logins,launch,slow,tput,cpu (comma-separated; default all of them),
# BENCH_BASE=BUILD_DIR (tput: that build's ddptop as one more contender, for before/after),
# BENCH_PERF=DIR (tput: one more ddptop round under `perf record -a -g` and one under
# `perf stat -a`, into DIR/perf.data and DIR/stat.csv, for the log path's profile),
# BENCH_REPEAT (default 3: best of that many rounds for launch and tput, the contenders taking
# turns), BENCH_RUN_MB (MB per rank in tput, default 25), BENCH_SLOW_S (the slow node's login
# login delay, default 12), BENCH_SLOW_TIMEOUT (ddptop --timeout in the slow row; default: none, so
# ddptop's default). Prints a table, the ratios and a markdown snippet for docs/performance.md.
set -u
cd "$(dirname "$0")/../.."
. tests/lib/tap.sh      # run_job.sh's assertions print TAP lines; unused here
. tests/lib/sshd.sh
. tests/lib/run_job.sh

REPEAT=${BENCH_REPEAT:-3}
MB=${BENCH_RUN_MB:-25}
SLOW_S=${BENCH_SLOW_S:-12}
SLOW_TIMEOUT=${BENCH_SLOW_TIMEOUT:-}
ONLY=${BENCH_ONLY:-all}
NODES=16
PY=/usr/bin/python3
BUSER=ddpbench$$

part() { [ "$ONLY" = all ] || [[ ",$ONLY," == *",$1,"* ]]; }
for p in ${ONLY//,/ }; do
    case $p in
    all | logins | launch | slow | tput | cpu) ;;
    *) echo "bench: BENCH_ONLY: unknown part '$p' (logins, launch, slow, tput, cpu)" >&2; exit 2 ;;
    esac
done

bench_cleanup() {
    rj_cleanup
    sshd_cleanup     # the servers, then the throwaway user (its processes, userdel -r), the dir
}
trap bench_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

[ "$(id -u)" = 0 ] || { echo "bench: needs root (creates a throwaway user)" >&2; exit 1; }
[ -x "$DDPTOP" ] || { echo "bench: $DDPTOP not built (make all)" >&2; exit 1; }
command -v pdsh >/dev/null || { echo "bench: pdsh missing (make deps)" >&2; exit 1; }
sshd_setup || exit 1
D=$SSHD_DIR
sshd_user_create "$BUSER" || { echo "bench: could not create user $BUSER" >&2; exit 1; }
UHOME=$(getent passwd "$BUSER" | cut -d: -f6)
echo "login user: every contender logs in as throwaway user $BUSER (login shell bash, empty"
echo "  ~/.bashrc, own key), created now and removed at the end: concurrent logins as root"
echo "  would measure root's ~/.bashrc (pyenv's lock serializes them), not the launchers."
# What the user's sessions need: the agent dir (the agents are uploaded there), the ranks'
# working directory (its home), and the slow node's ~/.ssh/rc (only that node's sshd runs it).
mkdir -p "$D/agent" && chown "$BUSER:" "$D/agent"
printf 'sleep %s\n' "$SLOW_S" >"$UHOME/.ssh/rc" && chown "$BUSER:" "$UHOME/.ssh/rc"
runuser -u "$BUSER" -- test -r "$UHOME/.ssh/rc" -a -w "$D/agent" -a -x "$UHOME" ||
    { echo "bench: $BUSER cannot reach $D or its home" >&2; exit 1; }

LOAD0=$(cut -d' ' -f1 /proc/loadavg)
echo "starting $NODES sshd servers on loopback (LogLevel VERBOSE, one log each) ..."
sshd_start_fleet n "$NODES" "LogLevel VERBOSE" "PermitUserRC no" || { echo "bench: the sshd servers did not start" >&2; exit 1; }
for ((i = 0; i < NODES; i++)); do
    echo "$BUSER@127.0.0.1:${SSHD_FLEET_PORTS[i]} slots=4" >>"$D/hosts16x4"
    [ "$i" -lt 8 ] && echo "$BUSER@127.0.0.1:${SSHD_FLEET_PORTS[i]} slots=1" >>"$D/hosts8x1"
done
CONN=(--known-hosts "$D/known_hosts" -i "$SSHD_USER_KEY" -F "$D/ssh_config" --agent-dir "$D/agent"
      --log-dir "$D/logs" --headless --workdir "$UHOME")
SSHOPT=("${CONN[@]}" --timeout 30)
PDSH=(pdsh -R ssh -l "$BUSER")   # pdsh passes ssh "-l <local user>" unless told
export PDSH_SSH_ARGS_APPEND="-F $D/pdsh_config"
now_ms() { echo $(($(date +%s%N) / 1000000)); }

# first_lines [--report] ERRFILE N CMD...: runs CMD (stderr in ERRFILE), reads its stdout;
# prints the ms until N lines holding "first " arrived, then the ms until CMD ended. Fails when
# CMD fails or fewer lines came. --report: never fails; prints "MS_ALL|- MS_END RC SEEN"; CMD's
# stdout goes to ERRFILE too (ddptop's headless messages are there).
cat >"$D/first_lines.py" <<'PY'
import signal, subprocess, sys, time
signal.signal(signal.SIGINT, signal.SIG_DFL)   # Ctrl-C: die quietly, the bench's trap cleans up
report = sys.argv[1] == "--report"
args = sys.argv[2:] if report else sys.argv[1:]
err = open(args[0], "wb")
args = args[1:]
n, cmd = int(args[0]), args[1:]
t0 = time.monotonic()
p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT if report else err,
                     stdin=subprocess.DEVNULL)
seen, t_all = 0, None
for line in p.stdout:
    if report:
        err.write(line)
    if b"first " in line:
        seen += 1
        if seen == n:
            t_all = time.monotonic()
rc = p.wait()
t_end = time.monotonic()
if report:
    a = "-" if t_all is None else f"{(t_all - t0) * 1000:.0f}"
    print(f"{a} {(t_end - t0) * 1000:.0f} {rc} {seen}"); sys.exit(0)
if rc != 0 or t_all is None:
    print(f"rc={rc} seen={seen}", file=sys.stderr); sys.exit(1)
print(f"{(t_all - t0) * 1000:.0f} {(t_end - t0) * 1000:.0f}")
PY

# bench_err: the stderr of the launch that failed last.
bench_err() { [ -s "$D/launch.err" ] && tail -n 15 "$D/launch.err" >&2; }

# best_turns VAR=FUNC...: one warm-up of each FUNC, then REPEAT rounds in which every FUNC runs
# once in turn (so that load coming and going on a shared machine hits all of them alike).
# Each FUNC prints "MS [MORE]"; VAR gets the output with the smallest MS; every round's MS is
# printed too ("round N: FUNC MS [MORE]"), for medians over several runs of the bench.
best_turns() {
    local spec var fn out r
    for spec in "$@"; do
        "${spec#*=}" >/dev/null || { echo "bench: ${spec#*=} failed" >&2; bench_err; return 1; }
        printf -v "${spec%%=*}" '%s' ""
    done
    for ((r = 0; r < REPEAT; r++)); do
        for spec in "$@"; do
            var=${spec%%=*} fn=${spec#*=}
            out=$("$fn") || { echo "bench: $fn failed" >&2; bench_err; return 1; }
            echo "  round $((r + 1)): $fn $out"   # every round (MS [MORE]), for medians across runs
            if [ -z "${!var}" ] || [ "${out%% *}" -lt "$(echo "${!var}" | cut -d' ' -f1)" ]; then
                printf -v "$var" '%s' "$out"
            fi
        done
    done
}

# --- launch: 64 ranks' first lines -------------------------------------------------------
RANK_CMD='echo "first $RANK"'
launch_ddptop() {
    $PY "$D/first_lines.py" "$D/launch.err" 64 "$DDPTOP" run "$D/hosts16x4" "${SSHOPT[@]}" "$@" \
        --master-port "$(sshd_pick_port)" --run-id "launch-$RANDOM$RANDOM" -- sh -c "$RANK_CMD"
}
launch_nocheck() { launch_ddptop --no-check; }
launch_check() { launch_ddptop; }
PDSH_CMD='for r in 0 1 2 3; do RANK=$r sh -c '"'"'echo "first $RANK"'"'"' & done; wait'
launch_pdsh() {
    $PY "$D/first_lines.py" "$D/launch.err" 64 "${PDSH[@]}" -f 64 -w "n[01-16]" "$PDSH_CMD"
}

# --- logins per node during one `ddptop run` with the preflight ---------------------------
# accepted NODE...: each node's count of "Accepted publickey for USER" in its sshd log.
accepted() {
    local n
    for n in "$@"; do
        grep -c "Accepted publickey for $BUSER " "$D/$n.sshd.log"
    done
}
FLEET=($(for ((i = 1; i <= NODES; i++)); do printf 'n%02d ' "$i"; done))
# logins_of_one_run FUNC: "MAX MIN" logins per node during one FUNC (launch_check, launch_pdsh).
logins_of_one_run() {
    local before after i max=0 min=999999 d
    before=($(accepted "${FLEET[@]}"))
    "$1" >/dev/null || return 1
    after=($(accepted "${FLEET[@]}"))
    for ((i = 0; i < NODES; i++)); do
        d=$((after[i] - before[i]))
        [ "$d" -gt "$max" ] && max=$d
        [ "$d" -lt "$min" ] && min=$d
    done
    echo "$max $min"
}
LOGINS_COLD="" LOGINS="" LOGINS_PDSH=""
if part logins; then
    echo "logins: SSH logins per node during one \`ddptop run\` with the preflight, and one pdsh ..."
    LOGINS_COLD=$(logins_of_one_run launch_check) || { echo "bench: ddptop run (first, agent uploaded) failed" >&2; bench_err; exit 1; }
    LOGINS=$(logins_of_one_run launch_check) || { echo "bench: ddptop run failed" >&2; bench_err; exit 1; }
    LOGINS_PDSH=$(logins_of_one_run launch_pdsh) || { echo "bench: pdsh failed" >&2; bench_err; exit 1; }
fi

L_DDP="" L_CHK="" L_PDSH=""
if part launch; then
    echo "launch: 16 nodes x 4 ranks, best of $REPEAT ..."
    best_turns L_DDP=launch_nocheck L_CHK=launch_check L_PDSH=launch_pdsh || exit 1
fi

# --- slow: one node's login shell takes SLOW_S seconds -------------------------------------
S_SSH="" S_DDP="" S_PDSH="" S_ERR=""
if part slow; then
    echo "slow: 16 nodes x 4 ranks, node slow16's logins take $SLOW_S s (~/.ssh/rc), once ..."
    sshd_fleet_add slow16 "LogLevel VERBOSE" "PermitUserRC yes" ||
        { echo "bench: the slow sshd did not start" >&2; exit 1; }
    # The agent on the nodes already, as in the launch row (they share $D/agent).
    [ -n "$L_CHK$LOGINS" ] || launch_nocheck >/dev/null || { echo "bench: warm-up failed" >&2; bench_err; exit 1; }
    head -n $((NODES - 1)) "$D/hosts16x4" >"$D/hosts16x4slow"
    echo "$BUSER@127.0.0.1:$SSHD_PORT slots=4" >>"$D/hosts16x4slow"
    t0=$(now_ms)
    ssh -F "$D/pdsh_config" slow16 true || { echo "bench: ssh slow16 true failed" >&2; exit 1; }
    S_SSH=$(($(now_ms) - t0))
    SLOWOPT=("${CONN[@]}")
    [ -n "$SLOW_TIMEOUT" ] && SLOWOPT+=(--timeout "$SLOW_TIMEOUT")
    # The agent is on the node already when an earlier part ran (as for the other nodes).
    S_DDP=$($PY "$D/first_lines.py" --report "$D/slow.err" 64 "$DDPTOP" run "$D/hosts16x4slow" "${SLOWOPT[@]}" \
        --master-port "$(sshd_pick_port)" --run-id "slow-$RANDOM$RANDOM" -- sh -c "$RANK_CMD")
    # Why ddptop stopped: its first line saying so (the check table's detail, else the last line).
    S_ERR=$(grep -m1 -E '^\[ddptop\] check: [^ ]+ +[a-z]+ +fail ' "$D/slow.err" ||
        grep -m1 -E 'timed out|refused' "$D/slow.err" || grep -v '^[[:space:]]*$' "$D/slow.err" | tail -n 1)
    S_ERR=$(echo "$S_ERR" | sed 's/^\[ddptop\] check: *//; s/   */  /g' | cut -c1-200)
    S_PDSH=$($PY "$D/first_lines.py" --report "$D/slow.pdsh.err" 64 "${PDSH[@]}" -f 64 \
        -w "n[01-15],slow16" "$PDSH_CMD")
fi

# --- tput: 8 ranks as fast as they can ------------------------------------------------------
PRINT="head -c ${MB}000000 /dev/zero | tr '\\0' x | fold -w 99"
BYTES=$((8 * MB * 1000000 / 99 * 100))   # fold adds a newline per 99 bytes (the last line has one too)
# Prints "MS BYTES CPU": CPU is the controller's user+sys seconds (its threads; it has no
# children over SSH), a figure the load of a shared machine moves less than the wall time.
tput_ddptop() {
    local rid=tput-$RANDOM$RANDOM t0 t bin=${1:-$DDPTOP} TIMEFORMAT='%U %S'
    t0=$(now_ms)
    { time "$bin" run "$D/hosts8x1" "${SSHOPT[@]}" --no-check --master-port "$(sshd_pick_port)" \
        --run-id "$rid" -- sh -c "$PRINT" >/dev/null 2>"$D/tput.err"; } 2>"$D/tput.cpu" || return 1
    t=$(($(now_ms) - t0))
    local got cpu
    got=$(cat "$D/logs/$rid"/attempt-0/rank-*.log | wc -c)
    cpu=$(awk '{ printf "%.2f", $1 + $2 }' "$D/tput.cpu")
    # every byte the ranks printed, no fewer (a short log is a lost line, not a slow round): the
    # run's directory is kept to look at
    if [ "$got" -ne "$BYTES" ]; then
        mkdir -p /tmp/ddptop-bench-short && mv "$D/logs/$rid" /tmp/ddptop-bench-short/ && cp "$D/tput.err" "/tmp/ddptop-bench-short/$rid/"
        echo "bench: logs hold $got bytes, the ranks printed $BYTES (the run: /tmp/ddptop-bench-short/$rid)" >&2
        return 1
    fi
    rm -rf "${D:?}/logs/$rid"
    echo "$t $got $cpu"
}
# Both print "MS CPU": CPU is the 8 ssh clients' user+sys seconds, the figure to set against
# the controller's (the sshd side is alike for all the contenders).
tput_ssh() {
    local t0 t TIMEFORMAT='%U %S'
    t0=$(now_ms)
    { time (
        pids=()
        for ((i = 1; i <= 8; i++)); do
            ssh -F "$D/pdsh_config" "$(printf 'n%02d' "$i")" "$PRINT" >/dev/null &
            pids+=($!)
        done
        for i in "${pids[@]}"; do wait "$i" || exit 1; done
    ); } 2>"$D/ssh.cpu" || return 1
    t=$(($(now_ms) - t0))
    echo "$t $(awk '{ printf "%.2f", $1 + $2 }' "$D/ssh.cpu")"
}
# The fairer second baseline: ddptop writes every byte to disk, so 8 x `ssh host CMD > file`,
# the files in the same directory as ddptop's log dir (the same disk), removed after each round.
tput_ssh_file() {
    local t0 t TIMEFORMAT='%U %S'
    mkdir -p "$D/logs/sshfile" || return 1
    t0=$(now_ms)
    { time (
        pids=()
        for ((i = 1; i <= 8; i++)); do
            ssh -F "$D/pdsh_config" "$(printf 'n%02d' "$i")" "$PRINT" >"$D/logs/sshfile/rank-$i.log" &
            pids+=($!)
        done
        for i in "${pids[@]}"; do wait "$i" || exit 1; done
    ); } 2>"$D/ssh.cpu" || return 1
    t=$(($(now_ms) - t0))
    rm -rf "${D:?}/logs/sshfile"
    echo "$t $(awk '{ printf "%.2f", $1 + $2 }' "$D/ssh.cpu")"
}
# BENCH_BASE=BUILD_DIR: another build's ddptop (an older commit's) as one more contender in the
# same rounds, for a before/after measured in the same time window.
tput_base() { tput_ddptop "$BENCH_BASE/ddptop"; }
T_DDP="" T_SSH="" T_SSHF="" T_BASE="" T_BYTES="" HOLD_KB=0 HOLD_BASE_KB=0
if part tput; then
    echo "tput: 8 ranks x $MB MB, best of $REPEAT ..."
    if [ -n "${BENCH_BASE:-}" ]; then
        best_turns T_DDP=tput_ddptop T_BASE=tput_base T_SSH=tput_ssh T_SSHF=tput_ssh_file || { cat "$D/tput.err" >&2; exit 1; }
    else
        best_turns T_DDP=tput_ddptop T_SSH=tput_ssh T_SSHF=tput_ssh_file || { cat "$D/tput.err" >&2; exit 1; }
    fi
    T_BYTES=$(echo "$T_DDP" | cut -d' ' -f2)
    # An agent's peak memory in the flood: it holds what it sent until the controller has it
    # on disk (docs/logs.md). One more round of each ddptop, the agents' VmRSS sampled every
    # 50 ms (the bench user's ddptop-agent processes), the largest kept.
    hold_kb() {
        local bin=$1 max=0 a r pid
        ( tput_ddptop "$bin" >/dev/null ) &
        pid=$!
        while kill -0 "$pid" 2>/dev/null; do
            for a in $(pgrep -u "$BUSER" -f ddptop-agent); do
                r=$(awk '/^VmRSS/ { print $2 }' "/proc/$a/status" 2>/dev/null)
                [ -n "$r" ] && [ "$r" -gt "$max" ] && max=$r
            done
            sleep 0.05
        done
        wait "$pid"
        echo "$max"
    }
    HOLD_KB=$(hold_kb "$DDPTOP")
    [ -n "${BENCH_BASE:-}" ] && HOLD_BASE_KB=$(hold_kb "$BENCH_BASE/ddptop")
    if [ -n "${BENCH_PERF:-}" ]; then
        # One more ddptop round under a system-wide profile: every process of the log path
        # (the ranks, the agents, sshd, the controller, its log writer) in one perf.data.
        mkdir -p "$BENCH_PERF" || exit 1
        echo "tput: one more ddptop round under perf record -a -g -> $BENCH_PERF/perf.data ..."
        perf record -q -a -g -F 999 -o "$BENCH_PERF/perf.data" -- bash -c "$(declare -f now_ms tput_ddptop \
            sshd_pick_port sshd_listening); $(declare -p D DDPTOP SSHOPT PRINT MB BYTES SSHD_PORT_MIN SSHD_PORT_MAX); \
            tput_ddptop" >"$BENCH_PERF/round.txt" 2>&1 || echo "bench: the perf round failed" >&2
        perf stat -a -x, -o "$BENCH_PERF/stat.csv" -- bash -c "$(declare -f now_ms tput_ddptop \
            sshd_pick_port sshd_listening); $(declare -p D DDPTOP SSHOPT PRINT MB BYTES SSHD_PORT_MIN SSHD_PORT_MAX); \
            tput_ddptop" >>"$BENCH_PERF/round.txt" 2>&1 || echo "bench: the perf stat round failed" >&2
        perf script -i "$BENCH_PERF/perf.data" -F comm,tid,ip,sym,dso >"$BENCH_PERF/script.txt" 2>/dev/null &&
            $PY tests/bench/log_path_stages.py "$BENCH_PERF/script.txt" >"$BENCH_PERF/stages.txt" &&
            echo "tput: the profile by stage is in $BENCH_PERF/stages.txt"
    fi
fi

# --- cpu: controller CPU and RSS, 64 ranks printing metrics lines ----------------------------
STEPPER='$|=1; for $i (1..100) { printf "{\"event\":\"step\",\"v\":1,\"rank\":%d,\"step\":%d,\"loss\":%.4f,\"step_ms\":100.0}\n", $ENV{RANK}, $i, 5/$i; select(undef,undef,undef,0.1) }'
C64_CPU=""
if part cpu; then
    echo "cpu: controller CPU and RSS, 64 ranks, 10 metrics lines/s each for 10 s ..."
    rj_start "$D/c64.out" --discard "$D/hosts16x4" "${SSHOPT[@]}" --no-check --master-port "$(sshd_pick_port)" \
        --run-id "cpu64-$RANDOM" -- perl -e "$STEPPER"
    rj_wait 120
    [ "$RJ_RC" = 0 ] || { echo "bench: 64-rank run failed (exit $RJ_RC)" >&2; tail "$D/c64.out.err" >&2; exit 1; }
    HZ=$(getconf CLK_TCK)
    C64_CPU=$(awk -v t="$RJ_CPU_TICKS" -v hz="$HZ" 'BEGIN { printf "%.2f", t / hz }')
    C64_WALL=$(awk -v ms="$RJ_MS" 'BEGIN { printf "%.1f", ms / 1000 }')
    C64_PCT=$(awk -v c="$C64_CPU" -v w="$C64_WALL" 'BEGIN { printf "%.1f", 100 * c / w }')
    C64_RSS=$(awk -v k="$RJ_HWM_KB" 'BEGIN { printf "%.1f", k / 1024 }')
fi
LOAD1=$(cut -d' ' -f1 /proc/loadavg)

# --- report ---------------------------------------------------------------------------------
sec() { awk -v ms="$1" 'BEGIN { printf "%.2f s", ms / 1000 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2fx", a / b }'; }
mbs() { awk -v b="$1" -v ms="$2" 'BEGIN { printf "%.1f", b / 1e6 / (ms / 1000) }'; }
kls() { awk -v b="$1" -v ms="$2" 'BEGIN { printf "%.0f", b / 100 / (ms / 1000) / 1000 }'; }
CPU=$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
DATE=$(date -u '+%Y-%m-%d %H:%M UTC')
NR="not run"
# Rows: WHAT|DDPTOP|BASELINE|RATIO|GOAL (markdown and the terminal table alike).
mm() { if [ "${1%% *}" = "${1#* }" ]; then echo "${1%% *}"; else echo "${1%% *} (min ${1#* })"; fi; }
ROWS=()
if [ -n "$LOGINS" ]; then
    ROWS+=("logins per node, one run with the preflight / pdsh|$(mm "$LOGINS")|$(mm "$LOGINS_PDSH")|-|1")
    ROWS+=("  the same, first run (agent uploaded)|$(mm "$LOGINS_COLD")|||")
else
    ROWS+=("logins per node, one run with the preflight / pdsh|$NR|||1")
fi
if [ -n "$L_CHK" ]; then
    l_ddp=${L_DDP%% *} l_chk=${L_CHK%% *} l_pdsh=${L_PDSH%% *}
    ROWS+=("launch 16 x 4, with the preflight / pdsh|$(sec "$l_chk")|$(sec "$l_pdsh")|$(ratio "$l_chk" "$l_pdsh")|<= 1.0x")
    ROWS+=("launch 16 x 4, --no-check / pdsh|$(sec "$l_ddp")|$(sec "$l_pdsh")|$(ratio "$l_ddp" "$l_pdsh")|<= 0.7x")
else
    ROWS+=("launch 16 x 4, with the preflight / pdsh|$NR|||<= 1.0x" "launch 16 x 4, --no-check / pdsh|$NR|||<= 0.7x")
fi
if [ -n "$S_DDP" ]; then
    read -r s_all s_end s_rc s_seen <<<"$S_DDP"
    read -r p_all p_end p_rc p_seen <<<"$S_PDSH"
    if [ "$s_rc" = 0 ] && [ "$s_all" != - ]; then s_txt=$(sec "$s_all"); else s_txt="exit $s_rc, $(sec "$s_end")"; fi
    if [ "$p_rc" = 0 ] && [ "$p_all" != - ]; then p_txt=$(sec "$p_all"); else p_txt="exit $p_rc, $(sec "$p_end")"; fi
    s_ratio=-
    [ "$s_rc" = 0 ] && [ "$s_all" != - ] && [ "$p_all" != - ] && s_ratio=$(ratio "$s_all" "$p_all")
    ROWS+=("launch 16 x 4, preflight, 1 node ${SLOW_S} s slow / pdsh|$s_txt|$p_txt|$s_ratio|")
else
    ROWS+=("launch 16 x 4, preflight, 1 node slow / pdsh|$NR|||")
fi
if [ -n "$T_DDP" ]; then
    t_ddp=${T_DDP%% *} t_ssh=${T_SSH%% *}
    t_sshf=${T_SSHF%% *}
    ROWS+=("log throughput, 8 ranks x $MB MB, MB/s / ssh > /dev/null|$(mbs "$T_BYTES" "$t_ddp")|$(mbs "$T_BYTES" "$t_ssh")|$(ratio "$t_ssh" "$t_ddp")|>= 0.9x")
    ROWS+=("log throughput, MB/s / ssh > file|$(mbs "$T_BYTES" "$t_ddp")|$(mbs "$T_BYTES" "$t_sshf")|$(ratio "$t_sshf" "$t_ddp")|>= 1.0x")
    ROWS+=("  wall time / ssh > /dev/null, ssh > file|$(sec "$t_ddp")|$(sec "$t_ssh"), $(sec "$t_sshf")|$(ratio "$t_ddp" "$t_ssh")|")
    ROWS+=("  thousand lines/s|$(kls "$T_BYTES" "$t_ddp")|$(kls "$T_BYTES" "$t_ssh")||")
    ROWS+=("  the controller's CPU (user+sys), that round / the 8 ssh > file clients'|$(echo "$T_DDP" | cut -d' ' -f3) s|$(echo "$T_SSHF" | cut -d' ' -f2) s|||")
    ROWS+=("  an agent's peak memory in the flood (VmRSS)|$((HOLD_KB / 1024)) MiB||||")
    if [ -n "$T_BASE" ]; then
        t_base=${T_BASE%% *}
        ROWS+=("  BENCH_BASE's agent's peak memory in the flood|$((${HOLD_BASE_KB:-0} / 1024)) MiB||||")
        ROWS+=("  BENCH_BASE's controller's CPU (user+sys), its best round|$(echo "$T_BASE" | cut -d' ' -f3) s||||")
        ROWS+=("  BENCH_BASE's ddptop, MB/s / ssh > /dev/null|$(mbs "$T_BYTES" "$t_base")|$(mbs "$T_BYTES" "$t_ssh")|$(ratio "$t_ssh" "$t_base")|")
        ROWS+=("  BENCH_BASE's ddptop, MB/s / ssh > file|$(mbs "$T_BYTES" "$t_base")|$(mbs "$T_BYTES" "$t_sshf")|$(ratio "$t_sshf" "$t_base")|")
    fi
else
    ROWS+=("log throughput, 8 ranks x $MB MB, MB/s / ssh > /dev/null|$NR|||>= 0.9x")
    ROWS+=("log throughput, MB/s / ssh > file|$NR|||>= 1.0x")
fi
# The slow row in words: ddptop's outcome and the proof that the node is slow.
SLOW_NOTE=""
if [ -n "$S_DDP" ]; then
    if [ "$s_rc" = 0 ]; then s_how="succeeded (exit 0), $s_seen/64 first lines, ended after $(sec "$s_end")"
    else s_how="failed (exit $s_rc) after $(sec "$s_end"), $s_seen/64 first lines: ${S_ERR:-no message}"; fi
    SLOW_NOTE="slow row (once; ddptop --timeout ${SLOW_TIMEOUT:-default}): plain \`ssh\` to the slow node alone took $(sec "$S_SSH"); pdsh exit $p_rc, $p_seen/64 first lines; ddptop $s_how"
fi

echo
printf '%-56s %-16s %-16s %-7s %s\n' "" ddptop baseline ratio goal
for r in "${ROWS[@]}"; do
    IFS='|' read -r w a b c g <<<"$r"
    printf '%-56s %-16s %-16s %-7s %s\n' "$w" "$a" "$b" "$c" "$g"
done
echo "baselines: pdsh -R ssh -f 64 (logins, launch); 8 parallel \`ssh host CMD > /dev/null\` and \`ssh host CMD > file\` (throughput)"
[ -n "$LOGINS" ] && echo "logins per node (max min): ddptop $LOGINS (first run: $LOGINS_COLD), pdsh $LOGINS_PDSH"
[ -n "$SLOW_NOTE" ] && echo "$SLOW_NOTE"
[ -n "$C64_CPU" ] && echo "64-rank run (16x4, 6400 metrics lines in ${C64_WALL} s): controller CPU ${C64_CPU} s (${C64_PCT}% of one core), peak RSS ${C64_RSS} MiB"
echo "load average (1 min) before/after: $LOAD0 / $LOAD1"
echo
echo "--- markdown for docs/performance.md ---"
echo "Measured $DATE on $(nproc) CPU cores ($CPU), $NODES sshd servers (OpenSSH, loopback), best of"
echo "$REPEAT (the slow row once); load average $LOAD0 before, $LOAD1 after. Every contender logs in as a"
echo "throwaway user with a plain shell (bash, empty ~/.bashrc) that the bench creates and removes, not as"
echo "root, whose ~/.bashrc serializes concurrent logins (pyenv's lock). Launch: until every one of 16"
echo "nodes x 4 ranks printed its first line, ddptop headless with its agent on the nodes, against"
echo "\`pdsh -R ssh -f 64\`; logins: sshd's \"Accepted publickey\" lines per node; throughput: ddptop"
echo "(every byte to its log files) against 8 parallel \`ssh host CMD > /dev/null\` and 8 \`ssh host CMD > file\`"
echo "(files beside ddptop's log dir, same disk)."
echo
echo "| measurement | ddptop | baseline | ratio | goal |"
echo "|---|---:|---:|---:|---:|"
for r in "${ROWS[@]}"; do
    IFS='|' read -r w a b c g <<<"$r"
    echo "| ${w#  } | $a | $b | $c | $g |"
done
if [ -n "$SLOW_NOTE" ]; then
    echo
    echo "- ${SLOW_NOTE^}."
fi
if [ -n "$C64_CPU" ]; then
    echo
    echo "- 64-rank run (16 x 4, every rank 10 metrics lines/s for 10 s): controller CPU ${C64_CPU} s in ${C64_WALL} s"
    echo "  (${C64_PCT}% of one core), peak RSS (VmHWM) ${C64_RSS} MiB"
fi
