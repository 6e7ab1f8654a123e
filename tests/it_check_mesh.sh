#!/usr/bin/env bash
# Integration: the tcp check's sampled mesh on simulated nodes (issue 19). N "nodes" n001..nN
# are agents on this machine started through tests/pbs/pbs_tmrsh (a TEST DOUBLE of PBS's
# pbs_tmrsh) with `ddptop check --pbs`; their names resolve to 127.0.0.1 through a private
# /etc/hosts bind-mounted in a mount namespace (unshare --mount), so every probe is a real TCP
# connect between two agents. Shown, at 128 nodes with --mesh sample: probes per node from
# --json (at most 2 + 3 out, at least 2 in, O(N) in all, the seed recorded); and n017 missing
# from /etc/hosts: every peer that probes it fails "unknown host", one finding with the set of
# peers that tried, the same text on each of them, n017 failing and the peers warning.
set -u
cd "$(dirname "$0")/.." || exit 1
. tests/lib/tap.sh

N=${MESH_NODES:-128}
BUILD_DIR=${DDPTOP_BUILD:-$PWD/build}
D=$(mktemp -d /tmp/ddptop-it-mesh.XXXXXX)
RUN_PID=""
cleanup() {
    [ -n "$RUN_PID" ] && kill -TERM "$RUN_PID" 2>/dev/null && wait "$RUN_PID" 2>/dev/null
    rm -rf "$D"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

for i in $(seq 1 "$N"); do printf 'n%03d\n' "$i"; done >"$D/nodefile"
{ echo "127.0.0.1 localhost"; sed 's/^/127.0.0.1 /' "$D/nodefile"; } >"$D/hosts"
grep -v ' n017$' "$D/hosts" >"$D/hosts-no17"

# Every "node" is this machine: the rendezvous port must be one no other test holds.
free_port() {
    /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])'
}

# mesh_check HOSTS OUT ARGS...: ddptop check --pbs --json with HOSTS as /etc/hosts.
mesh_check() {
    local hosts=$1 out=$2
    shift 2
    PATH=$PWD/tests/pbs:$PATH PBS_NODEFILE=$D/nodefile NO_COLOR=1 \
        timeout -k 5 300 unshare --mount sh -c 'mount --bind "$1" /etc/hosts && shift && exec "$@"' \
        sh "$hosts" "$BUILD_DIR/ddptop" check --pbs --json --timeout 30 --master-port "$(free_port)" "$@" >"$out" 2>"$out.err" </dev/null &
    RUN_PID=$!
    wait "$RUN_PID"
    RC=$?
    RUN_PID=""
}

j() { # j FILE EXPR: EXPR over d (the document), tcp (host -> tcp check)
    /usr/bin/python3 - "$@" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
tcp = {h["host"]: h["checks"]["tcp"] for h in d["hosts"]}
def per_node(path, key):  # key of every node's tcp check in file path, in host order
    return [h["checks"]["tcp"].get(key) for h in json.load(open(path))["hosts"]]
ok = eval(sys.argv[2], {"json": json, "d": d, "tcp": tcp, "per_node": per_node})
if not ok:
    print("# mesh: %s" % json.dumps(d.get("mesh")))
    for h, t in list(tcp.items())[:20]:
        print("# %s: %s %s (probes %s, probed_by %s)" % (h, t["status"], t["detail"][:200], t.get("probes"), t.get("probed_by")))
sys.exit(0 if ok else 1)
PY
}

# --- 1. every node reachable, --mesh sample ---
start=$(date +%s)
mesh_check "$D/hosts" "$D/all.json" --mesh sample
took=$(($(date +%s) - start))
if [ "$RC" = 0 ] || [ "$RC" = 1 ]; then tap_ok "$N nodes, --mesh sample: check ran to its end (exit $RC, ${took} s)"
else tap_fail "$N nodes, --mesh sample: check ran to its end" "exit $RC" "$(tail -5 "$D/all.json.err")"; fi
tap_check "--json mesh: mode sample, $N nodes, pairs under 8 N with the rendezvous, the seed recorded" \
    j "$D/all.json" "d['mesh']['mode'] == 'sample' and d['mesh']['requested'] == 'sample' and d['mesh']['nodes'] == $N and d['mesh']['pairs'] + d['mesh']['rendezvous'] < 8 * $N and d['mesh']['pairs_all'] == $N * ($N - 1) and isinstance(d['mesh']['seed'], int)"
tap_check "probes per node: at most 5 out, at least 2 in (min_probed_by agrees), tcp pass everywhere" \
    j "$D/all.json" "all(t['status'] == 'pass' and t['probes'] <= 5 and t['probed_by'] >= 2 and t['rendezvous_ok'] for t in tcp.values()) and d['mesh']['min_probed_by'] == min(t['probed_by'] for t in tcp.values()) and sum(t['probes'] for t in tcp.values()) == d['mesh']['pairs']"
printf '# probes per node: %s\n' "$(/usr/bin/python3 -c "import json,sys; d=json.load(open(sys.argv[1])); m=d['mesh']; print('%d pairs + %d rendezvous over %d nodes = %.2f/node, min probed by %d' % (m['pairs'], m['rendezvous'], m['nodes'], (m['pairs'] + m['rendezvous']) / m['nodes'], m['min_probed_by']))" "$D/all.json" 2>/dev/null)"

# --- 2. n017 is not in /etc/hosts: its peers cannot resolve it ---
seed=$(/usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['mesh']['seed'])" "$D/all.json" 2>/dev/null)
mesh_check "$D/hosts-no17" "$D/no17.json" --mesh sample --mesh-seed "${seed:-1}"
if [ "$RC" = 1 ]; then tap_ok "n017 unresolvable: check fails (exit 1)"
else tap_fail "n017 unresolvable: check fails" "exit $RC" "$(tail -5 "$D/no17.json.err")"; fi
tap_check "--mesh-seed: the same seed, the same probes and probed_by per node as the first run" \
    j "$D/no17.json" "d['mesh']['seed'] == ${seed:-1} and d['mesh']['pairs'] == json.load(open('$D/all.json'))['mesh']['pairs'] and all(per_node('$D/no17.json', k) == per_node('$D/all.json', k) for k in ('probes', 'probed_by'))"
tap_check "n017 fails with one finding: 'unknown host from <its probers as a hostlist> to n017:PORT'" \
    j "$D/no17.json" "tcp['n017']['status'] == 'fail' and tcp['n017']['detail'].startswith('unknown host from n[') and ' to n017:' in tcp['n017']['detail'] and ';' not in tcp['n017']['detail']"
tap_check "every prober warns with the same text; nobody else is touched" \
    j "$D/no17.json" "all(t['detail'] == tcp['n017']['detail'] and t['status'] == 'warn' for h, t in tcp.items() if h != 'n017' and t['status'] != 'pass') and sum(t['status'] == 'warn' for t in tcp.values()) == tcp['n017']['probed_by'] and all(t['status'] == 'pass' for h, t in tcp.items() if h != 'n017' and not any(f['to'] == 'n017' for f in t['failures']))"

tap_done
