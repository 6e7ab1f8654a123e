#!/usr/bin/env bash
# Integration: the agent's srun --bcast copy on a real Slurm cluster (tests/lib/slurm.sh; the
# build directory is not a shared file system, so srun copies the agent to every node's /tmp).
# slurmd opens that path as the user with O_CREAT|O_TRUNC: a name another user could know first
# would let them block or redirect the copy. So:
#   - the name is random (/tmp/ddptop-agent.<32 hex>), another one per run, not the old
#     /tmp/ddptop-agent.UID.PID.N, and it is not on srun's command line (ps) nor in an
#     environment another user can read;
#   - the copy is gone once every node's agent runs (the agents run from the removed file), so
#     an agent killed with SIGKILL leaves nothing in its node's /tmp; nothing is left after a run.
set -u
cd "$(dirname "$0")/.."
. tests/lib/tap.sh
. tests/lib/run_job.sh
. tests/lib/slurm.sh
JOB_PID=""
cleanup() {
    [ -n "$JOB_PID" ] && kill -9 "$JOB_PID" 2>/dev/null
    slurm_down
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

DDP=$PWD/${BUILD:-build}/ddptop
OTHER=(setpriv --reuid=65534 --regid=65534 --clear-groups)
# every run copies here: job ids repeat from one test cluster to the next, so another test's
# note of which nodes hold the agent (it_slurm_agent_cache) must not spare the copy
export NO_COLOR=1 CUDA_VISIBLE_DEVICES= DDPTOP_SRUN_NO_AGENT_CACHE=1
slurm_up_or_end 2
D=$SLURM_DIR
cd "$D"
chmod 755 "$D"
LOGS=$D/logs

# copy_of OUT: the --bcast target that -v printed in OUT.
copy_of() { grep -o -- '--bcast=/tmp/ddptop-agent\.[^ ]*' "$1" | head -1 | sed 's/^--bcast=//'; }

# --- 1. two runs: two random names, neither left behind ---
for r in b1 b2; do
    slurm_login salloc -N2 "$DDP" run --slurm --headless --no-check -v --log-dir "$LOGS" --run-id "$r" \
        -- true >"$r.out" 2>&1
    echo "rc=$?" >>"$r.out"
done
c1=$(copy_of b1.out)
c2=$(copy_of b2.out)
if grep -q '^rc=0$' b1.out && grep -q '^rc=0$' b2.out && [[ $c1 =~ ^/tmp/ddptop-agent\.[0-9a-f]{32}$ ]] &&
   [[ $c2 =~ ^/tmp/ddptop-agent\.[0-9a-f]{32}$ ]] && [ "$c1" != "$c2" ]; then
    tap_ok "two runs: two random --bcast names ($(basename "$c1"), $(basename "$c2"))"
else
    tap_fail "two runs: two random --bcast names" "'$c1' '$c2'" "$(tail -5 b1.out b2.out)"
fi
if [ -n "$c1" ] && [ -n "$c2" ] && [ ! -e "$c1" ] && [ ! -e "$c2" ]; then
    tap_ok "nothing left in /tmp after the runs"
else
    tap_fail "nothing left in /tmp after the runs" "$(ls -la "$c1" "$c2" 2>&1)"
fi

# --- 2. a running job: the name is not to be seen; the copy is gone; SIGKILL leaves nothing ---
cat >rank.sh <<'EOF'
#!/bin/sh
# it_bcast_rank
echo "rank $RANK up on $(hostname)"
while :; do sleep 0.2; done
EOF
chmod 755 rank.sh
slurm_login_bg salloc -N2 "$DDP" run --slurm --headless --no-check -v --log-dir "$LOGS" --run-id long \
    -- "$D/rank.sh" >long.out 2>&1
JOB_PID=$SLURM_LOGIN_PID
up() { [ "$(grep -c ' up on ' long.out 2>/dev/null)" = 2 ]; }
if wait_until 30 up; then
    copy=$(copy_of long.out)
    srun_pid=""
    for p in $(pgrep -x srun); do
        { tr '\0' ' ' <"/proc/$p/cmdline"; } 2>/dev/null | grep -q -- '--job-name=ddptop-agents .*--relay' &&
            grep -qz "^SLURM_BCAST=$copy\$" "/proc/$p/environ" 2>/dev/null && srun_pid=$p
    done
    if [ -n "$srun_pid" ] && ! tr '\0' ' ' <"/proc/$srun_pid/cmdline" | grep -q 'ddptop-agent\.' &&
       ! "${OTHER[@]}" cat "/proc/$srun_pid/environ" >/dev/null 2>&1; then
        tap_ok "the name reaches srun (pid $srun_pid) in its environment: not in ps, not readable by another user"
    else
        tap_fail "the name reaches srun in its environment only" "srun pid '$srun_pid'" \
            "$(tr '\0' ' ' <"/proc/${srun_pid:-0}/cmdline" 2>&1)"
    fi
    gone() { [ -n "$copy" ] && [ ! -e "$copy" ]; }
    agent=""
    for p in $(ip netns pids "$(slurm_netns n1)"); do
        [ "$(readlink "/proc/$p/exe" 2>/dev/null)" = "$copy (deleted)" ] && agent=$p
    done
    if wait_until 5 gone && [ -n "$agent" ]; then
        tap_ok "while the agents run, their copy is already removed (n1's agent, pid $agent, runs from it)"
    else
        tap_fail "while the agents run, their copy is already removed" "copy '$copy', agent '$agent'" \
            "$(ls -la "$copy" 2>&1)"
    fi
    [ -n "$agent" ] && kill -9 "$agent"
    job_done() { ! kill -0 "$JOB_PID" 2>/dev/null; }
    wait_until 30 job_done
    left=$(ls -d /tmp/ddptop-agent.* 2>/dev/null | grep -F -x -e "$copy" -e "$c1" -e "$c2")
    if [ -n "$agent" ] && ! kill -0 "$JOB_PID" 2>/dev/null && [ -z "$left" ]; then
        tap_ok "n1's agent killed with SIGKILL: no ddptop-agent.* copy of these runs in /tmp"
    else
        tap_fail "n1's agent killed with SIGKILL: no copy left" "left: $left" "$(tail -5 long.out)"
    fi
else
    tap_fail "the long job started" "$(tail -10 long.out)"
fi
JOB_PID=""

tap_done
