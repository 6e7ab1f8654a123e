#!/usr/bin/env bash
# Integration: a real PyTorch script launched by `ddptop run` on two nodes (real OpenSSH
# servers on 127.0.0.1 and 127.0.0.2) with two ranks each: torch.distributed with the gloo
# backend and init_method="env://" reads only the environment ddptop gives it, so every rank
# seeing world size 4, its own RANK, and the all-reduced sum 1+2+3+4 = 10 proves the contract
# works for torch as torchrun's does (with TORCHELASTIC_USE_AGENT_STORE=False torch's rank 0
# serves the store itself: "True" would hang here). Each rank also reports torchrun's group and
# role variables across the two nodes. PyTorch comes from Debian (python3-torch, installed by
# `make deps`): when /usr/bin/python3 cannot import it this test fails, it does not skip.
set -u
cd "$(dirname "$0")/.."
. tests/lib/tap.sh
. tests/lib/sshd.sh
. tests/lib/run_job.sh

D=""
cleanup() {
    rj_cleanup
    [ -n "$D" ] && kill_marker_pids "$D/bin"
    sshd_cleanup
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
PY=/usr/bin/python3

if ver=$($PY -c 'import torch, torch.distributed as d; assert d.is_available(); print(torch.__version__)' 2>&1); then
    tap_ok "/usr/bin/python3 imports torch $ver with torch.distributed"
else
    tap_fail "/usr/bin/python3 imports torch (install python3-torch: make deps)" "$ver"
    tap_done; exit 1
fi

[ -x "$DDPTOP" ] || { tap_fail "binary exists: $DDPTOP (make all)"; tap_done; exit 1; }
if ! sshd_setup; then tap_fail "test directory and keys"; tap_done; exit; fi
D=$SSHD_DIR
ADDR=(127.0.0.1 127.0.0.2)
for i in 0 1; do
    if ! sshd_start_loopback "t$i" --addr "${ADDR[i]}"; then
        tap_fail "sshd $i on ${ADDR[i]} starts"; tap_done; exit
    fi
    sshd_known_hosts_line "${ADDR[i]}" "$SSHD_PORT" >>"$D/known_hosts"
    echo "${ADDR[i]}:$SSHD_PORT slots=2" >>"$D/hosts.txt"
done
mkdir -p "$D/bin"
cat >"$D/bin/allreduce.py" <<'PY'
# One gloo all-reduce of tensor([rank + 1]) over the job, torchrun style.
import os
import torch
import torch.distributed as dist

torch.set_num_threads(1)
dist.init_process_group("gloo", init_method="env://")
rank, world = dist.get_rank(), dist.get_world_size()
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)   # SUM
print(f"RESULT rank={rank} env_rank={os.environ['RANK']} local_rank={os.environ['LOCAL_RANK']} "
      f"world={world} sum={t.item():g}", flush=True)
e = os.environ
print("TORCHENV " + " ".join(f"{k}={e.get(k)}" for k in ("GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK",
      "ROLE_WORLD_SIZE", "ROLE_NAME", "TORCHELASTIC_USE_AGENT_STORE", "OMP_NUM_THREADS")), flush=True)
dist.destroy_process_group()
PY

rj_run "$D/torch.out" --limit 120 "$D/hosts.txt" --headless --known-hosts "$D/known_hosts" \
    -i "$D/id_ed25519" -F "$D/ssh_config" --agent-dir "$D/agent" --timeout 10 --log-dir "$D/logs" \
    --master-port "$(sshd_pick_port)" --run-id "torch$$-$RANDOM" --no-check \
    -- "$PY" "$D/bin/allreduce.py"
rj_expect_rc "2 nodes x 2 ranks of a gloo all-reduce script: success" 0
run_dir=$(ls -d "$D"/logs/torch*/ 2>/dev/null | head -1)
ok=0 diag=""
for r in 0 1 2 3; do
    line=$(grep '^RESULT ' "$run_dir/attempt-0/rank-$r.log" 2>/dev/null)
    want="RESULT rank=$r env_rank=$r local_rank=$((r % 2)) world=4 sum=10"
    if [ "$line" = "$want" ]; then ok=$((ok + 1)); else diag="$diag rank $r: '$line' want '$want';"; fi
done
if [ $ok = 4 ]; then
    tap_ok "every rank: dist rank = RANK, world size 4, all_reduce sum 10 (in its log)"
else
    tap_fail "every rank sees world size 4 and sum 10 ($ok of 4)" "$diag" "$(tail -20 "$D/torch.out")"
fi
# torchrun's per-node keys across two real nodes (tests/it_torch_env.sh checks them all on one).
ok=0 diag=""
for r in 0 1 2 3; do
    line=$(grep '^TORCHENV ' "$run_dir/attempt-0/rank-$r.log" 2>/dev/null)
    want="TORCHENV GROUP_RANK=$((r / 2)) GROUP_WORLD_SIZE=2 ROLE_RANK=$r ROLE_WORLD_SIZE=4 ROLE_NAME=default"
    want="$want TORCHELASTIC_USE_AGENT_STORE=False OMP_NUM_THREADS=${OMP_NUM_THREADS-1}"
    if [ "$line" = "$want" ]; then ok=$((ok + 1)); else diag="$diag rank $r: '$line' want '$want';"; fi
done
if [ $ok = 4 ]; then tap_ok "every rank: GROUP_RANK = its node, GROUP_WORLD_SIZE 2, ROLE_* of one role, agent store False"
else tap_fail "torchrun's group and role variables on 2 nodes ($ok of 4)" "$diag"; fi
n=0
for r in 0 1 2 3; do
    grep -qx "\[r$r ${ADDR[r / 2]}\] RESULT rank=$r env_rank=$r local_rank=$((r % 2)) world=4 sum=10" "$D/torch.out" && n=$((n + 1))
done
if [ $n = 4 ]; then tap_ok "the results on the headless output, each as [rR host]"
else tap_fail "results on the headless output ($n of 4)" "$(grep RESULT "$D/torch.out")"; fi

tap_done
