#!/usr/bin/env bash
# Integration: every rank of `ddptop run` gets the whole environment torchrun gives a worker.
# The keys come from the installed PyTorch's own source (tests/lib/torchrun_env_keys.py reads
# LocalElasticAgent._start_workers and the multiprocessing module with `ast`), so a PyTorch
# that adds a key makes this test fail until ddptop sets it too. A local job (no hostfile, two
# ranks, one restart) dumps os.environ from every rank of both attempts; each key must be
# there with torchrun's value. Then OMP_NUM_THREADS: 1 by default on a node of more than one
# rank, with torchrun's notice once per run (not per rank or attempt), the user's value kept
# (ddptop's environment, --env), and left alone with one rank per node. NCCL_ASYNC_ERROR_HANDLING
# only where the node's torch is older than 2.2 (this machine's, and a fake 2.11 install).
# PyTorch comes from Debian (python3-torch, `make deps`), for /usr/bin/python3: when its source
# cannot be found this test fails, it does not skip.
set -u
cd "$(dirname "$0")/.."
. tests/lib/tap.sh
. tests/lib/sshd.sh      # sshd_pick_port only: no server is started here
. tests/lib/run_job.sh

T=$(mktemp -d /tmp/it_torch_env.XXXXXX)
chmod 755 "$T"
cleanup() {
    rj_cleanup
    kill_marker_pids "$T"
    rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
PY=/usr/bin/python3
RID=tenv$$-$RANDOM
# torchrun's values below are for a launcher whose environment does not set these.
unset OMP_NUM_THREADS NCCL_ASYNC_ERROR_HANDLING TORCH_NCCL_ASYNC_ERROR_HANDLING TORCHELASTIC_ENABLE_FILE_TIMER \
    TORCHELASTIC_TIMER_FILE
OMP_NOTICE="Setting OMP_NUM_THREADS environment variable for each process to be 1 in default"

[ -x "$DDPTOP" ] || { tap_fail "binary exists: $DDPTOP (make all)"; tap_done; exit 1; }

# ---------------------------------------------------------------------------------------
# 1. torchrun's keys, from the installed source.
if $PY tests/lib/torchrun_env_keys.py >"$T/keys.json" 2>"$T/keys.err" &&
   nkeys=$($PY -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["keys"]))' "$T/keys.json") &&
   [ "$nkeys" -gt 0 ]; then
    tap_ok "$nkeys worker keys found in the source of $($PY -c 'import json,sys; d=json.load(open(sys.argv[1])); print("torch", d["version"], "at", d["dir"])' "$T/keys.json")"
else
    tap_fail "torchrun's worker keys from the installed torch (install python3-torch: make deps)" \
        "$(cat "$T/keys.err")"
    tap_done; exit 1
fi

# ---------------------------------------------------------------------------------------
# 2. Two local ranks dump their environment; rank 1 fails attempt 0, so attempt 1 runs too.
cat >"$T/dump.py" <<'PY'
import json, os, sys
a, r = os.environ["TORCHELASTIC_RESTART_COUNT"], os.environ["RANK"]
with open(os.path.join(sys.argv[1], f"env-a{a}-r{r}.json"), "w") as f:
    json.dump(dict(os.environ), f)
sys.exit(3 if (a, r) == ("0", "1") else 0)
PY
mkdir -p "$T/dump"
MP=$(sshd_pick_port)
rj_run "$T/main.out" --headless --no-fold --no-check --nproc-per-node 2 --max-restarts 1 --master-port "$MP" \
    --log-dir "$T/logs" --run-id "$RID" -- "$PY" "$T/dump.py" "$T/dump"
rj_expect_rc "2 local ranks dump their environment; rank 1 fails attempt 0, attempt 1 succeeds" 0

# Every key torchrun sets (but the excluded ones, each with its reason) in every rank of both
# attempts, with a value torchrun would give: 1 node (GROUP_WORLD_SIZE), 2 ranks on it.
if diag=$($PY - "$T/keys.json" "$T/dump" "$MP" "$RID" <<'PY'
import json, os, sys
keys_file, dump, port, run_id = sys.argv[1:5]
src = json.load(open(keys_file))
keys, role_default = src["keys"], src["role_default"]
NODES, NPROC, MAX_RESTARTS = 1, 2, 1
WORLD = NODES * NPROC
# Set by torchrun, deliberately not by ddptop. Keep this tiny; every entry needs its reason.
EXCLUDED = {
    "TORCHELASTIC_TIMER_FILE": "only with TORCHELASTIC_ENABLE_FILE_TIMER=1 (or the variable itself) in "
        "torchrun's environment, for the FileTimerServer that torchrun then runs in its agent; ddptop runs "
        "no such server, so a worker's FileTimerClient would write to a pipe no one reads",
}
def rules(a, r):
    """torchrun's value of each key for rank r of attempt a (a callable: a check of the value)."""
    return {
        "RANK": str(r),
        "LOCAL_RANK": str(r % NPROC),
        "GROUP_RANK": str(r // NPROC),                 # the node's (agent's) index
        "ROLE_RANK": str(r),                           # one role, all ranks: the global rank
        "ROLE_NAME": role_default,                     # run.py's --role default
        "LOCAL_WORLD_SIZE": str(NPROC),
        "WORLD_SIZE": str(WORLD),
        "ROLE_WORLD_SIZE": str(WORLD),
        "GROUP_WORLD_SIZE": str(NODES),                # agents = nodes
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": port,
        "TORCHELASTIC_RESTART_COUNT": str(a),
        "TORCHELASTIC_MAX_RESTARTS": str(MAX_RESTARTS),
        "TORCHELASTIC_RUN_ID": run_id,
        # torchrun: str(rdzv backend == "static"). Rank 0 serves the store at MASTER_PORT under
        # ddptop, as under torchrun's c10d rendezvous: "False".
        "TORCHELASTIC_USE_AGENT_STORE": "False",
        "OMP_NUM_THREADS": "1",                        # run.py: nproc_per_node > 1, unset by the user
        "TORCHELASTIC_ERROR_FILE": lambda v: v.startswith("/"),
        "NCCL_ASYNC_ERROR_HANDLING": None,             # from the source's default, below
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": None,
    }
bad = []
unknown = [k for k in keys if k not in EXCLUDED and k not in rules(0, 0)]
compared = [k for k in keys if k not in EXCLUDED and k not in unknown]
for k in unknown:
    bad.append(f"{k} ({keys[k]['where']}): no rule for its value here; add one (and set it in launcher/job/plan.c)")
for k in EXCLUDED:
    if k not in keys:
        bad.append(f"{k} is excluded but this torch does not set it: drop it from EXCLUDED")
for a in (0, 1):
    err_files = set()
    for r in range(WORLD):
        path = os.path.join(dump, f"env-a{a}-r{r}.json")
        try:
            env = json.load(open(path))
        except (OSError, ValueError) as e:
            bad.append(f"{path}: {e}"); continue
        want = rules(a, r)
        for k, meta in keys.items():
            if k in EXCLUDED or k in unknown:
                continue
            if k not in env:
                bad.append(f"attempt {a} rank {r}: {k} missing (torchrun sets it in {meta['where']})"); continue
            w = want[k]
            if w is None:
                w = meta["default"]
                if w is None:
                    bad.append(f"{k}: the source gives no default to compare with"); continue
            ok = w(env[k]) if callable(w) else env[k] == w
            if not ok:
                bad.append(f"attempt {a} rank {r}: {k}={env[k]!r}, torchrun: {w if not callable(w) else 'see rule'}")
        err_files.add(env.get("TORCHELASTIC_ERROR_FILE"))
    if len(err_files) != WORLD:
        bad.append(f"attempt {a}: ranks share TORCHELASTIC_ERROR_FILE: {sorted(map(str, err_files))}")
print("# compared: " + " ".join(compared))
for k, why in EXCLUDED.items():
    print(f"# not compared: {k}: {why}")
for b in bad:
    print("# " + b)
sys.exit(1 if bad or not compared else 0)
PY
); then
    tap_ok "every torchrun key in every rank of both attempts, with torchrun's value"
    printf '%s\n' "$diag"
else
    tap_fail "torchrun's keys in every rank's environment" "$diag"
fi

# The default OMP_NUM_THREADS=1 is announced once for the run: in events.jsonl and in the
# headless output, not once per rank, node or attempt.
ev_assert "the OMP_NUM_THREADS notice: one info event in events.jsonl for 2 ranks x 2 attempts" \
    "$T/logs/$RID/events.jsonl" \
    "len([e for e in E if 'OMP_NUM_THREADS' in e.get('text', '')]) == 1" \
    "[e['kind'] for e in E if 'OMP_NUM_THREADS' in e.get('text', '')] == ['info']" \
    "len(ev('restart')) == 1"
n=$(grep -c "^\[ddptop\] $OMP_NOTICE" "$T/main.out")
if [ "$n" = 1 ]; then tap_ok "the notice once on the headless output: $(grep -m1 "$OMP_NOTICE" "$T/main.out")"
else tap_fail "the notice once on the headless output ($n times)" "$(grep -n 'ddptop\]' "$T/main.out")"; fi

# ---------------------------------------------------------------------------------------
# 3. OMP_NUM_THREADS the user chose is kept, and one rank per node gets no default.
# omp_case NAME RANKS WANT NOTICES ARGS...: RANKS local ranks print their OMP_NUM_THREADS; WANT
# is what each must see ("unset" for none), NOTICES how often the notice may appear.
omp_case() {
    local name=$1 ranks=$2 want=$3 notices=$4 n lines bad=""; shift 4
    rj_run "$T/omp.out" --headless --no-fold --no-check --master-port "$(sshd_pick_port)" --log-dir "$T/logs" \
        --run-id "$RID-omp$TAP_N" --nproc-per-node "$ranks" "$@" \
        -- sh -c 'echo "OMP=${OMP_NUM_THREADS-unset}"' "$T/marker-omp"
    lines=$(grep -c "^\[r[0-9]* localhost\] OMP=$want\$" "$T/omp.out")
    n=$(grep -c "$OMP_NOTICE" "$T/omp.out")
    [ "$RJ_RC" = 0 ] || bad="exit $RJ_RC"
    [ "$lines" = "$ranks" ] || bad="$bad; $lines of $ranks ranks saw OMP=$want: $(grep -o '\] OMP=.*' "$T/omp.out" | sort | uniq -c | tr '\n' ' ')"
    [ "$n" = "$notices" ] || bad="$bad; notice $n times, want $notices"
    if [ -z "$bad" ]; then tap_ok "$name: all $ranks ranks OMP_NUM_THREADS=$want, notice $notices times"
    else tap_fail "$name" "$bad" "$(tail -20 "$T/omp.out")" "$(tail -5 "$T/omp.out.err")"; fi
}
OMP_NUM_THREADS=3 omp_case "OMP_NUM_THREADS=3 in ddptop's environment" 2 3 0
OMP_NUM_THREADS=3 omp_case "--env OMP_NUM_THREADS=5 over ddptop's 3" 2 5 0 --env OMP_NUM_THREADS=5
omp_case "--env OMP_NUM_THREADS=5 alone" 2 5 0 --env OMP_NUM_THREADS=5
omp_case "1 rank on the node: no default" 1 unset 0
omp_case "4 ranks, nobody set it" 4 1 1

# NCCL's variable is a user choice too: ddptop's environment's value, not torchrun's default.
NCCL_ASYNC_ERROR_HANDLING=0 rj_run "$T/nccl.out" --headless --no-fold --no-check --master-port "$(sshd_pick_port)" \
    --log-dir "$T/logs" --run-id "$RID-nccl" --nproc-per-node 1 \
    -- sh -c 'echo "NCCL=$NCCL_ASYNC_ERROR_HANDLING/$TORCH_NCCL_ASYNC_ERROR_HANDLING"' "$T/marker-nccl"
if grep -qx '\[r0 localhost\] NCCL=0/1' "$T/nccl.out"; then
    tap_ok "NCCL_ASYNC_ERROR_HANDLING=0 in ddptop's environment kept; TORCH_NCCL_ASYNC_ERROR_HANDLING=1"
else
    tap_fail "NCCL_ASYNC_ERROR_HANDLING from ddptop's environment" "$(tail -10 "$T/nccl.out")"
fi

# NCCL_ASYNC_ERROR_HANDLING (ddptop's default, not the user's) only for a torch older than 2.2,
# which reads it; from 2.2 on torch reads TORCH_NCCL_ASYNC_ERROR_HANDLING and warns twice per
# rank about the old name. The agent knows its node's torch as the facts do: python3 on PATH.
# nccl_case NAME PATHDIR WANT: a rank of ddptop with PATHDIR first on PATH prints both.
nccl_case() {
    PATH=$2:$PATH rj_run "$T/nccl2.out" --headless --no-fold --no-check --master-port "$(sshd_pick_port)" \
        --log-dir "$T/logs" --run-id "$RID-nccl$TAP_N" --nproc-per-node 1 \
        -- sh -c 'echo "NCCL=${NCCL_ASYNC_ERROR_HANDLING-unset}/$TORCH_NCCL_ASYNC_ERROR_HANDLING"' "$T/marker-nccl"
    if grep -qx "\[r0 localhost\] NCCL=$3" "$T/nccl2.out"; then tap_ok "$1: NCCL_ASYNC_ERROR_HANDLING/TORCH_NCCL_...=$3"
    else tap_fail "$1: want NCCL=$3" "$(tail -10 "$T/nccl2.out")"; fi
}
tv=$($PY -c 'import torch; print(torch.__version__)' 2>/dev/null)
old=$($PY -c 'import sys; v=sys.argv[1].split("."); print(int((int(v[0]), int(v[1])) < (2, 2)))' "$tv" 2>/dev/null)
mkdir -p "$T/py"
ln -sf "$PY" "$T/py/python3"
case $old in
    1) nccl_case "this machine's torch $tv (older than 2.2)" "$T/py" 1/1 ;;
    0) nccl_case "this machine's torch $tv (2.2 or later)" "$T/py" unset/1 ;;
    *) tap_fail "the torch version of $PY is readable" "got: '$tv'" ;;
esac
# the other side, with a python3 whose torch/version.py says 2.11 (Debian's layout; the agent
# reads the files, it starts no python3)
$PY - "$T/newpy" <<'PY'
import os, sys
root = sys.argv[1]
for d in ("usr/bin", "usr/lib/python3.11", "usr/lib/python3/dist-packages/torch"):
    os.makedirs(os.path.join(root, d), exist_ok=True)
exe = bytearray(b"x" * 4096); exe[:4] = b"\x7fELF"; exe[100:108] = b"\x003.11.9\x00"
with open(os.path.join(root, "usr/bin/python3.11"), "wb") as f: f.write(bytes(exe))
os.chmod(os.path.join(root, "usr/bin/python3.11"), 0o755)
os.symlink("python3.11", os.path.join(root, "usr/bin/python3"))
open(os.path.join(root, "usr/lib/python3.11/os.py"), "w").close()
open(os.path.join(root, "usr/lib/python3/dist-packages/torch/__init__.py"), "w").close()
with open(os.path.join(root, "usr/lib/python3/dist-packages/torch/version.py"), "w") as f:
    f.write("__version__ = '2.11.0+cu130'\n")
PY
nccl_case "a node whose torch is 2.11.0+cu130" "$T/newpy/usr/bin" unset/1
NCCL_ASYNC_ERROR_HANDLING=0 nccl_case "2.11 with NCCL_ASYNC_ERROR_HANDLING=0 in ddptop's environment (the user's, kept)" \
    "$T/newpy/usr/bin" 0/1

if no_marker_pids "$T"; then tap_ok "no process of this test left behind"
else tap_fail "processes left behind" "$(marker_pids "$T" | xargs -r ps -o pid,args -p)"; fi
tap_done
