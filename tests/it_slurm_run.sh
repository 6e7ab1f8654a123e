#!/usr/bin/env bash
# Integration: ddptop on a real Slurm cluster (tests/lib/slurm.sh: slurmctld, two slurmd in
# their own network and UTS namespaces, munge; no sshd anywhere). The agents start as one job
# step through srun; everything goes through salloc or sbatch as a user would:
#   - `ddptop check --slurm` with one node's NCCL variable set differently (TaskProlog);
#   - the built-in trainer on 2 nodes x 2 ranks: equal parameter checksums on every rank;
#   - a PyTorch gloo script from an sbatch script: world 4, each rank on the node Slurm put it
#     on, MASTER_ADDR node 0's address, no variable of the agents' step in the ranks';
#   - a failing rank: the root cause names the rank and its node;
#   - from the login node: --salloc (allocated, used, given back) and --jobid;
#   - GPUs as Slurm hands them out (gres/gpu on placeholder devices): ranks per node and
#     CUDA_VISIBLE_DEVICES through the agents' step;
#   - bad input: --slurm outside an allocation, a job id that does not exist, srun without Slurm.
set -u
cd "$(dirname "$0")/.."
. tests/lib/tap.sh
. tests/lib/run_job.sh
. tests/lib/slurm.sh
trap slurm_down EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

PY=/usr/bin/python3
DDP=$PWD/${BUILD:-build}/ddptop
TRAIN=$PWD/${BUILD:-build}/ddptop-train
export NO_COLOR=1 CUDA_VISIBLE_DEVICES=
slurm_node_env n2 NCCL_SOCKET_IFNAME=eth9
SLURM_FAKE_GPUS=2   # gres/gpu on placeholder devices (tests/lib/slurm.sh): Slurm's GPU bookkeeping, no GPU
slurm_up_or_end 2
D=$SLURM_DIR
cd "$D"
A1=$(slurm_addr n1)
LOGS=$D/logs

# hold_job SBATCH-ARGS...: an allocation held by an sbatch job that sleeps, RUNNING; HELD is its id.
hold_job() {
    HELD=$(slurm_login sbatch --parsable "$@" -o /dev/null --wrap 'sleep 300')
    for _ in $(seq 1 100); do
        [ "$(slurm_login squeue -h -j "$HELD" -o %T 2>/dev/null)" = RUNNING ] && break
        sleep 0.1
    done
}

# no_ranks MARKER: no process whose command line holds MARKER is left in any node namespace.
no_ranks() {
    local n p
    for n in n1 n2; do
        for p in $(ip netns pids "$(slurm_netns "$n")" 2>/dev/null); do
            tr '\0' ' ' 2>/dev/null <"/proc/$p/cmdline" | grep -q -- "$1" && return 1
        done
    done
    return 0
}

# ---------------------------------------------------------------------------------------------
# 1. check --slurm: the agents come up through srun; n2's NCCL_SOCKET_IFNAME differs.
slurm_login salloc -N2 "$DDP" check --slurm >check.out 2>check.err
rc=$?
tap_check "check --slurm inside salloc -N2: exit 1 (n2 fails env parity)" test "$rc" = 1 ||
    sed 's/^/#   /' check.out check.err
tap_check "check table: an SRUN column, each node at its own address" \
    grep -Eq "^HOST +ADDRESS +SRUN" check.out
grep -Eq "^n1 +$A1 +pass" check.out && grep -Eq "^n2 +$(slurm_addr n2) +pass" check.out &&
    tap_ok "check table: n1 and n2 reached through srun (pass) at their addresses" ||
    tap_fail "check table: n1 and n2 reached through srun" "$(cat check.out)"
tap_check "check details: n2 env fails naming NCCL_SOCKET_IFNAME and eth9" \
    grep -Eq "^n2 +env +fail +NCCL_SOCKET_IFNAME differs: n2: eth9" check.out
slurm_login salloc -N2 "$DDP" check --slurm --json >check.json 2>/dev/null
if diag=$($PY - check.json <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
rows = {h["host"]: h for h in r["hosts"]}
bad = []
if sorted(rows) != ["n1", "n2"]: bad.append(f"hosts {sorted(rows)}")
for n in rows:
    if rows[n]["checks"]["ssh"]["status"] != "pass": bad.append(f"{n} link {rows[n]['checks']['ssh']}")
    if "through srun" not in rows[n]["checks"]["ssh"]["detail"]: bad.append(f"{n}: {rows[n]['checks']['ssh']['detail']}")
if rows.get("n2", {}).get("checks", {}).get("env", {}).get("status") != "fail": bad.append("n2 env not fail")
if rows.get("n1", {}).get("checks", {}).get("env", {}).get("status") == "fail": bad.append("n1 env fails")
for b in bad: print("# " + b)
sys.exit(1 if bad else 0)
PY
); then tap_ok "check --slurm --json: both links pass through srun, n2's env fails, n1's does not"
else tap_fail "check --slurm --json" "$diag"; fi

# ---------------------------------------------------------------------------------------------
# 2. The built-in trainer, 2 nodes x 2 ranks, its CPU ring between the nodes.
slurm_login salloc -N2 --ntasks-per-node=2 "$DDP" run --slurm --headless --no-check --log-dir "$LOGS" \
    --run-id train -- "$TRAIN" --steps 20 --hidden 64 --batch-size 16 --log-every 1 >train.out 2>&1
rc=$?
tap_check "salloc -N2 --ntasks-per-node=2: ddptop-train on 4 ranks is DONE (exit 0)" test "$rc" = 0 ||
    tail -15 train.out | sed 's/^/#   /'
if diag=$($PY - "$LOGS/train" <<'PY'
import json, sys
run = sys.argv[1]
bad, sums = [], set()
for r in range(4):
    evs = [json.loads(l) for l in open(f"{run}/attempt-0/rank-{r}.log") if l.startswith("{")]
    steps = [e["step"] for e in evs if e.get("event") == "step"]
    done = [e for e in evs if e.get("event") == "done"]
    if steps != list(range(1, 21)): bad.append(f"rank {r}: steps {steps[:3]}..{steps[-3:]}")
    if len(done) != 1: bad.append(f"rank {r}: done {done}")
    else: sums.add(done[0]["param_checksum"])
if len(sums) != 1: bad.append(f"checksums {sums}")
for b in bad: print("# " + b)
if not bad: print(sums.pop())
sys.exit(1 if bad else 0)
PY
); then tap_ok "every rank stepped 1..20; equal param_checksum $diag on n1 and n2"
else tap_fail "every rank trained with equal checksums" "$diag"; fi
ev_assert "events: hosts n1, n2 in SLURM_JOB_NODELIST order, 2 ranks each" "$LOGS/train/events.jsonl" \
    "ev('launch')[0]['hosts'] == ['n1', 'n2']" "ev('launch')[0]['ranks_per_node'] == [2, 2]"

# ---------------------------------------------------------------------------------------------
# 3. PyTorch (gloo) from an sbatch script: where each rank runs and what it sees.
cat >ddp.py <<'PY'
import json, os, socket, torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.tensor([dist.get_rank() + 1.0])
dist.all_reduce(t)
env = os.environ
print("RESULT " + json.dumps({
    "rank": dist.get_rank(), "world": dist.get_world_size(), "sum": t.item(),
    "host": socket.gethostname(), "slurmd": env.get("SLURMD_NODENAME"), "job": env.get("SLURM_JOB_ID"),
    "master": env.get("MASTER_ADDR"), "ntasks": env.get("SLURM_NTASKS"),
    "step_vars": sorted(k for k in env if k.startswith("SLURM_STEP") or k in
                        ("SLURM_PROCID", "SLURM_LOCALID", "SLURM_STEPID", "SLURM_SRUN_COMM_HOST", "SLURM_GTIDS")),
}), flush=True)
dist.destroy_process_group()
PY
jid=$(slurm_login sbatch --parsable -N2 --ntasks-per-node=2 -o "$D/sbatch-%j.out" \
    --wrap "$DDP run --slurm --headless --no-check --log-dir $LOGS --run-id torch -- $PY $D/ddp.py")
for _ in $(seq 1 900); do
    [ -z "$(slurm_login squeue -h -j "$jid" 2>/dev/null)" ] && break
    sleep 0.2
done
if diag=$($PY - "$LOGS/torch" "$jid" "$A1" <<'PY'
import json, sys
run, jid, a1 = sys.argv[1:4]
bad, res = [], {}
for r in range(4):
    for l in open(f"{run}/attempt-0/rank-{r}.log"):
        if l.startswith("RESULT "): res[r] = json.loads(l[7:])
if sorted(res) != [0, 1, 2, 3]: bad.append(f"results from ranks {sorted(res)}")
for r, x in res.items():
    want = "n1" if r < 2 else "n2"
    if x["world"] != 4 or x["sum"] != 10.0: bad.append(f"rank {r}: world {x['world']} sum {x['sum']}")
    if x["host"] != want or x["slurmd"] != want: bad.append(f"rank {r} on {x['host']}/{x['slurmd']}, not {want}")
    if x["job"] != jid: bad.append(f"rank {r}: SLURM_JOB_ID {x['job']} (job {jid})")
    if x["master"] != a1: bad.append(f"rank {r}: MASTER_ADDR {x['master']}, not n1's {a1}")
    if x["step_vars"]: bad.append(f"rank {r} sees the agents' step: {x['step_vars']}")
    if x["ntasks"] != "4": bad.append(f"rank {r}: SLURM_NTASKS {x['ntasks']} (the job's is 4)")
for b in bad: print("# " + b)
sys.exit(1 if bad else 0)
PY
); then tap_ok "sbatch -N2 --ntasks-per-node=2: gloo world 4, ranks 0-1 on n1 and 2-3 on n2, MASTER_ADDR $A1, SLURM_JOB_ID kept, no step variables"
else tap_fail "sbatch: PyTorch gloo on 2 nodes x 2 ranks" "$diag" "$(tail -8 "$D/sbatch-$jid.out" 2>/dev/null)"; fi
ev_assert "sbatch run: succeeded, exit code 0" "$LOGS/torch/events.jsonl" "ev('end')[0]['state'] == 'succeeded'" "ev('end')[0]['exit_code'] == 0"

# ---------------------------------------------------------------------------------------------
# 4. A failing rank: the root cause names it and its node; the other ranks are stopped.
slurm_login salloc -N2 --ntasks-per-node=2 "$DDP" run --slurm --headless --no-check --log-dir "$LOGS" \
    --run-id fail -- sh -c 'if [ "$RANK" = 3 ]; then echo "disk full on $(hostname)" >&2; exit 7; fi; exec sleep 60 # it_slurm_fail' \
    >fail.out 2>&1
rc=$?
tap_check "a rank exits 7: ddptop exits 1" test "$rc" = 1
tap_check "root cause: rank 3 on n2, exit code 7" grep -Eq "root cause: rank 3 on n2 .*exit(ed with)? code 7" fail.out ||
    grep 'root cause' fail.out | sed 's/^/#   /'
tap_check "the failing rank's last line is in its log" grep -q "disk full on n2" "$LOGS/fail/attempt-0/rank-3.log"
tap_check "no rank of the failed job is left on n1 or n2" no_ranks it_slurm_fail

# ---------------------------------------------------------------------------------------------
# 5. From the login node: --salloc asks for the nodes and gives them back; --jobid joins a job.
slurm_login "$DDP" run --salloc "-N2 --ntasks-per-node=1" --headless --no-check --log-dir "$LOGS" --run-id salloc \
    -- sh -c 'echo "rank $RANK on $(hostname)"' >salloc.out 2>&1
rc=$?
grep -q "rank 0 on n1" "$LOGS/salloc/attempt-0/rank-0.log" 2>/dev/null &&
    grep -q "rank 1 on n2" "$LOGS/salloc/attempt-0/rank-1.log" 2>/dev/null && [ "$rc" = 0 ] &&
    tap_ok "--salloc '-N2 --ntasks-per-node=1': rank 0 on n1, rank 1 on n2, exit 0" ||
    tap_fail "--salloc: a job on the allocated nodes" "rc $rc" "$(tail -8 salloc.out)"
# scancel returns once slurmctld took the request; the job may be listed (CG) a moment longer
no_jobs() { [ -z "$(SLURM_CONF=$SLURM_CONF_FILE nsenter -t "$(cat "$D/run/ctl.holder.pid")" -m -n -u squeue -h)" ]; }
if grep -q 'gave back Slurm job' salloc.out && wait_until 10 no_jobs; then
    tap_ok "--salloc: says so and gives the allocation back (squeue empty within 10 s)"
else
    tap_fail "--salloc: says so and gives the allocation back" "$(tail -3 salloc.out)" \
        "$(SLURM_CONF=$SLURM_CONF_FILE nsenter -t "$(cat "$D/run/ctl.holder.pid")" -m -n -u squeue -h)"
fi

hold_job -N2 --ntasks-per-node=2
held=$HELD
slurm_login "$DDP" run --jobid "$held" --headless --no-check --log-dir "$LOGS" --run-id jobid \
    -- sh -c 'echo "rank $RANK/$WORLD_SIZE on $(hostname) job $SLURM_JOB_ID"' >jobid.out 2>&1
rc=$?
grep -q "rank 3/4 on n2 job $held" "$LOGS/jobid/attempt-0/rank-3.log" 2>/dev/null && [ "$rc" = 0 ] &&
    tap_ok "--jobid $held from the login node: 4 ranks (tasks per node from scontrol), rank 3 on n2, in the job" ||
    tap_fail "--jobid: a job in an allocation held by sbatch" "rc $rc" "$(tail -8 jobid.out)"
slurm_login scancel "$held"

# ---------------------------------------------------------------------------------------------
# 5b. GPUs (gres/gpu over placeholder devices: SLURM_FAKE_GPUS, never opened): ranks per node
#     from the GPUs Slurm gave each node, and the agents' step keeps them for the ranks.
slurm_login salloc -N2 --gpus-per-node=2 "$DDP" run --slurm --headless --no-check --log-dir "$LOGS" \
    --run-id gpus -- sh -c 'echo "rank $RANK local $LOCAL_RANK gpus [$CUDA_VISIBLE_DEVICES] on $(hostname)"' \
    >gpus.out 2>&1
rc=$?
grep -q "rank 3 local 1 gpus \[0,1\] on n2" "$LOGS/gpus/attempt-0/rank-3.log" 2>/dev/null &&
    grep -q "rank 0 local 0 gpus \[0,1\] on n1" "$LOGS/gpus/attempt-0/rank-0.log" 2>/dev/null && [ "$rc" = 0 ] &&
    tap_ok "salloc --gpus-per-node=2: 2 ranks per node (SLURM_GPUS_ON_NODE), each sees the job's CUDA_VISIBLE_DEVICES=0,1" ||
    tap_fail "GPUs per node and CUDA_VISIBLE_DEVICES through the agents' step" "rc $rc" "$(tail -6 gpus.out)"
hold_job -N2 --gpus-per-node=2
held=$HELD
slurm_login "$DDP" run --jobid "$held" --headless --no-check --log-dir "$LOGS" --run-id gpujob \
    -- sh -c 'echo "rank $RANK/$WORLD_SIZE gpus [$CUDA_VISIBLE_DEVICES]"' >gpujob.out 2>&1
rc=$?
tap_check "--jobid of a job with 2 GPUs per node (TresPerNode): world 4, the ranks see its GPUs" \
    sh -c "[ $rc = 0 ] && grep -q 'rank 3/4 gpus \[0,1\]' '$LOGS/gpujob/attempt-0/rank-3.log'" ||
    tail -6 gpujob.out | sed 's/^/#   /'
slurm_login scancel "$held"

# ---------------------------------------------------------------------------------------------
# 6. The agent's binary: srun --bcast copies it where its file system is not a shared one (as
#    here), and the copy goes with the agent; without the copy, a node that lacks it says so.
slurm_login salloc -N2 "$DDP" run --slurm --headless --no-check -v --log-dir "$LOGS" --run-id bcast \
    -- true >bcast.out 2>&1
rc=$?
tap_check "-v shows the agents' srun with --bcast=/tmp/ddptop-agent.* (exit $rc)" \
    grep -Eq "ddptop: agents: srun .*--overlap .*--bcast=/tmp/ddptop-agent\.[0-9a-f]{32} $DDP-agent --relay" bcast.out
copy=$(grep -o -- '--bcast=/tmp/ddptop-agent\.[0-9a-f]*' bcast.out | head -1)
tap_check "the agents removed their copy (${copy#--bcast=}) when they exited" \
    sh -c "[ -n '$copy' ] && [ ! -e '${copy#--bcast=}' ]"
mkdir -p "$D/bin" && cp "$DDP" "$D/bin/ddptop"   # a ddptop whose agent is missing
slurm_login salloc -N2 "$D/bin/ddptop" check --slurm --agent-bcast never >nobin.out 2>&1
rc=$?
grep -Eq "^n2 +srun +fail .*execve\(\): $D/bin/ddptop-agent: No such file or directory" nobin.out &&
    grep -q "fix: the agent must be at the same path on every node" nobin.out && [ "$rc" = 1 ] &&
    tap_ok "--agent-bcast never, no agent at that path: each node says execve failed, and what to do" ||
    tap_fail "--agent-bcast never without the agent" "rc $rc" "$(cat nobin.out)"

# ---------------------------------------------------------------------------------------------
# 7. Bad input: clear messages, exit 2, nothing started.
out=$(env -u SLURM_JOB_NODELIST "$DDP" run --slurm --headless -- true 2>&1); rc=$?
tap_check "--slurm outside an allocation: exit 2, says to use salloc/sbatch or --jobid" \
    sh -c "[ $rc = 2 ] && printf '%s' \"\$1\" | grep -q 'SLURM_JOB_NODELIST is not set (run inside an allocation: salloc/sbatch, or give --jobid ID)'" _ "$out"
out=$(slurm_login "$DDP" run --jobid 999999 --headless -- true 2>&1); rc=$?
tap_check "--jobid of no job: exit 2, scontrol's reason" \
    sh -c "[ $rc = 2 ] && printf '%s' \"\$1\" | grep -q -- '--jobid 999999: scontrol says: .*Invalid job id'" _ "$out" ||
    echo "#   $out"
echo "localhost" >hosts.txt
out=$("$DDP" run hosts.txt --transport srun --headless -- true 2>&1); rc=$?
tap_check "--transport srun with a hostfile: exit 2, says what it needs" \
    sh -c "[ $rc = 2 ] && printf '%s' \"\$1\" | grep -q 'give --slurm (inside an allocation), --jobid ID or --salloc ARGS'" _ "$out"

tap_done
