#!/usr/bin/env bash
# Benchmark: the controller's CPU (user + sys, from /proc/PID/stat) and RSS while 1,024 ranks
# each report a metrics line 10 times a second (10,240 lines/s), with the dashboard open in
# tmux, over BENCH_SECONDS (default 60) once every rank reports; then the same with
# --headless (output to /dev/null) so the dashboard's own share shows as the difference.
# Ranks are tests/bench/bench_ticker.c (one wake-up and one write per line). The ranks run on
# BENCH_NODES (default 4) nodes behind real sshd on loopback, BENCH_RANKS / BENCH_NODES each
# (BENCH_NODES=1: one local agent, no SSH). Goal: the dashboard run under 10% of one core, RSS
# flat (start / middle / end). Also prints the agents' CPU (they read the ranks' pipes).
# Figures go to docs/performance.md ("Dashboard").
set -u
cd "$(dirname "$0")/../.."
. tests/lib/sshd.sh

BUILD_DIR=${DDPTOP_BUILD:-$PWD/${BUILD:-build}}
DDPTOP=$BUILD_DIR/ddptop
TICKER=$BUILD_DIR/bench/bench_ticker
RANKS=${BENCH_RANKS:-1024}
NODES=${BENCH_NODES:-4}
SECS=${BENCH_SECONDS:-60}
# The model's per-rank log rings and metric series grow until their budget (docs/logs.md:
# about 1,000 lines and 1,000 points per rank at 1,024 ranks), which 10 lines/s fill in
# about 100 s; memory is measured after that, where it should stay flat.
WARMUP=${BENCH_WARMUP:-120}
SOCK=ddpt-bench-$$
D=$(mktemp -d "${TMPDIR:-/tmp}/ddptop-bench.XXXXXX") || exit 1
# the dashboard's session socket in this run's own directory (docs/dashboard.md)
mkdir -m 700 "$D/xdg" && export XDG_RUNTIME_DIR=$D/xdg
HZ=$(getconf CLK_TCK)
T() { tmux -L "$SOCK" "$@"; }

# Descendants of the given pids, from one ps snapshot (a pgrep per process is far too slow
# with 2,000 rank processes).
tree_of() {
    ps -eo pid=,ppid= | awk -v roots="$*" '
        { parent[$1] = $2 }
        END {
            n = split(roots, r, " "); for (i = 1; i <= n; i++) root[r[i]] = 1
            for (p in parent) {
                q = parent[p]
                while (q > 1) { if (q in root) { print p; break }; q = parent[q] }
            }
        }'
}
HEADLESS_PID=""
cleanup() {
    local srv pids
    srv=$(T display -p '#{pid}' 2>/dev/null)
    if [ -n "$srv" ]; then
        pids=$(tree_of "$srv")
        T kill-server 2>/dev/null
        [ -n "$pids" ] && kill -KILL $pids 2>/dev/null
    fi
    rm -f "${TMUX_TMPDIR:-/tmp}/tmux-$(id -u)/$SOCK"   # kill-server leaves the socket file
    if [ -n "$HEADLESS_PID" ]; then
        pids=$(tree_of "$HEADLESS_PID")
        kill -KILL "$HEADLESS_PID" $pids 2>/dev/null
    fi
    sshd_cleanup
    rm -rf "$D"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

for f in "$DDPTOP" "$TICKER"; do
    [ -x "$f" ] || { echo "bench: $f not built (make all bench-programs)" >&2; exit 1; }
done
command -v tmux >/dev/null || { echo "bench: tmux missing (make deps)" >&2; exit 1; }

cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null; }
rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status" 2>/dev/null; }
# The newest step line count in the run's logs: every rank has written once.
all_reporting() {
    local n
    n=$(find "$D/logs/$1/attempt-0" -name 'rank-*.log' -size +0 2>/dev/null | wc -l)
    [ "$n" -ge "$RANKS" ]
}
wait_reporting() { # RUN_ID PID: until every rank's log has a line (at most 180 s)
    local end=$((SECONDS + 180))
    while [ $SECONDS -lt $end ]; do
        all_reporting "$1" && return 0
        kill -0 "$2" 2>/dev/null || return 1
        sleep 1
    done
    return 1
}
sum_ticks() { local p t=0 x; for p in "$@"; do x=$(cpu_ticks "$p"); t=$((t + ${x:-0})); done; echo "$t"; }
# measure LABEL PID AGENT_PIDS...: CPU% of one core over SECS, RSS at start / middle / end.
measure() {
    local label=$1 pid=$2 c0 a0 t0 c1 a1 t1 r0 r1 r2
    shift 2
    c0=$(cpu_ticks "$pid"); a0=$(sum_ticks "$@"); t0=$(date +%s%N); r0=$(rss_kb "$pid")
    sleep $((SECS / 2))
    r1=$(rss_kb "$pid")
    sleep $((SECS - SECS / 2))
    c1=$(cpu_ticks "$pid"); a1=$(sum_ticks "$@"); t1=$(date +%s%N); r2=$(rss_kb "$pid")
    if [ -z "$c1" ] || [ -z "$r2" ]; then echo "bench: $label: the controller ended early" >&2; return 1; fi
    awk -v l="$label" -v c0="$c0" -v c1="$c1" -v a0="${a0:-0}" -v a1="${a1:-0}" -v t0="$t0" \
        -v t1="$t1" -v hz="$HZ" -v r0="$r0" -v r1="$r1" -v r2="$r2" 'BEGIN {
        s = (t1 - t0) / 1e9
        printf "| %s | %.1f%% | %.1f%% | %.1f / %.1f / %.1f MB |\n", l,
               100 * (c1 - c0) / hz / s, 100 * (a1 - a0) / hz / s, r0 / 1024, r1 / 1024, r2 / 1024 }'
}
# The agents (not the per-rank keepers under them): ddptop-agent processes under the
# controller or the sshd servers whose parent is no agent. An uploaded agent is
# ddptop-agent-HASH, its comm cut to 15 characters.
agents_of() {
    local roots=$1
    [ "$NODES" -gt 1 ] && roots="${SSHD_PIDS[*]}"
    local under
    under=" $(tree_of $roots | tr '\n' ' ') "
    ps -eo pid=,ppid=,comm= | awk -v under="$under" '
        { comm[$1] = $3; parent[$1] = $2 }
        END {
            for (p in comm)
                if (comm[p] ~ /^ddptop-agent/ && comm[parent[p]] !~ /^ddptop-agent/ &&
                    index(under, " " p " ")) print p
        }'
}

ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
COMMON=(--log-dir "$D/logs" --hang-timeout 0 --no-check)
if [ "$NODES" -gt 1 ]; then
    sshd_setup || exit 1
    for ((i = 1; i <= NODES; i++)); do
        sshd_start_loopback "b$i" || { echo "bench: sshd b$i did not start" >&2; exit 1; }
        sshd_known_hosts_line 127.0.0.1 "$SSHD_PORT" >>"$SSHD_DIR/known_hosts"
        echo "127.0.0.1:$SSHD_PORT slots=$((RANKS / NODES))" >>"$SSHD_DIR/hosts"
    done
    RANKS=$((RANKS / NODES * NODES))
    COMMON=("$SSHD_DIR/hosts" -i "$SSHD_DIR/id_ed25519" -F "$SSHD_DIR/ssh_config"
            --known-hosts "$SSHD_DIR/known_hosts" --agent-dir "$SSHD_DIR/agent"
            --master-port "$(sshd_pick_port)" "${COMMON[@]}")
    where="$NODES nodes behind sshd on loopback"
else
    COMMON=(--nproc-per-node "$RANKS" "${COMMON[@]}")
    where="1 local node (no SSH)"
fi
echo "dashboard benchmark: $RANKS ranks on $where, 10 metrics lines/s each;" \
     "${WARMUP}s warm-up, then ${SECS}s measured per run; $(nproc) cores"
echo
echo "| run | controller CPU (one core) | agent CPU | controller RSS start / middle / end |"
echo "|---|---|---|---|"

# --- the dashboard, in tmux ---
T new-session -d -s bench -x 200 -y 50 \
    "LANG=C.UTF-8 $DDPTOP ${COMMON[*]} --run-id dash -- $TICKER 100; sleep 600"
srv=$(T display -p '#{pid}')
pid=""
for _ in $(seq 1 100); do
    for p in $(tree_of "$srv"); do
        # the controller: the session's dashboard process, under the ddptop-session server
        [ "$(cat /proc/$p/comm 2>/dev/null)" = ddptop ] &&
            [ "$(cat /proc/"$(awk '{ print $4 }' /proc/$p/stat)"/comm 2>/dev/null)" = ddptop-session ] && pid=$p
    done
    [ -n "$pid" ] && break
    sleep 0.1
done
[ -n "$pid" ] || { echo "bench: ddptop did not start" >&2; exit 1; }
wait_reporting dash "$pid" || { echo "bench: not every rank reported"; T capture-pane -p -t bench >&2; exit 1; }
sleep "$WARMUP"
measure "dashboard (tmux 200x50)" "$pid" $(agents_of "$pid") || exit 1
screen=$(T capture-pane -p -t bench)
T kill-server 2>/dev/null
sleep 6   # the agents end their ranks and exit

# --- headless, for the difference ---
"$DDPTOP" "${COMMON[@]}" --headless --run-id headless -- "$TICKER" 100 >/dev/null 2>&1 &
HEADLESS_PID=$!
disown "$HEADLESS_PID"
wait_reporting headless "$HEADLESS_PID" || { echo "bench: headless: not every rank reported"; exit 1; }
sleep "$WARMUP"
measure "headless (stdout to /dev/null)" "$HEADLESS_PID" $(agents_of "$HEADLESS_PID") || exit 1

echo
echo "the dashboard's header during the run:"
head -3 <<<"$screen"
echo "machine: $(nproc) cores, $(awk '/MemTotal/ { printf "%.0f GB", $2 / 1048576 }' /proc/meminfo)," \
     "$(uname -sr), load average $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%Y-%m-%d)"
