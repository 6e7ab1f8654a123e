#!/usr/bin/env bash
# Benchmark: reconnecting after a partition. 16 "nodes", each a network namespace with its own
# sshd on port 22 (tests/lib/netns.sh), one rank per node printing a ~72-byte JSON line every
# 1 ms (build/bench/bench_ticker 1: 1,000 lines/s, 16,000 lines/s in all); `ddptop run
# --headless --node-timeout 10` in the root namespace. Once every rank printed, every node's
# link goes down (`ip -n NS link set eth0 down`) for BENCH_PARTITION_S (default 60) seconds,
# while the ranks go on and each agent spools their output; then every link comes up. Measured:
#  catch-up: the time from link-up until all 16 nodes logged "caught up" (events.jsonl), the
#     first and last "reconnected after", the messages and bytes sent again (the agents' wire
#     messages, as the caught-up events count them) and the replay rate: those bytes over the
#     time from link-up to the last caught-up;
#  baseline: plain ssh throughput on the same 16 namespaced links, one file per node as large
#     as what that node sent again: 16 parallel `ssh USER@NODE cat FILE > /dev/null`, and the
#     same into a file (ddptop writes every byte to disk); best of BENCH_REPEAT (default 3);
#  the controller's peak RSS (VmHWM) over the run, replay included; that every rank's log holds
#     its steps 1..N once each, in order; that nothing (agent, rank) is left after ddptop ends
#     on SIGTERM (exit 1).
# Login user: the throwaway user ddprc<pid> (sshd_user_create: bash, empty ~/.bashrc, own key),
# not root, whose ~/.bashrc (pyenv's lock) serializes concurrent logins. Needs root (namespaces,
# useradd). Takes about 80 s. Prints a few lines to paste into docs/performance.md.
# Env: BENCH_PARTITION_S (default 60), BENCH_REPEAT (default 3, the ssh baselines' rounds),
# BENCH_RECONNECT_NODES (default 16: the figures of docs/performance.md; 1 shows one node's
# replay path alone),
# BENCH_CATCHUP_LIMIT_S (default 90: how long after link-up to wait for every node's catch-up),
# BENCH_RECONNECT_PERF=FILE (`perf record` of the controller from link-up until all caught up),
# BENCH_RECONNECT_PERF_ALL=FILE (`perf record -a -g` of the whole machine over the same window:
#   the agents, bridges, sshd and ranks beside the controller),
# BENCH_RECONNECT_KEEP=FILE (the run's events.jsonl kept there),
# BENCH_RECONNECT_PIN=1 (the controller's machine apart from the nodes': the nodes' sshds, with
#   all they start (agents, ranks, logins), and this script on CPU 0; ddptop, and the baseline's
#   ssh clients, on CPU 1 alone: what a login node whose nodes are other machines would see,
#   on a machine of two cores),
# DDPTOP_BUILD=DIR (another build, e.g. the one before a change, to compare in the same hour).
set -u
cd "$(dirname "$0")/../.." || exit 1
. tests/lib/tap.sh      # run_job.sh's assertions print TAP lines; unused here
. tests/lib/sshd.sh
. tests/lib/netns.sh
. tests/lib/run_job.sh
. tests/lib/perf.sh
ulimit -c 0

PIN=${BENCH_RECONNECT_PIN:-0}
NCPU=$(nproc)   # before the pinning below narrows this script to one
NODES=${BENCH_RECONNECT_NODES:-16}
PART_S=${BENCH_PARTITION_S:-60}
REPEAT=${BENCH_REPEAT:-3}
CATCHUP_LIMIT_S=${BENCH_CATCHUP_LIMIT_S:-90}
TICKER=${DDPTOP_BUILD:-$PWD/${BUILD:-build}}/bench/bench_ticker
BUSER=ddprc$$
PY=/usr/bin/python3

D=""
BASE_PIDS=()
bench_cleanup() {
    rj_cleanup
    local p
    for p in "${BASE_PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
    if [ -n "$D" ]; then
        kill_marker_pids "$D/bin"
        kill_marker_pids "$D/agent"
        kill_marker_pids "$D/base"
    fi
    sshd_cleanup     # the servers, then the throwaway user (its processes, userdel -r), the dir
    netns_cleanup
}
trap bench_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

fail() { echo "bench: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || fail "needs root (network namespaces, a throwaway user)"
[ -x "$DDPTOP" ] || fail "$DDPTOP not built (make all)"
[ -x "$TICKER" ] || fail "$TICKER not built (make bench-programs)"
netns_available || fail "cannot create network namespaces (needs CAP_NET_ADMIN)"
sshd_setup || fail "test directory and keys"
D=$SSHD_DIR
sshd_user_create "$BUSER" || fail "could not create user $BUSER"
UHOME=$(getent passwd "$BUSER" | cut -d: -f6)
KEY=$SSHD_USER_KEY
# What the user's sessions need: the agent dir, the rank program (world-readable), its home.
mkdir -p "$D/agent" "$D/bin" "$D/logs" "$D/base" && chown "$BUSER:" "$D/agent"
cp "$TICKER" "$D/bin/bench_ticker" && chmod 755 "$D/bin" "$D/bin/bench_ticker"
runuser -u "$BUSER" -- test -x "$D/bin/bench_ticker" -a -w "$D/agent" -a -x "$UHOME" ||
    fail "$BUSER cannot reach $D or its home"

LOAD0=$(cut -d' ' -f1 /proc/loadavg)
echo "setting up $NODES node namespaces on a bridge, an sshd in each (login user $BUSER) ..."
netns_setup "$NODES" || fail "$NODES namespaces on a bridge"
A=("${NETNS_ADDR[@]}")
for ((i = 0; i < NODES; i++)); do
    sshd_start "n$i" "${A[i]}" 22 --netns "${NETNS_NODE[i]}" || fail "sshd in namespace $i"
    sshd_known_hosts_line "${A[i]}" 22 >>"$D/known_hosts"
    echo "$BUSER@${A[i]} slots=1" >>"$D/hosts"
done
CLIENT=()   # what runs the controller's side: ddptop and the baseline's ssh clients
if [ "$PIN" = 1 ]; then
    [ "$NCPU" -ge 2 ] || fail "BENCH_RECONNECT_PIN=1 needs 2 CPUs"
    # every sshd (and so every agent, rank and login it starts later) and this script on CPU 0
    for ((i = 0; i < NODES; i++)); do
        for p in $(ip netns pids "${NETNS_NODE[i]}"); do taskset -a -p -c 0 "$p" >/dev/null || fail "taskset $p"; done
    done
    taskset -p -c 0 $$ >/dev/null || fail "taskset $$"
    CLIENT=(taskset -c 1)
fi
SSH=(ssh -i "$KEY" -F "$D/ssh_config" -o "UserKnownHostsFile=$D/known_hosts" -o StrictHostKeyChecking=yes
     -o BatchMode=yes -o IdentitiesOnly=yes)
"${SSH[@]}" "$BUSER@${A[0]}" true || fail "plain ssh to ${A[0]} as $BUSER failed"

now_ns() { date +%s%N; }
links() { # links up|down: every node's eth0
    local i
    for ((i = 0; i < NODES; i++)); do ip -n "${NETNS_NODE[i]}" link set eth0 "$1" || return 1; done
}
cpu_snap() { # the busy and total jiffies of CPU 0 and CPU 1 (/proc/stat), for cpu_busy
    awk '$1 == "cpu0" || $1 == "cpu1" { t = 0; for (i = 2; i <= NF; i++) t += $i; printf "%d %d ", t - $5 - $6, t }' /proc/stat
}
cpu_busy() { # cpu_busy "SNAP0" "SNAP1": "CPU 0 X%, CPU 1 Y% busy" between the two
    awk -v a="$1" -v b="$2" 'BEGIN { split(a, x); split(b, y)
        printf "CPU 0 %.0f%%, CPU 1 %.0f%% busy", 100 * (y[1] - x[1]) / (y[2] - x[2]), 100 * (y[3] - x[3]) / (y[4] - x[4]) }'
}
sample_for() { # sample_for SECONDS: rj_sample every 0.2 s for that long (the controller's RSS)
    local end=$(($(now_ns) + $1 * 1000000000))
    while [ "$(now_ns)" -lt "$end" ]; do rj_sample; sleep 0.2; done
}

# --- the run -------------------------------------------------------------------------------
RID=reconnect$$-$RANDOM
RUN_DIR=$D/logs/$RID
EV=$RUN_DIR/events.jsonl
echo "starting ddptop run: $NODES nodes x 1 rank, each printing 1,000 lines/s ..."
T_START=$(now_ns)
rj_start "$D/run.out" "$D/hosts" --headless --no-check --node-timeout 10 --known-hosts "$D/known_hosts" \
    -i "$KEY" -F "$D/ssh_config" --agent-dir "$D/agent" --log-dir "$D/logs" --workdir "$UHOME" \
    --run-id "$RID" -- "$D/bin/bench_ticker" 1
[ "$PIN" = 1 ] && { taskset -a -p -c 1 "$RJ_PID" >/dev/null || fail "taskset ddptop"; }
all_printing() {
    local r
    kill -0 "$RJ_PID" 2>/dev/null || return 0   # ended: checked below
    for ((r = 0; r < NODES; r++)); do grep -q -m1 "^\[r$r " "$D/run.out" || return 1; done
}
{ wait_until 60 all_printing && kill -0 "$RJ_PID" 2>/dev/null; } ||
    { tail -5 "$D/run.out" >&2; tail -15 "$D/run.out.err" >&2; fail "not every rank printed within 60 s"; }
START_MS=$((($(now_ns) - T_START) / 1000000))
sample_for 3   # steady state before the partition
RSS_BEFORE=$(awk '/^VmRSS:/ {print $2}' "/proc/$RJ_PID/status" 2>/dev/null)

echo "partition: every node's link down for $PART_S s ..."
T_DOWN=$(now_ns)
links down || fail "could not take the links down"
sample_for "$PART_S"
kill -0 "$RJ_PID" 2>/dev/null || { tail -15 "$D/run.out.err" >&2; fail "ddptop ended during the partition"; }
rj_sample
HWM_BEFORE_UP=$RJ_HWM_KB
TICKS_UP=$RJ_CPU_TICKS
PERF_PID=""
if [ -n "${BENCH_RECONNECT_PERF:-}" ]; then   # the controller's profile over the catch-up
    perf record -q --call-graph dwarf,16384 -p "$RJ_PID" -o "$BENCH_RECONNECT_PERF" >/dev/null 2>&1 &
    PERF_PID=$!
    sleep 0.5
elif [ -n "${BENCH_RECONNECT_PERF_ALL:-}" ]; then   # the whole machine over the catch-up
    perf record -q -a -g -o "$BENCH_RECONNECT_PERF_ALL" >/dev/null 2>&1 &
    PERF_PID=$!
    sleep 0.5
fi
links up || fail "could not bring the links up"
T_UP=$(now_ns)
SNAP_UP=$(cpu_snap)
echo "links up; waiting until all $NODES nodes caught up (at most $CATCHUP_LIMIT_S s) ..."
# The wait takes bash's builtins only: a grep, a date and a sleep every tenth of a second (and
# the sample's awk and cat) took 7% of the two cores while the nodes replayed (a whole-machine
# profile, 2026-11-28), which the plain ssh baseline below does not pay. The events are read
# on from where the last tick stopped; the sample (VmHWM is the kernel's own peak) every 0.5 s.
exec {EVFD}<"$EV" || fail "cannot read $EV"
exec {ZFD}<> <(:)   # a pipe nobody writes: read -t on it sleeps without a process
caught=0 part="" tick=0
deadline_us=$((T_UP / 1000 + CATCHUP_LIMIT_S * 1000000))
while [ "$caught" -lt "$NODES" ] && [ "${EPOCHREALTIME/./}" -lt "$deadline_us" ] && kill -0 "$RJ_PID" 2>/dev/null; do
    while IFS= read -r -u "$EVFD" l; do
        l=$part$l part=""
        [[ $l == *"caught up"* ]] && caught=$((caught + 1))
    done
    part=$part$l   # a line not written whole yet
    ((tick++ % 5 == 0)) && rj_sample
    read -r -t 0.1 -u "$ZFD" _
done
exec {EVFD}<&- {ZFD}<&-
T_CAUGHT=$(now_ns)
SNAP_CAUGHT=$(cpu_snap)
[ -n "${BENCH_RECONNECT_KEEP:-}" ] && cp "$EV" "$BENCH_RECONNECT_KEEP"
echo "link-up at $(date -u -d @$((T_UP / 1000000000)) +%H:%M:%S).$(printf %09d $((T_UP % 1000000000)) | cut -c1-3) UTC"
[ -n "$PERF_PID" ] && perf_stop "$PERF_PID"
rj_sample
HWM_KB=$RJ_HWM_KB
CPU_CATCHUP=$(awk -v t="$((RJ_CPU_TICKS - TICKS_UP))" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.2f", t / hz }')
WALL_CATCHUP=$(awk -v ns="$((T_CAUGHT - T_UP))" 'BEGIN { printf "%.2f", ns / 1e9 }')
RUNNING_AFTER=no
kill -0 "$RJ_PID" 2>/dev/null && RUNNING_AFTER=yes

# --- stop: SIGTERM, exit 1, nothing left --------------------------------------------------------
kill -TERM "$RJ_PID" 2>/dev/null
T_TERM=$(now_ns)
rj_wait 60
STOP_MS=$((($(now_ns) - T_TERM) / 1000000))
STOP_RC=$RJ_RC
OUT_BYTES=$(stat -c %s "$D/run.out" 2>/dev/null || echo 0)
nothing_left() { no_marker_pids "$D/bin/bench_ticker" && no_marker_pids "$D/agent"; }
if wait_until 15 nothing_left; then
    LEFT="none"
else
    LEFT="$(for p in $(marker_pids "$D/bin/bench_ticker") $(marker_pids "$D/agent"); do
        printf '%s(%s) ' "$p" "$(cat "/proc/$p/comm" 2>/dev/null)"; done)"
fi

# --- what the events and the logs say ----------------------------------------------------------
# Prints KEY=VALUE lines for the shell; writes each node's bytes sent again to $D/base/sizes.
$PY - "$EV" "$T_DOWN" "$T_UP" "$NODES" "$RUN_DIR" "$D/base/sizes" "${A[@]}" >"$D/figures" 2>"$D/figures.err" <<'PY'
import datetime, json, re, sys
ev_path, t_down, t_up, nodes, run_dir, sizes_path = sys.argv[1:7]
addrs = sys.argv[7:]
t_down, t_up, nodes = int(t_down) / 1e9, int(t_up) / 1e9, int(nodes)
def t(e):
    return datetime.datetime.strptime(e["time"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=datetime.timezone.utc).timestamp()
E = [json.loads(l) for l in open(ev_path, encoding="utf-8") if l.strip()]
def node_of(text):
    m = re.match(r"node (\S+?):? ", text)
    return m.group(1) if m else None
unreach, recon, caught, lost, failed_tries = {}, {}, {}, [], 0
for e in E:
    text, when = e.get("text") or "", t(e)
    if e.get("kind") == "node_lost":
        lost.append(text)
    if when < t_down:
        continue
    n = node_of(text)
    if " unreachable (" in text and n:
        unreach.setdefault(n, when)
    elif " reconnected after " in text and n and when >= t_up:
        recon.setdefault(n, when)
    elif " caught up: " in text and n and when >= t_up:
        m = re.search(r"caught up: (\d+) messages? \((\d+) bytes\)", text)
        if m:
            caught[n] = (when, int(m.group(1)), int(m.group(2)))
    elif "reconnect attempt" in text and "failed" in text:
        failed_tries += 1
def key(n):  # "user@addr" or "addr"
    return n.split("@")[-1]
out = {}
out["CAUGHT_N"] = len(caught)
out["RECON_N"] = len(recon)
out["UNREACH_N"] = len(unreach)
out["LOST_N"] = len(lost)
out["TRY_FAIL_EVENTS"] = failed_tries
if unreach:
    out["UNREACH_FIRST"] = f"{min(unreach.values()) - t_down:.2f}"
    out["UNREACH_LAST"] = f"{max(unreach.values()) - t_down:.2f}"
if recon:
    out["RECON_FIRST"] = f"{min(recon.values()) - t_up:.2f}"
    out["RECON_LAST"] = f"{max(recon.values()) - t_up:.2f}"
if caught:
    last = max(c[0] for c in caught.values())
    msgs = sum(c[1] for c in caught.values())
    byts = sum(c[2] for c in caught.values())
    out["CAUGHT_FIRST"] = f"{min(c[0] for c in caught.values()) - t_up:.2f}"
    out["CAUGHT_LAST"] = f"{last - t_up:.2f}"
    out["MSGS"] = msgs
    out["BYTES"] = byts
    out["BYTES_MIN"] = min(c[2] for c in caught.values())
    out["BYTES_MAX"] = max(c[2] for c in caught.values())
    out["RATE"] = f"{byts / 1e6 / (last - t_up):.2f}"
    if recon:
        first_r = min(recon.values())
        out["RATE_XFER"] = f"{byts / 1e6 / (last - first_r):.2f}" if last > first_r else "-"
    # per node: catch-up after its own reconnect
    per = [c[0] - recon[n] for n, c in caught.items() if n in recon]
    if per:
        out["PER_NODE_MAX"] = f"{max(per):.2f}"
        out["PER_NODE_MED"] = f"{sorted(per)[len(per) // 2]:.2f}"
# baseline sizes: each node's bytes sent again, in hostfile order (8 MB if unknown)
by_addr = {key(n): c[2] for n, c in caught.items()}
with open(sizes_path, "w") as f:
    for a in addrs:
        f.write(f"{by_addr.get(a, 8000000)}\n")
# every rank's log: its steps 1..N, once each, in order
bad, lines, log_bytes = [], [], 0
for r in range(nodes):
    try:
        data = open(f"{run_dir}/attempt-0/rank-{r}.log", "rb").read()
        log_bytes += len(data)
        steps = [int(m.group(1)) for m in re.finditer(rb'"step":(\d+),', data)]
    except OSError as ex:
        bad.append(f"rank {r}: {ex}")
        continue
    lines.append(len(steps))
    if steps != list(range(1, len(steps) + 1)):
        seen, dup, gap = set(), 0, 0
        for s in steps:
            dup += s in seen
            seen.add(s)
        gap = (max(steps) if steps else 0) - len(seen)
        bad.append(f"rank {r}: {len(steps)} lines, {dup} doubled, {gap} missing")
out["LOG_LINES_MIN"] = min(lines) if lines else 0
out["LOG_LINES_MAX"] = max(lines) if lines else 0
out["LOG_BYTES"] = log_bytes
out["LOG_LINE_B"] = f"{log_bytes / max(1, sum(lines)):.0f}"
out["LOG_BAD"] = "; ".join(bad[:4]) + (f" (+{len(bad) - 4} more)" if len(bad) > 4 else "")
for k, v in out.items():
    print(f"{k}={json.dumps(str(v))}")
if lost:
    print(f"LOST_TEXT={json.dumps(lost[0][:200])}")
PY
[ -s "$D/figures" ] || { cat "$D/figures.err" >&2; fail "could not read $EV"; }
CAUGHT_N=0 RECON_N=0 UNREACH_N=0 LOST_N=0 TRY_FAIL_EVENTS=0 LOST_TEXT="" LOG_BAD=""
UNREACH_FIRST=- UNREACH_LAST=- RECON_FIRST=- RECON_LAST=- CAUGHT_FIRST=- CAUGHT_LAST=- MSGS=0 BYTES=0
BYTES_MIN=0 BYTES_MAX=0 LOG_BYTES=0 LOG_LINE_B=- RATE="" RATE_XFER=- PER_NODE_MAX=- PER_NODE_MED=- LOG_LINES_MIN=0 LOG_LINES_MAX=0
eval "$(cat "$D/figures")"

# --- baseline: plain ssh on the same links -------------------------------------------------------
echo "baseline: $NODES parallel plain ssh \`cat FILE\` of each node's replayed size, best of $REPEAT ..."
mapfile -t SIZES <"$D/base/sizes"
LINE='{"event":"step","v":1,"rank":0,"step":123456,"loss":1.23456,"step_ms":1}'
SSH_TOTAL=0
for ((i = 0; i < NODES; i++)); do
    yes "$LINE" | head -c "${SIZES[i]}" >"$D/base/n$i.dat" || fail "could not write $D/base/n$i.dat"
    SSH_TOTAL=$((SSH_TOTAL + SIZES[i]))
done
chmod 644 "$D/base"/n*.dat
mkdir -p "$D/base/out"
ssh_all() { # ssh_all null|disk: prints the ms of NODES parallel ssh cat, fails if one failed
    local t0 i rc=0 dest
    BASE_PIDS=()
    t0=$(now_ns)
    for ((i = 0; i < NODES; i++)); do
        dest=/dev/null
        [ "$1" = disk ] && dest=$D/base/out/n$i.dat
        "${CLIENT[@]}" "${SSH[@]}" "$BUSER@${A[i]}" cat "$D/base/n$i.dat" >"$dest" </dev/null &
        BASE_PIDS+=($!)
    done
    for i in "${BASE_PIDS[@]}"; do wait "$i" || rc=1; done
    BASE_PIDS=()
    echo $((($(now_ns) - t0) / 1000000))
    return $rc
}
best_of() { # best_of null|disk: the smallest ms of REPEAT runs
    local r ms best=""
    for ((r = 0; r < REPEAT; r++)); do
        rm -f "$D/base/out"/n*.dat
        ms=$(ssh_all "$1") || return 1
        [ -z "$best" ] || [ "$ms" -lt "$best" ] && best=$ms
    done
    echo "$best"
}
SNAP_B0=$(cpu_snap)
SSH_NULL_MS=$(best_of null) || fail "plain ssh cat failed"
SNAP_B1=$(cpu_snap)
SSH_DISK_MS=$(best_of disk) || fail "plain ssh cat > file failed"
got=$(cat "$D/base/out"/n*.dat | wc -c)
[ "$got" = "$SSH_TOTAL" ] || fail "plain ssh wrote $got bytes, want $SSH_TOTAL"
LOAD1=$(cut -d' ' -f1 /proc/loadavg)

# --- report ----------------------------------------------------------------------------------
mbs() { awk -v b="$1" -v ms="$2" 'BEGIN { printf "%.2f", b / 1e6 / (ms / 1000) }'; }
mib() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }
SSH_NULL_RATE=$(mbs "$SSH_TOTAL" "$SSH_NULL_MS")
SSH_DISK_RATE=$(mbs "$SSH_TOTAL" "$SSH_DISK_MS")
CPU=$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
DATE=$(date -u '+%Y-%m-%d %H:%M UTC')
ratio() { if [ -n "$1" ] && [ "$1" != - ]; then awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2fx", a / b }'; else echo "-"; fi; }

echo
echo "--- for docs/performance.md ---"
echo "reconnect after a partition: measured $DATE on $NCPU CPU cores ($CPU); load average $LOAD0 before, $LOAD1 after"
echo "setup: $NODES nodes (network namespaces on one bridge, sshd each, login user with a plain shell), 1 rank each printing"
echo "  1,000 lines/s ($LOG_LINE_B-byte JSON lines), \`ddptop run --headless --no-check --node-timeout 10\`; every link down for $PART_S s, then up"
[ "$PIN" = 1 ] && echo "pinned: ddptop and the baseline's ssh clients on CPU 1 alone; the nodes' sshds, agents, ranks and logins (and this script) on CPU 0;" \
    "from link-up until all caught up: $(cpu_busy "$SNAP_UP" "$SNAP_CAUGHT"); the baseline's rounds (> /dev/null): $(cpu_busy "$SNAP_B0" "$SNAP_B1")"
echo "all $NODES ranks printing $(awk -v ms="$START_MS" 'BEGIN { printf "%.1f", ms / 1000 }') s after the start"
echo "unreachable: first $UNREACH_FIRST s, last $UNREACH_LAST s after link-down ($UNREACH_N/$NODES nodes)"
echo "reconnected: first $RECON_FIRST s, last $RECON_LAST s after link-up ($RECON_N/$NODES nodes; $TRY_FAIL_EVENTS \"reconnect attempt failed\" events)"
echo "caught up: $CAUGHT_N/$NODES nodes, first $CAUGHT_FIRST s, last $CAUGHT_LAST s after link-up (each node after its own reconnect: median $PER_NODE_MED s, max $PER_NODE_MAX s)"
echo "sent again: $MSGS messages, $BYTES bytes ($(awk -v b="$BYTES" 'BEGIN { printf "%.1f", b / 1e6 }') MB of wire messages; per node $BYTES_MIN..$BYTES_MAX bytes); rank lines are $LOG_LINE_B bytes each in the logs"
echo "replay rate: ${RATE:--} MB/s (bytes sent again / (last caught up - link up)); ${RATE_XFER} MB/s from the first reconnect ($(ratio "$RATE_XFER" "$SSH_NULL_RATE") plain ssh > /dev/null)"
echo "plain ssh, $NODES parallel \`ssh USER@NODE cat FILE > /dev/null\` ($(awk -v b="$SSH_TOTAL" 'BEGIN { printf "%.1f", b / 1e6 }') MB in all, best of $REPEAT): $SSH_NULL_RATE MB/s ($(awk -v ms="$SSH_NULL_MS" 'BEGIN { printf "%.2f", ms / 1000 }') s)"
echo "plain ssh, the same \`> file\` (to disk): $SSH_DISK_RATE MB/s ($(awk -v ms="$SSH_DISK_MS" 'BEGIN { printf "%.2f", ms / 1000 }') s)"
echo "ratio: $(ratio "$RATE" "$SSH_NULL_RATE") (replay rate / plain ssh > /dev/null)"
echo "ratio: $(ratio "$RATE" "$SSH_DISK_RATE") (replay rate / plain ssh > file)"
echo "controller CPU from link-up until all caught up: $CPU_CATCHUP s in $WALL_CATCHUP s ($(awk -v c="$CPU_CATCHUP" -v w="$WALL_CATCHUP" 'BEGIN { printf "%.0f", 100 * c / w }')% of one core; the ranks go on printing $((NODES * 1000)) lines/s meanwhile; headless output, $(awk -v b="$OUT_BYTES" 'BEGIN { printf "%.0f", b / 1e6 }') MB, to a file too)"
echo "controller peak RSS (VmHWM): $(mib "$HWM_KB") MiB over the run incl. the replay ($(mib "$HWM_BEFORE_UP") MiB before link-up; RSS $(mib "${RSS_BEFORE:-0}") MiB before the partition)"
if [ -z "$LOG_BAD" ]; then
    echo "logs: every rank's steps 1..N once each, in order ($LOG_LINES_MIN..$LOG_LINES_MAX lines per rank, $(awk -v b="$LOG_BYTES" 'BEGIN { printf "%.1f", b / 1e6 }') MB in all)"
else
    echo "logs: NOT intact: $LOG_BAD"
fi
echo "stop: SIGTERM -> exit $STOP_RC after $(awk -v ms="$STOP_MS" 'BEGIN { printf "%.1f", ms / 1000 }') s (want 1); running until the SIGTERM: $RUNNING_AFTER; nodes lost: $LOST_N${LOST_TEXT:+ ($LOST_TEXT)}; left behind: $LEFT"

[ "$CAUGHT_N" = "$NODES" ] || { echo "bench: only $CAUGHT_N/$NODES nodes caught up within $CATCHUP_LIMIT_S s of link-up" >&2; tail -20 "$EV" >&2; exit 1; }
exit 0
