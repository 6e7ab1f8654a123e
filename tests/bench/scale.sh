#!/usr/bin/env bash
# Benchmark (issue 19): a thousand nodes on the scale test bed (tests/lib/scale.sh: simulated
# nodes n0001.. on 127.0.0.1 in a private mount namespace, agents through the pbs_tmrsh TEST
# DOUBLE), BENCH_SCALE_NODES (default 1,024) x BENCH_SCALE_RANKS (default 8) ranks, every rank
# build/bench/bench_ticker 1000: a runtime step line at once, then one a second. Measures:
#  1. `ddptop check --pbs --json` over the nodes: its wall time and the preflight's TCP probes
#     per node (from the JSON: the "probes" field where the check has one, else peers reached
#     + the rendezvous port);
#  2. `ddptop run --no-check` with the dashboard open in tmux (200x50): the time to every
#     rank's first line, then, once every rank reports, the controller's CPU over
#     BENCH_SCALE_SECONDS (default 30) (utime + stime of the controller process, /proc/PID/stat),
#     its VmRSS and VmHWM (and where that memory is: the heap, thread arenas, large
#     allocations, files, from /proc/PID/smaps), and the time the dashboard takes to answer a key (BENCH_SCALE_KEYS
#     presses of ?, opening and closing the help, each timed from send-keys until capture-pane
#     shows the change; median and worst);
#  3. the same run with the preflight (no --no-check): the time to every rank's first line and
#     where the launch began, and the controller's VmHWM. A preflight that fails nodes refuses
#     the launch; the bench says so (when, which rows) and presses Enter (launch anyway).
# "Time to every rank's first line": from the moment `ddptop run` is started until every
# rank's log (LOGDIR/RUN/attempt-0/rank-R.log, written by the controller as the lines arrive)
# holds a line, polled every 0.5 s. Rerun with `make bench BENCH_PARTS=scale` (docs/performance.md).
# BENCH_SCALE_PHASES (default "check plain pre"): the phases to run, e.g. "plain" alone to
# compare two builds (DDPTOP_BUILD=DIR picks the build, tests/lib/scale.sh); BENCH_SCALE_PERF=FILE
# records the controller with `perf record -g` over the CPU window of phase 2 into FILE;
# BENCH_SCALE_PASSES=1 traces the controller's loop over the CPU window and the keys (`perf
# record -a` of its poll() calls and context switches, tests/bench/loop_passes.py), and over the
# flood of first lines of phase 2, from the moment the controller is found: each pass
# between two polls on the CPU and waiting for a core, ddptop's own part of a key's latency
# apart from the scheduler's; BENCH_SCALE_PASSES=2 also samples the controller's stacks (`perf
# record --call-graph dwarf -p`) and prints, on stderr, what its longest passes on the CPU did
# (tests/bench/pass_profile.py); BENCH_SCALE_KEEP=FILE keeps phase 2's events.jsonl there;
# BENCH_SCALE_SETTLE (default 5) is how long after every rank's first line the CPU window begins;
# BENCH_SCALE_PIN=1: once every rank reports (phase 2), ddptop's side (the controller, the session
# server and the dashboard's client, tmux and this script: the login node and its terminal) on
# CPU 1 alone and the bed's nodes (pbs_tmrsh, agents, ranks) on CPU 0, for the CPU window, the
# keys and the floor: what a login node whose nodes are other machines would see, on two cores;
# BENCH_SCALE_NICE=1: the bed's nodes at nice 19 from their start (a pbs_tmrsh wrapper), the
# flood of first lines included, so that ddptop's side gets a core as soon as it wants one
# (the kernel's autogroups are turned off for the run, and back on at its end).
set -u
. "$(dirname "$0")/../lib/scale.sh"
scale_bed_reexec "$@"
cd "$SCALE_ROOT" || exit 1

NODES=${BENCH_SCALE_NODES:-1024}
RPN=${BENCH_SCALE_RANKS:-8}
SECS=${BENCH_SCALE_SECONDS:-30}
KEYS=${BENCH_SCALE_KEYS:-9}
PHASES=" ${BENCH_SCALE_PHASES:-check plain pre} "
phase() { [[ $PHASES == *" $1 "* ]]; }
RANKS=$((NODES * RPN))
NCPU=$(nproc)   # before BENCH_SCALE_PIN narrows this script to one
TICKER=$SCALE_BUILD/bench/bench_ticker
SOCK=ddpt-scale-$$
. tests/lib/tmux.sh
. tests/lib/perf.sh
PASSES_PID=""
PROF_PID=""
AUTOGROUP=""
cleanup() {
    [ "$AUTOGROUP" = 1 ] && echo 1 >/proc/sys/kernel/sched_autogroup_enabled   # BENCH_SCALE_NICE
    [ -n "$PASSES_PID" ] && passes_stop   # a perf still tracing (BENCH_SCALE_PASSES)
    scale_bed_stop   # first: tmux_cleanup walks the tree under tmux, a pgrep per process
    tmux_cleanup
    # the NCCL directories of the bench's runs, whose agents the bed's end killed
    rm -rf /tmp/ddptop-nccl-plain /tmp/ddptop-nccl-pre
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

for f in "$SCALE_BUILD/ddptop" "$SCALE_BUILD/ddptop-agent" "$TICKER"; do
    [ -x "$f" ] || { echo "bench: $f not built (make all bench-programs)" >&2; exit 1; }
done
command -v tmux >/dev/null || { echo "bench: tmux missing (make deps)" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "bench: the scale bed needs root (a mount namespace, a bind mount, a cgroup)" >&2; exit 1; }

echo "scale benchmark: $NODES simulated nodes x $RPN ranks = $RANKS ranks, one metrics line a second each."
echo "WARNING: this starts $((RANKS * 2 + NODES)) processes on this machine and keeps all its"
echo "$NCPU cores busy for several minutes (three phases of 1-3 minutes each at 1,024 x 8)."
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
scale_bed_start "$NODES" "$RPN" || exit 1
mkdir -m 700 "$SCALE_DIR/xdg" && export XDG_RUNTIME_DIR=$SCALE_DIR/xdg
NICED=""
if [ "${BENCH_SCALE_NICE:-0}" = 1 ]; then
    # the nodes' processes at the lowest priority from their start: pbs_tmrsh through a wrapper
    # first on PATH, whose nice 19 the agents and ranks inherit (the flood included, which
    # BENCH_SCALE_PIN cannot pin: ranks on one core miss the agent's start limit)
    mkdir -m 700 "$SCALE_DIR/nicebin"
    # (their agents give a rank 3 minutes to start, not 10 s: the bed's starts share one core)
    printf '#!/bin/sh\nexec env DDPTOP_TEST_RANK_START_MS=180000 nice -n 19 %s "$@"\n' "$SCALE_ROOT/tests/pbs/pbs_tmrsh" >"$SCALE_DIR/nicebin/pbs_tmrsh"
    chmod 700 "$SCALE_DIR/nicebin/pbs_tmrsh"
    export PATH=$SCALE_DIR/nicebin:$PATH
    # A nice value counts only inside its autogroup (one per session), and every agent, keeper
    # and rank leads a session: with autogroups the 9,000 sessions of the bed share the cores
    # as equals with ddptop's, whatever their nice. Off for the run, as it was after.
    AUTOGROUP=$(cat /proc/sys/kernel/sched_autogroup_enabled 2>/dev/null)
    [ "$AUTOGROUP" = 1 ] && echo 0 >/proc/sys/kernel/sched_autogroup_enabled
    NICED="the bed's nodes (pbs_tmrsh, agents, ranks) at nice 19 from their start, autogroups off; ddptop, tmux and the bench at 0"
fi
HZ=$(getconf CLK_TCK)
now_ms() { echo $(($(date +%s%N) / 1000000)); }
sec() { awk -v ms="$1" 'BEGIN { printf "%.1f s", ms / 1000 }'; }

# --- 1. ddptop check: probes per node ---
if phase check; then
t0=$(now_ms)
NO_COLOR=1 timeout 600 "$SCALE_DDPTOP" check --pbs --json >"$SCALE_DIR/check.json" 2>"$SCALE_DIR/check.err"
crc=$?
CHECK_MS=$(($(now_ms) - t0))
scale_bed_kill
PROBES=$(/usr/bin/python3 - "$SCALE_DIR/check.json" "$NODES" <<'PY'
import collections, json, re, statistics, sys
d = json.load(open(sys.argv[1]))
hosts = d["hosts"]
if len(hosts) != int(sys.argv[2]):
    sys.exit(f"{len(hosts)} hosts in the report, want {sys.argv[2]}")
# Probes a node made: the check's own count where it has one; else the peers it reached, the
# rendezvous port when reached, and each failed connection it made, which its detail lists as
# "HOST -> PEER:PORT: error" (the failures it was the target of read "PEER -> HOST:...").
per, fails, causes = [], 0, collections.Counter()
for h in hosts:
    t = h["checks"]["tcp"]
    if t.get("status") != "pass":
        fails += 1
        for m in re.finditer(r"\S+ -> \S+?:\d+(?: \(rendezvous\))?: ([^;]+)", t.get("detail", "")):
            causes[m.group(1)] += 1
    if "probes" in t:
        per.append(int(t["probes"]))
    else:
        per.append(int(t.get("peers_reached", 0)) + (1 if t.get("rendezvous_ok") else 0) +
                   t.get("detail", "").count(h["host"] + " -> "))
print(f"{statistics.median(per):g} {min(per)} {max(per)} {sum(per)} {fails}")
for c, k in causes.most_common(3):
    print(f"# failed connections (as listed on both ends): {k} x {c}", file=sys.stderr)
PY
2>"$SCALE_DIR/causes") || { echo "bench: ddptop check --pbs --json (exit $crc) gave no usable report:" >&2; head -20 "$SCALE_DIR/check.err" "$SCALE_DIR/causes" >&2; exit 1; }
read -r P_MED P_MIN P_MAX P_SUM P_FAIL <<<"$PROBES"
echo
echo "ddptop check over $NODES nodes: $(sec "$CHECK_MS") (exit $crc), TCP probes per node:" \
     "median $P_MED (min $P_MIN, max $P_MAX), $P_SUM in all; $P_FAIL nodes not passing TCP"
sed 's/^# /  /' "$SCALE_DIR/causes"
fi

# --- the run in the dashboard ---
controller_pid() { # the dashboard's controller: ddptop under the ddptop-session server
    local p
    for p in $(scale_bed_procs); do
        [ "$(cat "/proc/$p/comm" 2>/dev/null)" = ddptop ] || continue
        [ "$(cat "/proc/$(awk '{ print $4 }' "/proc/$p/stat" 2>/dev/null)/comm" 2>/dev/null)" = ddptop-session ] &&
            { echo "$p"; return 0; }
    done
    return 1
}
log_bytes() { find "$SCALE_DIR/logs/$1/attempt-0" -name 'rank-*.log' -printf '%s\n' 2>/dev/null | awk '{ s += $1 } END { print s + 0 }'; }
reporting() { find "$SCALE_DIR/logs/$1/attempt-0" -name 'rank-*.log' -size +0 2>/dev/null | wc -l; }
cpu_ticks() { local s; s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1; s=${s##*) }; set -- $s; echo $((${12} + ${13})); }
status_kb() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status" 2>/dev/null; }
# mem_where PID: where its resident memory is (/proc/PID/smaps): the main heap, glibc's
# per-thread arenas (the log writer's), other anonymous mappings (large allocations), files
mem_where() {
    /usr/bin/python3 - "$1" <<'PY' 2>/dev/null
import re, sys
r, n, kind = {}, 0, None
for line in open(f"/proc/{sys.argv[1]}/smaps"):
    m = re.match(r"([0-9a-f]+)-([0-9a-f]+) \S+ \S+ \S+ \S+\s*(\S*)", line)
    if m:
        start, kb, name = int(m.group(1), 16), (int(m.group(2), 16) - int(m.group(1), 16)) // 1024, m.group(3)
        # a thread's arena: heaps of up to 64 MiB, each aligned to 64 MiB (glibc's HEAP_MAX_SIZE)
        kind = ("heap" if name == "[heap]" else "file" if name.startswith("/") else "other" if name
                else "arena" if start % (64 << 20) == 0 and kb <= 65536 else "anon")
    elif line.startswith("Rss:"):
        kb = int(line.split()[1])
        r[kind] = r.get(kind, 0) + kb
        n += kind == "arena" and kb > 0
print("heap %d MiB, thread arenas %d MiB (%d), other anonymous %d MiB, files %d MiB" %
      tuple(x // 1024 if i != 2 else x for i, x in enumerate([r.get("heap", 0), r.get("arena", 0), n, r.get("anon", 0), r.get("file", 0)])))
PY
}
# launch_s RUN T0_MS: seconds from T0 to the run's launch event
launch_s() {
    /usr/bin/python3 - "$SCALE_DIR/logs/$1/events.jsonl" "$2" <<'PY'
import datetime, json, sys
for line in open(sys.argv[1]):
    e = json.loads(line)
    if e.get("kind") == "launch":
        t = datetime.datetime.strptime(e["time"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(
            tzinfo=datetime.timezone.utc).timestamp()
        print(f"{t - int(sys.argv[2]) / 1000:.1f} s")
        break
else:
    print("n/a")
PY
}
# pin_sides TMUX_PID: every thread of the bed's processes on CPU 0, but ddptop's own (comm ddptop
# or ddptop-session), tmux's server and this script on CPU 1 (BENCH_SCALE_PIN). Prints a summary.
pin_sides() {
    [ "$NCPU" -ge 2 ] || { echo "bench: BENCH_SCALE_PIN=1 needs 2 CPUs" >&2; return 1; }
    scale_bed_procs >"$SCALE_DIR/bed.pids"   # python's stdin is its program
    /usr/bin/python3 - "$1" "$$" "$SCALE_DIR/bed.pids" <<'PY'
import os, sys
ours, nodes = [int(sys.argv[1]), int(sys.argv[2])], []
for line in open(sys.argv[3]):
    pid = int(line)
    try:
        comm = open(f"/proc/{pid}/comm").read().strip()
    except OSError:
        continue
    (ours if comm in ("ddptop", "ddptop-session") else nodes).append(pid)
def pin(pids, cpu):
    n = 0
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for t in tids:
            try:
                os.sched_setaffinity(int(t), {cpu})
                n += 1
            except OSError:
                pass
    return n
a, b = pin(nodes, 0), pin(ours, 1)
print(f"{b} threads of ddptop, tmux and the bench on CPU 1; {a} threads of the bed's {len(nodes)} processes on CPU 0")
PY
}
# passes_begin NAME / passes_stop / passes_report NAME (BENCH_SCALE_PASSES): traces the
# controller's poll() calls and its context switches into SCALE_DIR/NAME.data until passes_stop;
# passes_report prints tests/bench/loop_passes.py's table of the loop's passes.
passes_begin() {
    perf record -q -a -o "$SCALE_DIR/$1.data" \
        -e syscalls:sys_enter_poll --filter "common_pid == $CTL" -e syscalls:sys_exit_poll --filter "common_pid == $CTL" \
        -e sched:sched_switch --filter "prev_pid == $CTL || next_pid == $CTL" >/dev/null 2>&1 &
    PASSES_PID=$!
    PROF_PID=""
    if [ "${BENCH_SCALE_PASSES:-}" = 2 ]; then
        perf record -q --call-graph dwarf,16384 -F 997 -p "$CTL" -o "$SCALE_DIR/$1-prof.data" >/dev/null 2>&1 &
        PROF_PID=$!
    fi
}
passes_stop() {
    perf_stop "$PASSES_PID"; PASSES_PID=""
    [ -n "$PROF_PID" ] && perf_stop "$PROF_PID"; PROF_PID=""
}
passes_report() {
    perf script -i "$SCALE_DIR/$1.data" -F time,event,trace 2>/dev/null >"$SCALE_DIR/$1.txt"
    /usr/bin/python3 tests/bench/loop_passes.py "$CTL" <"$SCALE_DIR/$1.txt"
    [ -f "$SCALE_DIR/$1-prof.data" ] || return 0
    perf script -i "$SCALE_DIR/$1-prof.data" -F tid,time,event,ip,sym 2>/dev/null >"$SCALE_DIR/$1-prof.txt"
    /usr/bin/python3 tests/bench/pass_profile.py "$CTL" "$SCALE_DIR/$1.txt" "$SCALE_DIR/$1-prof.txt" 4 >&2
}
# start_run RUN [ARGS...]: the run in a new tmux session RUN; sets CTL (the controller) and
# FIRST_MS (time to every rank's first line), or fails saying why.
FLOOD_KEYS=""
FLOOD_PASSES=""
start_run() {
    local run=$1 t0 n=0 end
    shift
    t0=$(now_ms)
    RUN_T0=$t0
    T new-session -d -s "$run" -x 200 -y 50 \
        "LANG=C.UTF-8 $SCALE_DDPTOP run --pbs $* --hang-timeout 0 --log-dir $SCALE_DIR/logs --run-id $run -- $TICKER 1000; sleep 3600"
    end=$((SECONDS + 600))
    CTL=""
    REFUSED=""
    while [ $SECONDS -lt $end ]; do
        if [ -z "$CTL" ]; then
            CTL=$(controller_pid)
            [ -n "$CTL" ] && [ -n "$FLOOD_KEYS" ] && [ -n "${BENCH_SCALE_PASSES:-}" ] && passes_begin flood
        fi
        n=$(reporting "$run")
        [ "$n" -ge "$RANKS" ] && break
        # a job that failed before every rank reported (a rank that missed its start) ends the wait
        T capture-pane -p -t "$run" | head -1 | grep -q ' FAILED ' && break
        # the dashboard answers keys while the first lines pour in (issue 32): a press of ? to
        # open the help and one to close it, timed like the keys below, in place of the sleep
        if [ -n "$FLOOD_KEYS" ] && [ "$n" -gt 0 ]; then
            FLOOD_LAT+=("$(key_ms "$run" 1)" "$(key_ms "$run" 0)")
            continue
        fi
        # A preflight that fails nodes refuses the launch and asks: say so, launch anyway.
        if [ "$n" = 0 ] && [ -z "$REFUSED" ] && T capture-pane -p -t "$run" | grep -q 'Preflight refused the launch'; then
            REFUSED="refused at $(sec $(($(now_ms) - t0))); Enter pressed: launched anyway"
            T capture-pane -p -t "$run" | grep -E '^HOST|fail' | head -8 >"$SCALE_DIR/refused-$run"
            T send-keys -t "$run" Enter
        fi
        sleep 0.5
    done
    FIRST_MS=$(($(now_ms) - t0))
    [ -n "$PASSES_PID" ] && passes_stop && FLOOD_PASSES=$(passes_report flood)
    if [ "$n" -lt "$RANKS" ] || [ -z "$CTL" ]; then
        echo "bench: $run: $n of $RANKS ranks reported within 600 s (controller ${CTL:-not found}); the screen:" >&2
        T capture-pane -p -t "$run" | head -20 >&2
        return 1
    fi
}
help_open() { T capture-pane -p -t "$1" | grep -q 'this help'; }
# key_ms SESSION WANT_OPEN: presses ? and times until the help is open (1) / closed (0)
key_ms() {
    local t0 end
    t0=$(date +%s%N)
    T send-keys -t "$1" '?'
    end=$((t0 + 5000000000))
    while [ "$(date +%s%N)" -lt "$end" ]; do
        if help_open "$1"; then [ "$2" = 1 ] && break; else [ "$2" = 0 ] && break; fi
    done
    echo $((($(date +%s%N) - t0) / 1000000))
}

# --- 2. without the preflight, the dashboard open ---
FLOOD_LAT=()
if phase plain; then
FLOOD_KEYS=1 start_run plain --no-check || exit 1
[ ${#FLOOD_LAT[@]} -gt 0 ] &&
    read -r F_MED F_MAX <<<"$(printf '%s\n' "${FLOOD_LAT[@]}" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)], v[NR] }')"
FIRST_PLAIN=$FIRST_MS
LAUNCH_PLAIN=$(launch_s plain "$RUN_T0")
sleep "${BENCH_SCALE_SETTLE:-5}"   # the lines the agents held during the flood, caught up
PINNED=""
if [ "${BENCH_SCALE_PIN:-0}" = 1 ]; then
    PINNED=$(pin_sides "$(T display -p '#{pid}')") || exit 1
fi
LB0=$(log_bytes plain)
[ -n "${BENCH_SCALE_PASSES:-}" ] && passes_begin passes   # over the CPU window and the keys
c0=$(cpu_ticks "$CTL"); t0=$(date +%s%N)
if [ -n "${BENCH_SCALE_PERF:-}" ]; then
    perf record -q ${BENCH_SCALE_PERF_CG:--g} -p "$CTL" -o "$BENCH_SCALE_PERF" -- sleep "$SECS" >/dev/null 2>&1
else
    sleep "$SECS"
fi
c1=$(cpu_ticks "$CTL"); t1=$(date +%s%N)
LB1=$(log_bytes plain)
[ -n "$c1" ] || { echo "bench: the controller ended during the measurement" >&2; exit 1; }
CPU=$(awk -v a="$c0" -v b="$c1" -v t0="$t0" -v t1="$t1" -v hz="$HZ" \
    'BEGIN { printf "%.1f", 100 * (b - a) / hz / ((t1 - t0) / 1e9) }')
# what the controller did for that CPU: the rank output it wrote meanwhile (a starved
# controller that falls behind also spends less), as CPU seconds per MB
PER_MB=$(awk -v a="$c0" -v b="$c1" -v hz="$HZ" -v x="$LB0" -v y="$LB1" \
    'BEGIN { printf "%.2f s per MB (%.1f MB written)", (y > x) ? (b - a) / hz / ((y - x) / 1e6) : 0, (y - x) / 1e6 }')
RSS=$(status_kb "$CTL" VmRSS)
HWM=$(status_kb "$CTL" VmHWM)
MEM_WHERE=$(mem_where "$CTL")
LAT=()
for ((k = 0; k < KEYS; k++)); do
    LAT+=("$(key_ms plain 1)")
    sleep 0.3
    LAT+=("$(key_ms plain 0)")
    sleep 0.3
done
read -r K_MED K_MAX <<<"$(printf '%s\n' "${LAT[@]}" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)], v[NR] }')"
PASSES=""
[ -n "$PASSES_PID" ] && passes_stop && PASSES=$(passes_report passes)
# The floor this machine sets: the same presses, timed the same way, to a bash loop in another
# tmux session that shows "this help" on every other ?: tmux, the terminal and the scheduler
# with the bed's processes and no ddptop in the way.
T new-session -d -s floor -x 200 -y 50 \
    "t=0; while IFS= read -rsn1 k; do [ \"\$k\" = '?' ] || continue; t=\$((1 - t)); clear; [ \$t = 1 ] && echo 'this help' || echo closed; done"
sleep 0.5
FLOOR=()
for ((k = 0; k < KEYS; k++)); do
    FLOOR+=("$(key_ms floor 1)")
    sleep 0.3
    FLOOR+=("$(key_ms floor 0)")
    sleep 0.3
done
T kill-session -t floor 2>/dev/null
read -r FL_MED FL_MAX <<<"$(printf '%s\n' "${FLOOR[@]}" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)], v[NR] }')"
SCREEN=$(T capture-pane -p -t plain | head -3)
[ -n "${BENCH_SCALE_KEEP:-}" ] && cp "$SCALE_DIR/logs/plain/events.jsonl" "$BENCH_SCALE_KEEP" 2>/dev/null
PROCS=$(scale_bed_count)
scale_bed_kill
T kill-session -t plain 2>/dev/null
[ -n "$PINNED" ] && taskset -p -c "0-$((NCPU - 1))" $$ >/dev/null   # phase 3 on every core again
sleep 2
fi

# --- 3. with the preflight ---
if phase pre; then
start_run pre || exit 1
FIRST_PRE=$FIRST_MS
REFUSED_PRE=$REFUSED
LAUNCH_PRE=$(launch_s pre "$RUN_T0")
HWM_PRE=$(status_kb "$CTL" VmHWM)
scale_bed_kill
T kill-session -t pre 2>/dev/null
fi
LOAD1=$(cut -d' ' -f1-3 /proc/loadavg)

mib() { awk -v k="$1" 'BEGIN { printf "%.0f MiB", k / 1024 }'; }
verdict() { awk -v v="$1" -v g="$2" 'BEGIN { print (v + 0 < g + 0) ? "met" : "NOT met" }'; }
echo
echo "| figure | measured | goal |"
echo "|---|---:|---|"
phase plain && echo "| time to every rank's first line, without the preflight | $(sec "$FIRST_PLAIN") (launch at $LAUNCH_PLAIN) | |"
phase pre && echo "| time to every rank's first line, with the preflight | $(sec "$FIRST_PRE") (launch at $LAUNCH_PRE${REFUSED_PRE:+; the preflight $REFUSED_PRE}) | |"
phase check && echo "| \`ddptop check\` over $NODES nodes | $(sec "$CHECK_MS") | |"
phase check && echo "| the preflight's TCP probes per node | $P_MED (min $P_MIN, max $P_MAX; $P_SUM in all) | O(1) per node, not N-1 |"
phase plain && echo "| controller CPU, dashboard open, ${SECS} s | $CPU% of a core | under 10% ($(verdict "$CPU" 10)) |"
phase plain && echo "| controller CPU for the rank output written in that window | $PER_MB | |"
phase plain && echo "| controller resident memory (VmRSS / VmHWM) | $(mib "$RSS") / $(mib "$HWM") | under 256 MiB ($(verdict "$HWM" 262144)) |"
phase plain && echo "| where the controller's memory is | $MEM_WHERE | |"
phase pre && echo "| controller VmHWM, run with the preflight | $(mib "$HWM_PRE") | under 256 MiB ($(verdict "$HWM_PRE" 262144)) |"
phase plain && echo "| dashboard answers a key (?, $((KEYS * 2)) presses) | median $K_MED ms, worst $K_MAX ms | under 100 ms ($(verdict "$K_MED" 100)); worst under 250 ms ($(verdict "$K_MAX" 250)) |"
phase plain && echo "| the same key to a bash loop in tmux, no ddptop (the machine's floor) | median $FL_MED ms, worst $FL_MAX ms | |"
[ -n "${PASSES:-}" ] && printf '%s\n' "$PASSES"
[ -n "$PINNED" ] && echo "| (the CPU window, the keys and the floor above ran pinned: $PINNED) | | |"
[ -n "$NICED" ] && echo "| (the whole run: $NICED) | | |"
[ -n "${FLOOD_PASSES:-}" ] && printf '%s\n' "$FLOOD_PASSES" | sed 's/^| the /| during the flood: the /'
phase plain && echo "| the same during the flood of first lines (${#FLOOD_LAT[@]} presses) | median ${F_MED:-n/a} ms, worst ${F_MAX:-n/a} ms | worst under 250 ms ($(verdict "${F_MAX:-99999}" 250)) |"
echo
if [ -n "${REFUSED_PRE:-}" ]; then
    echo "the preflight's refusal (its screen's lines with fail):"
    sed 's/^/  /' "$SCALE_DIR/refused-pre"
fi
if phase plain; then
    echo "processes on the bed during the run: $PROCS; the dashboard's header:"
    printf '%s\n' "$SCREEN"
fi
echo "build: $SCALE_BUILD ($(git -C "$SCALE_BUILD/.." rev-parse --short HEAD 2>/dev/null || echo '?'))"
echo "machine: $NCPU cores ($(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')," \
     "$(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)), $(uname -sr);" \
     "load average $LOAD0 before, $LOAD1 after; $(date -u '+%Y-%m-%d %H:%M UTC')"
