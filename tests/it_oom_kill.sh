#!/usr/bin/env bash
# A real OOM kill (issue 20): a rank moves itself into a memory cgroup limited to 64 MiB (no
# swap), waits for its agent's status tick to see it there, then runs /usr/bin/python3
# allocating 1 GiB: the kernel's OOM killer kills it (SIGKILL). Its agent reads the cgroup's
# oom_kill count (cgroup v2 memory.events, or memory.oom_control of the v1 memory controller)
# when it sees the cgroup and at the rank's end, sends the difference with the exit, and the
# failure event says the OOM killer took the rank. A rank that kills itself with SIGKILL in the
# same kind of cgroup gets no such words. And the usual case: ddptop, its agent and the rank
# all in the limited cgroup from the start. The cgroups are removed at the end, even on failure.
# Needs root and a memory controller (v2 at /sys/fs/cgroup, or v1 at /sys/fs/cgroup/memory):
# without them it fails and says why.
set -u
cd "$(dirname "$0")/.."
. tests/lib/tap.sh
. tests/lib/sshd.sh      # sshd_pick_port only
. tests/lib/run_job.sh

T=$(mktemp -d /tmp/it_oom_kill.XXXXXX)
chmod 755 "$T"
CGS=()
cg_remove() {   # kills what is left in the cgroup (this test's ranks only), then removes it
    local cg=$1 p i
    for i in 1 2 3 4 5 6 7 8 9 10; do
        [ -d "$cg" ] || return 0
        for p in $(cat "$cg/cgroup.procs" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
        rmdir "$cg" 2>/dev/null && return 0
        sleep 0.2
    done
}
cleanup() {
    rj_cleanup
    kill_marker_pids "$T"
    local cg
    for cg in "${CGS[@]}"; do cg_remove "$cg"; done
    rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

[ -x "$DDPTOP" ] || { tap_fail "binary exists: $DDPTOP (make all)"; tap_done; exit 1; }

# cg_make NAME: a memory cgroup limited to 64 MiB without swap; its path in $CG.
cg_make() {
    CG=""
    if [ "$(id -u)" != 0 ]; then
        tap_fail "a memory cgroup for the test" "needs root to make a cgroup (running as uid $(id -u))"
        return 1
    fi
    if [ "$(stat -fc %T /sys/fs/cgroup 2>/dev/null)" = cgroup2fs ]; then
        grep -qw memory /sys/fs/cgroup/cgroup.subtree_control ||
            echo +memory >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null
        CG=/sys/fs/cgroup/ddptop-test-$$-$1
        mkdir "$CG" && CGS+=("$CG") && echo 64M >"$CG/memory.max" &&
            { echo 0 >"$CG/memory.swap.max" 2>/dev/null || [ ! -e "$CG/memory.swap.max" ]; } && return 0
    elif [ -d /sys/fs/cgroup/memory ] && [ "$(stat -fc %T /sys/fs/cgroup/memory)" = cgroupfs ]; then
        CG=/sys/fs/cgroup/memory/ddptop-test-$$-$1
        mkdir "$CG" && CGS+=("$CG") && echo 64M >"$CG/memory.limit_in_bytes" &&
            { [ ! -e "$CG/memory.memsw.limit_in_bytes" ] || echo 64M >"$CG/memory.memsw.limit_in_bytes"; } &&
            return 0
    fi
    tap_fail "a memory cgroup for the test" "no memory controller found: /sys/fs/cgroup is" \
        "$(stat -fc %T /sys/fs/cgroup 2>&1), no v1 /sys/fs/cgroup/memory; or writing its limit failed"
    return 1
}

# The rank: into the cgroup, a pause for the agent's once-a-second status to follow it there,
# then what $2 says.
cat >"$T/rank.sh" <<'EOF'
#!/bin/sh
echo $$ >"$1/cgroup.procs" || exit 9
echo "rank in $(grep -E '^0::|memory' /proc/self/cgroup | head -1)"
sleep 4
case $2 in
oom) exec /usr/bin/python3 -c 'import sys; print("allocating 1 GiB", flush=True); b = bytearray(1 << 30); b[::4096] = b"x" * len(b[::4096]); print("not killed", len(b))' ;;
kill) kill -KILL $$ ;;
esac
EOF
chmod +x "$T/rank.sh"

failure_event() {   # RUN: the text of the run's failure event
    grep '"kind":"failure"' "$T/logs/$1/events.jsonl" 2>/dev/null | head -1 | grep -o '"text":"[^"]*"'
}
cause_class() {     # RUN: the class and detail of the run's root cause (docs/failures.md)
    grep '"kind":"root_cause"' "$T/logs/$1/events.jsonl" 2>/dev/null | head -1 | grep -o '"class":"[^"]*"\|"detail":"[^"]*"' | tr '\n' ' '
}

if cg_make oom; then
    rj_run "$T/oom.out" --headless --no-check --max-restarts 0 --master-port "$(sshd_pick_port)" \
        --log-dir "$T/logs" --run-id oom -- "$T/rank.sh" "$CG" oom
    rj_expect_rc "a rank that allocates 1 GiB in a 64 MiB cgroup fails the job" 1
    ev=$(failure_event oom)
    if grep -q "rank 0 on .* killed by SIGKILL (the kernel's OOM killer: 1 kill in its cgroup)" <<<"$ev"; then
        tap_ok "the failure event names the OOM killer: $ev"
    else
        tap_fail "the failure event names the OOM killer" "event: $ev" \
            "$(tail -5 "$T/logs/oom/attempt-0/rank-0.log" 2>&1)" "$(cat "$CG/memory.oom_control" "$CG/memory.events" 2>/dev/null)"
    fi
    cls=$(cause_class oom)
    if grep -q '"class":"oom_kill"' <<<"$cls" && grep -q '"detail":"confirmed' <<<"$cls"; then
        tap_ok "the root cause's class is the OOM kill, confirmed by the cgroup: $cls"
    else
        tap_fail "the root cause's class is the OOM kill, confirmed by the cgroup" "root cause: $cls" \
            "$(grep root_cause "$T/logs/oom/events.jsonl" 2>&1 | head -2)"
    fi
    if [ "$(grep -c 'not killed' "$T/logs/oom/attempt-0/rank-0.log" 2>/dev/null)" = 0 ] &&
       grep -q 'allocating 1 GiB' "$T/logs/oom/attempt-0/rank-0.log"; then
        tap_ok "the rank was killed while it allocated"
    else
        tap_fail "the rank was killed while it allocated" "$(cat "$T/logs/oom/attempt-0/rank-0.log" 2>&1)"
    fi
fi

# The usual case (a Slurm step's or a container's cgroup): ddptop, its agent and the rank all
# start inside the limited cgroup; the agent reads the count at the spawn.
if cg_make whole; then
    printf '#!/bin/sh\ncg=$1; shift\necho $$ >"$cg/cgroup.procs" || exit 9\nexec "$@"\n' >"$T/inside.sh"
    cat >"$T/alloc.sh" <<'EOF'
#!/bin/sh
exec /usr/bin/python3 -c 'print("allocating 1 GiB", flush=True); b = bytearray(1 << 30); b[::4096] = b"x" * len(b[::4096]); print("not killed", len(b))'
EOF
    chmod +x "$T/inside.sh" "$T/alloc.sh"
    # room for ddptop and its agent beside the rank (v1: the swap limit first, it bounds the other)
    if [ -e "$CG/memory.max" ]; then echo 128M >"$CG/memory.max"; else
        [ ! -e "$CG/memory.memsw.limit_in_bytes" ] || echo 128M >"$CG/memory.memsw.limit_in_bytes"
        echo 128M >"$CG/memory.limit_in_bytes"
    fi
    NO_COLOR=1 timeout 90 "$T/inside.sh" "$CG" "$DDPTOP" run --headless --no-check --max-restarts 0 \
        --master-port "$(sshd_pick_port)" --log-dir "$T/logs" --run-id whole -- "$T/alloc.sh" \
        >"$T/whole.out" 2>&1 </dev/null
    rc=$?
    ev=$(failure_event whole)
    if [ "$rc" = 1 ] && grep -q "killed by SIGKILL (the kernel's OOM killer: 1 kill in its cgroup)" <<<"$ev"; then
        tap_ok "ddptop and its rank in one limited cgroup: the failure event names the OOM killer"
    else
        tap_fail "ddptop and its rank in one limited cgroup: the failure event names the OOM killer" \
            "exit $rc, event: $ev" "$(tail -5 "$T/whole.out")"
    fi
fi

if cg_make kill; then
    rj_run "$T/kill.out" --headless --no-check --max-restarts 0 --master-port "$(sshd_pick_port)" \
        --log-dir "$T/logs" --run-id kill -- "$T/rank.sh" "$CG" kill
    rj_expect_rc "a rank that kills itself with SIGKILL fails the job" 1
    ev=$(failure_event kill)
    if grep -q 'killed by SIGKILL' <<<"$ev" && ! grep -q 'OOM' <<<"$ev"; then
        tap_ok "a SIGKILL that was not the OOM killer's is not blamed on it: $ev"
    else
        tap_fail "a SIGKILL that was not the OOM killer's is not blamed on it" "event: $ev"
    fi
    cls=$(cause_class kill)
    if [ -n "$cls" ] && ! grep -q '"class":"oom_kill"' <<<"$cls"; then
        tap_ok "nor is its root cause put in the OOM class: $cls"
    else
        tap_fail "nor is its root cause put in the OOM class" "root cause: $cls"
    fi
fi
tap_done
