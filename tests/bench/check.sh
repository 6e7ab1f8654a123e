#!/usr/bin/env bash
# Benchmark: `ddptop check` on 1, 16 and 64 hosts (real sshd processes on loopback ports) side
# by side with what a user would run instead: `pdsh -R ssh -f 64` with a shell facts probe
# (OS, kernel, libc, python3/torch, GPU, NCCL library and variables, nccl.conf hashes,
# interfaces, clock) on the same hosts. Wall time, best of BENCH_REPEAT (default 3), after one
# warm-up run each (the warm-up uploads ddptop's agent; the timed runs reuse it, as every run
# after a cluster's first does). Prints a table, the ratios and a markdown snippet for
# docs/performance.md. Hosts: BENCH_HOSTS (default "1 16 64").
set -u
cd "$(dirname "$0")/../.." || exit 1
. tests/lib/sshd.sh

DDPTOP=${DDPTOP_BUILD:-$PWD/${BUILD:-build}}/ddptop
REPEAT=${BENCH_REPEAT:-3}
read -r -a COUNTS <<<"${BENCH_HOSTS:-1 16 64}"
MAX=0
for n in "${COUNTS[@]}"; do [ "$n" -gt "$MAX" ] && MAX=$n; done

CG=""
bench_cleanup() {
    sshd_cleanup
    [ -n "$CG" ] && rmdir "$CG" 2>/dev/null
}
trap bench_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

[ -x "$DDPTOP" ] || { echo "bench: $DDPTOP not built (make all)" >&2; exit 1; }
command -v pdsh >/dev/null || { echo "bench: pdsh missing (make deps)" >&2; exit 1; }
sshd_setup || exit 1
D=$SSHD_DIR
echo "starting $MAX sshd servers on loopback ..."
sshd_start_fleet h "$MAX" || { echo "bench: the sshd servers did not start" >&2; exit 1; }
for port in "${SSHD_FLEET_PORTS[@]}"; do echo "127.0.0.1:$port" >>"$D/hosts_all"; done
MP=$(sshd_pick_port)
CG=/sys/fs/cgroup/cpuacct/ddptop-bench-$$
if mkdir "$CG" 2>/dev/null; then
    for pid in "${SSHD_PIDS[@]}"; do echo "$pid" >"$CG/cgroup.procs" || { CG=""; break; }; done
else
    CG=""
fi

# What pdsh runs on each host: the facts ddptop's agent gathers, as a shell one-liner.
PROBE='uname -srm; . /etc/os-release; echo "$PRETTY_NAME"; ldd --version | head -1;
python3 --version 2>&1; python3 -c "import torch; print(torch.__version__)" 2>/dev/null;
(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader ||
 cat /proc/driver/nvidia/version) 2>/dev/null; ldconfig -p | grep -m1 libnccl;
env | grep -E "^(NCCL_|CUDA_VISIBLE_DEVICES)"; sha256sum /etc/nccl.conf ~/.nccl.conf 2>/dev/null;
ip -o addr; date +%s.%N; true'

now_ms() { echo $(($(date +%s%N) / 1000000)); }

run_ddptop() { # run_ddptop N: one check of the first N hosts; fails unless it ran to a verdict
    head -n "$1" "$D/hosts_all" >"$D/hosts_$1"
    local TIMEFORMAT='%U %S' rc # the controller's own CPU time (user, sys) goes to cpu_ddptop
    { time "$DDPTOP" check "$D/hosts_$1" --json --known-hosts "$D/known_hosts" \
        -i "$D/id_ed25519" -F "$D/ssh_config" --agent-dir "$D/agent" --master-port "$MP" \
        --fanout 64 --timeout 30 >"$D/out.json" 2>"$D/out.err"; } 2>"$D/cpu_ddptop"
    rc=$?
    # 0 all pass/warn; 1 is a verdict too (e.g. a check this machine fails), but every host
    # must have been reached over ssh for the figure to mean anything.
    [ $rc -le 1 ] && /usr/bin/python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
sys.exit(0 if len(d["hosts"]) == int(sys.argv[2]) and
         all(h["checks"]["ssh"]["status"] == "pass" for h in d["hosts"]) else 1)' \
        "$D/out.json" "$1"
}

run_pdsh() { # run_pdsh N: the probe on h01..hN; fails unless every host answered
    local hosts
    hosts=$(printf 'h[01-%02d]' "$1")
    [ "$1" = 1 ] && hosts=h01
    local TIMEFORMAT='%U %S' rc # pdsh's and its ssh clients' CPU time goes to cpu_pdsh
    { time PDSH_SSH_ARGS_APPEND="-F $D/pdsh_config" pdsh -R ssh -f 64 -w "$hosts" "$PROBE" \
        >"$D/pdsh.out" 2>"$D/pdsh.err"; } 2>"$D/cpu_pdsh"
    rc=$?
    [ $rc = 0 ] || return 1
    [ "$(grep -E '^h[0-9]+: Linux ' "$D/pdsh.out" | cut -d: -f1 | sort -u | wc -l)" = "$1" ]
}

best_ms() { # best_ms CMD...: best wall time of REPEAT runs after one warm-up; "" if any failed
    "$@" || return 1
    local best="" t0 t r
    for ((r = 0; r < REPEAT; r++)); do
        t0=$(now_ms)
        "$@" || return 1
        t=$(($(now_ms) - t0))
        if [ -z "$best" ] || [ "$t" -lt "$best" ]; then best=$t; fi
    done
    echo "$best"
}

cpu_s() { awk '{ printf "%.2f s", $1 + $2 }' "$1"; }
declare -A T_DDP T_PDSH C_DDP C_PDSH
LOAD_BEFORE=$(cut -d' ' -f1 /proc/loadavg)
for n in "${COUNTS[@]}"; do
    T_DDP[$n]=$(best_ms run_ddptop "$n") ||
        { echo "bench: ddptop check on $n hosts failed:" >&2; head -20 "$D/out.err" "$D/out.json" >&2; exit 1; }
    C_DDP[$n]=$(cpu_s "$D/cpu_ddptop")
    T_PDSH[$n]=$(best_ms run_pdsh "$n") ||
        { echo "bench: pdsh on $n hosts failed:" >&2; head -20 "$D/pdsh.err" >&2; exit 1; }
    C_PDSH[$n]=$(cpu_s "$D/cpu_pdsh")
done
LOAD_AFTER=$(cut -d' ' -f1 /proc/loadavg)

# CPU seconds the servers spent (every sshd, session and what it ran, e.g. the agent): the
# listeners sit in a cpuacct cgroup of their own, which their children inherit. On one machine
# this, not the client, sets the floor of the wall time; in a real cluster it is spread over
# the nodes' own CPUs.
server_cpu_of() { # server_cpu_of CMD...: server CPU seconds one run of CMD costs
    [ -n "$CG" ] || { echo "n/a"; return 0; }
    local a b
    a=$(cat "$CG/cpuacct.usage")
    "$@" || return 1
    sleep 1 # the sessions end after the client leaves
    b=$(cat "$CG/cpuacct.usage")
    awk -v ns=$((b - a)) 'BEGIN { printf "%.1f s", ns / 1e9 }'
}
S_DDP=$(server_cpu_of run_ddptop "$MAX")
S_PDSH=$(server_cpu_of run_pdsh "$MAX")

sec() { awk -v ms="$1" 'BEGIN { printf "%.2f s", ms / 1000 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
CPU=$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
DATE=$(date -u +%Y-%m-%d)
first=${COUNTS[0]}
echo
echo "wall time, best of $REPEAT (client CPU = user+sys of ddptop, resp. of pdsh and its ssh clients)"
printf '%-6s  %-14s  %-22s  %-12s  %-18s  %s\n' hosts "ddptop check" "pdsh -R ssh -f 64" \
    "ddptop/pdsh" "ddptop client CPU" "pdsh client CPU"
for n in "${COUNTS[@]}"; do
    printf '%-6s  %-14s  %-22s  %-12s  %-18s  %s\n' "$n" "$(sec "${T_DDP[$n]}")" \
        "$(sec "${T_PDSH[$n]}")" "$(ratio "${T_DDP[$n]}" "${T_PDSH[$n]}")" "${C_DDP[$n]}" \
        "${C_PDSH[$n]}"
done
echo "load average (1 min) before/after: $LOAD_BEFORE / $LOAD_AFTER"
echo "server-side CPU of one run on $MAX hosts (sshd + sessions): ddptop $S_DDP, pdsh $S_PDSH"
echo
echo "ddptop check, $MAX vs $first host(s): $(ratio "${T_DDP[$MAX]}" "${T_DDP[$first]}")x (goal: at most 2)"
echo "ddptop check vs pdsh at $MAX hosts:  $(ratio "${T_DDP[$MAX]}" "${T_PDSH[$MAX]}")x (goal: at most 0.5)"
echo
echo "--- markdown for docs/performance.md ---"
echo "Measured $DATE on $(nproc) CPU cores ($CPU), $MAX sshd servers on loopback, best of $REPEAT;"
echo "load average $LOAD_BEFORE before, $LOAD_AFTER after."
echo
echo "| hosts | ddptop check | pdsh -R ssh -f 64 (facts probe) | ddptop / pdsh | ddptop client CPU | pdsh+ssh client CPU |"
echo "|---:|---:|---:|---:|---:|---:|"
for n in "${COUNTS[@]}"; do
    echo "| $n | $(sec "${T_DDP[$n]}") | $(sec "${T_PDSH[$n]}") | $(ratio "${T_DDP[$n]}" "${T_PDSH[$n]}") | ${C_DDP[$n]} | ${C_PDSH[$n]} |"
done
echo
echo "- server-side CPU of one run on $MAX hosts (all sshd, sessions, agents): ddptop $S_DDP, pdsh $S_PDSH;"
echo "  spread over $(nproc) cores here, over $MAX machines in a real cluster"
echo "- ddptop check, $MAX hosts / $first: **$(ratio "${T_DDP[$MAX]}" "${T_DDP[$first]}")x** (goal ≤ 2)"
echo "- ddptop check / pdsh at $MAX hosts: **$(ratio "${T_DDP[$MAX]}" "${T_PDSH[$MAX]}")x** (goal ≤ 0.5)"
