#!/usr/bin/env bash
# Integration: the Slurm testbed of tests/lib/slurm.sh itself. Two nodes come up idle;
# `salloc -N2 srun hostname` on the login node runs one task on n1 and one on n2, each at its
# own address; the TaskProlog of slurm_node_env exports a variable on n2 only; fake GPUs
# reach the tasks' environment; an sbatch job runs on n1; scancel ends a running job and its
# task; slurm_down leaves no namespace, no daemon and no task behind.
set -u
cd "$(dirname "$0")/.."
. tests/lib/tap.sh
. tests/lib/slurm.sh
trap slurm_down EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if ! slurm_available; then
    tap_fail "slurm testbed: needs root, slurm-wlm and munge (make deps)"
    tap_done; exit
fi

slurm_node_env n2 DDPT_ONLY_N2=yes
SLURM_FAKE_GPUS=2
start=$SECONDS
errf=$(mktemp)
if ! slurm_up 2 2>"$errf"; then
    tap_fail "slurm_up 2: both nodes idle" "$(cat "$errf")"
    rm -f "$errf"; slurm_down; tap_done; exit
fi
rm -f "$errf"
tap_ok "slurm_up 2: both nodes idle ($((SECONDS - start)) s)"
prefix=$SLURM_NS_PREFIX
D=$SLURM_DIR
cd "$D"

out=$(slurm_login sinfo -h -N -o '%N %c %P %T' | sort -u)
tap_check "sinfo: n1 and n2, 4 CPUs each, partition main" \
    test "$out" = "n1 4 main* idle
n2 4 main* idle"

# One task per node; each reports its hostname, its eth0 address and what it resolves n1 to.
out=$(slurm_login salloc -N2 --ntasks-per-node=2 srun -N2 -n2 --ntasks-per-node=1 sh -c \
    'a=$(ip -4 -o addr show dev eth0 | awk "{print \$4}"); echo "$(hostname) ${a%/*} $(getent hosts n1 | cut -d" " -f1) ${DDPT_ONLY_N2:-no}"' \
    2>"$D/salloc.err" | sort)
want="n1 $(slurm_addr n1) $(slurm_addr n1) no
n2 $(slurm_addr n2) $(slurm_addr n1) yes"
tap_check "salloc -N2 srun: hostname, address and /etc/hosts of n1 and n2; TaskProlog variable on n2 only" \
    test "$out" = "$want" || echo "$out" | sed 's/^/#   got: /'
grep -q 'Granted job allocation' "$D/salloc.err" && tap_ok "salloc: allocation granted" ||
    tap_fail "salloc: allocation granted" "$(cat "$D/salloc.err")"

# Fake GPUs: two per node, in the tasks' environment as a real cluster's would be.
out=$(slurm_login salloc -N2 --ntasks-per-node=1 --gpus-per-node=2 srun --label sh -c \
    'echo "$CUDA_VISIBLE_DEVICES $SLURM_GPUS_ON_NODE"' 2>/dev/null | sort)
tap_check "SLURM_FAKE_GPUS=2: --gpus-per-node=2 gives each task CUDA_VISIBLE_DEVICES=0,1" \
    test "$out" = "0: 0,1 2
1: 0,1 2"

# The login node: hostname ctl, current directory and environment passed through.
export DDPT_PASS=through
out=$(slurm_login sh -c 'echo "$(hostname) $PWD $DDPT_PASS"')
tap_check "slurm_login: hostname ctl, cwd and environment kept" test "$out" = "ctl $D through"

# sbatch on n1.
id=$(slurm_login sbatch --parsable -w n1 -o "$D/job-%j.out" --wrap 'hostname; echo $SLURM_JOB_NODELIST')
for i in $(seq 1 100); do
    [ -z "$(slurm_login squeue -h -j "$id" 2>/dev/null)" ] && [ -s "$D/job-$id.out" ] && break
    sleep 0.1
done
tap_check "sbatch -w n1: the job ran on n1" test "$(cat "$D/job-$id.out" 2>/dev/null)" = "n1
n1"

# scancel: a running job's task is gone from n2 within KillWait.
id=$(slurm_login sbatch --parsable -w n2 -o /dev/null --wrap 'exec sleep 300')
tasks_on_n2() {
    local p
    for p in $(ip netns pids "$(slurm_netns n2)"); do
        [ "$(cat "/proc/$p/comm" 2>/dev/null)" = sleep ] &&
            grep -q 300 "/proc/$p/cmdline" 2>/dev/null && echo "$p"
    done
}
for i in $(seq 1 100); do [ -n "$(tasks_on_n2)" ] && break; sleep 0.1; done
tap_check "sbatch -w n2: sleep 300 runs on n2" test -n "$(tasks_on_n2)"
slurm_login scancel "$id"
for i in $(seq 1 100); do [ -z "$(tasks_on_n2)" ] && break; sleep 0.1; done
tap_check "scancel: the task is gone from n2" test -z "$(tasks_on_n2)"
st=$(slurm_login squeue -h -j "$id" -o %T 2>/dev/null)
tap_check "scancel: the job left the queue or is completing (${st:-gone})" \
    test -z "$st" -o "$st" = COMPLETING -o "$st" = CANCELLED

# slurm_down leaves nothing behind (and may be called again from the trap).
pids=$(cat "$D"/run/*.pid 2>/dev/null)
cd /
slurm_down
left=$(ip netns list | grep "^$prefix-")
tap_check "slurm_down: no namespace $prefix-* left" test -z "$left"
alive=""
for p in $pids; do _slurm_alive "$p" && alive="$alive $p($(cat /proc/$p/comm))"; done
tap_check "slurm_down: no daemon or holder left running (pid files)" test -z "$alive"
tap_check "slurm_down: no process with the cluster's directory in its arguments" \
    test -n "$D" -a -z "$(pgrep -f "$D")"
tap_check "slurm_down: the directory is gone" test ! -e "$D"
tap_done
