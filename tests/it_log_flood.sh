#!/usr/bin/env bash
# Integration: a flood of rank output over a real sshd (issue 22, the log path). Two ranks on
# one node (one SSH connection, which libssh reads 4 KiB at a time and launcher/ssh/ssh_stream.c
# takes a whole packet a pass, with the transport's pending() for what libssh holds): rank 0
# prints numbered 99-byte lines as fast as it can until rank 1 is done; rank 1 prints a line
# now and then, each carrying the time it was printed.
# Every byte of the flood is in rank 0's log file, in order, none twice (the numbered lines
# compared with what seq prints); each quiet line reaches the headless output within 1 s of
# its printing (docs/logs.md, "Latency"), while the flood goes on around it; rank 1's log
# holds its lines; the headless output shows every line of both ranks or says how many it
# did not show (tui/headless.c drops lines while its reader is slow, and the count of them
# must come out, at the latest before the run's last words). Then the same read path behind a
# ProxyCommand (libssh's own socket pair to a relay, not a socket ddptop connected): two ranks'
# 30 MB floods land whole and in order.
set -u
cd "$(dirname "$0")/.."
. tests/lib/tap.sh
. tests/lib/sshd.sh
. tests/lib/run_job.sh

D=""
cleanup() {
    rj_cleanup
    if [ -n "$D" ]; then kill_marker_pids "$D/agent"; kill_marker_pids "$D/flood"; fi
    sshd_cleanup
    # the runs' NCCL directories on the "nodes" (this machine), which an agent ended by the
    # clean-up above could not remove
    rm -rf "/tmp/ddptop-nccl-${RID:-none}" "/tmp/ddptop-nccl-${RID2:-none}"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
PY=/usr/bin/python3

[ -x "$DDPTOP" ] || { tap_fail "binary exists: $DDPTOP (make all)"; tap_done; exit 1; }
if ! sshd_setup; then tap_fail "test directory and keys"; tap_done; exit; fi
D=$SSHD_DIR
if ! sshd_start_loopback f1; then tap_fail "sshd starts"; tap_done; exit; fi
sshd_known_hosts_line 127.0.0.1 "$SSHD_PORT" >>"$D/known_hosts"
echo "127.0.0.1:$SSHD_PORT slots=2" >"$D/hosts"
mkdir -p "$D/flood"
# Rank 0: blocks of 100,000 numbered lines (98 digits and a newline) until rank 1 is done.
# Rank 1: 8 lines 0.25 s apart, each with the wall clock in ns when it was printed.
cat >"$D/flood/rank.sh" <<'SH'
#!/bin/sh
dir=$(dirname "$0")
if [ "$RANK" = 0 ]; then
    n=0
    while [ ! -e "$dir/quiet.done" ] && [ "$n" -lt 200 ]; do seq -f '%098g' 1 100000; n=$((n + 1)); done
else
    sleep 0.5
    for i in 1 2 3 4 5 6 7 8; do echo "quiet $i $(date +%s%N)"; sleep 0.25; done
    touch "$dir/quiet.done"
fi
SH
chmod +x "$D/flood/rank.sh"
RID=flood$$-$RANDOM

$PY - "$DDPTOP" "$D" "$RID" "$(sshd_pick_port)" <<'PY'
import os, re, subprocess, sys, time
ddptop, D, rid, mport = sys.argv[1:5]
cmd = [ddptop, "run", D + "/hosts", "--headless", "--known-hosts", D + "/known_hosts",
       "-i", D + "/id_ed25519", "-F", D + "/ssh_config", "--agent-dir", D + "/agent",
       "--timeout", "10", "--log-dir", D + "/logs", "--no-check", "--master-port", mport,
       "--run-id", rid, "--", D + "/flood/rank.sh"]
env = dict(os.environ, NO_COLOR="1")
p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=open(D + "/out.err", "wb"),
                     stdin=subprocess.DEVNULL, env=env)
# Read in large pieces and counted with bytes.count: a reader slower than the flood would make
# the headless output drop lines (said in a "[ddptop] N lines not shown" line, counted too).
quiet, flood_lines, dropped, tail, deadline = [], 0, 0, b"", time.time() + 120
fd = p.stdout.fileno()
try:
    import fcntl
    fcntl.fcntl(fd, 1031, 1 << 20)  # F_SETPIPE_SZ: room for a reader that waits for the CPU
except OSError:
    pass
with open(D + "/headless.quiet", "w") as q:
    while True:
        chunk = os.read(fd, 1 << 20)
        now = time.time()
        if not chunk or now > deadline:
            if chunk: p.kill()
            break
        data = tail + chunk
        cut = data.rfind(b"\n") + 1
        data, tail = data[:cut], data[cut:]
        flood_lines += data.count(b"[r0 ")
        pos = 0
        while True:
            pos = data.find(b"[r1 ", pos)
            if pos < 0: break
            line = data[pos:data.index(b"\n", pos)]
            if b" quiet " in line:
                i, ns = line.split()[-2:]
                q.write("%s %.3f %d\n" % (i.decode(), now - int(ns) / 1e9, flood_lines))
            pos += 4
        for m in re.finditer(rb"\[ddptop\] (\d+) lines? not shown here", data):
            dropped += int(m.group(1))
rc = p.wait()
open(D + "/result", "w").write("%d %d %d\n" % (rc, flood_lines, dropped))
PY
read -r RC NFLOOD NDROP <"$D/result" 2>/dev/null || { RC=x; NFLOOD=0; NDROP=0; }
tap_check "the run ends with exit 0 (got $RC; $(tail -n 2 "$D/out.err" 2>/dev/null | tr '\n' ' '))" test "$RC" = 0

LOGS=$D/logs/$RID/attempt-0
# every byte of the flood, in order: whole blocks of seq's lines, nothing else
seq -f '%098g' 1 100000 >"$D/block"
flood_ok=$($PY - "$LOGS/rank-0.log" "$D/block" <<'PY'
import sys
data, block = open(sys.argv[1], "rb").read(), open(sys.argv[2], "rb").read()
n, rest = divmod(len(data), len(block))
bad = [i for i in range(n) if data[i * len(block):(i + 1) * len(block)] != block]
print("%d %d %d" % (n, rest, len(bad)))
PY
) || flood_ok="0 0 1"
read -r BLOCKS REST BAD <<<"$flood_ok"
tap_check "rank 0's log holds every byte of its flood in order: $BLOCKS whole blocks of 100,000 lines (9.9 MB each), $REST bytes more, $BAD blocks differing" \
    test "$BLOCKS" -ge 2 -a "$REST" = 0 -a "$BAD" = 0
nq=$(grep -c . "$D/headless.quiet" 2>/dev/null)
tap_check "the headless output accounts for every line: $NFLOOD flood lines + $nq quiet + $NDROP said not shown = $((BLOCKS * 100000 + 8))" \
    test $((NFLOOD + nq + NDROP)) = $((BLOCKS * 100000 + 8))
tap_check "rank 1's log holds its 8 lines" test "$(grep -c '^quiet [1-8] ' "$LOGS/rank-1.log" 2>/dev/null)" = 8

QUIET=$(cat "$D/headless.quiet" 2>/dev/null)
worst=$(awk 'BEGIN { m = 0 } { if ($2 > m) m = $2 } END { printf "%.3f", m }' <<<"$QUIET")
# (a reader that waits for the CPU as long as the headless queue's 8 MiB last may have a line
# or two dropped there, said and counted above: not the log path's latency)
tap_check "rank 1's lines reach the headless output (got $nq of 8)" test "$nq" -ge 6
tap_check "each within 1 s of its printing while rank 0 floods (the slowest: $worst s)" \
    awk '$2 > 1.0 { bad = 1 } END { exit bad }' <<<"$QUIET"
during=$(awk -v all="$NFLOOD" '$3 > 0 && $3 < all { n++ } END { print n + 0 }' <<<"$QUIET")
tap_check "the flood went on around them: $during of $nq came with flood lines before and after" test "$during" -ge 6

# ---- through a ProxyCommand ----
cat >"$D/flood/relay.py" <<'PY'
import os, select, socket, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])))
open(os.path.join(os.path.dirname(sys.argv[0]), "relay.used"), "a").close()
to = {0: s.fileno(), s.fileno(): 1}
while True:
    for fd in select.select([0, s.fileno()], [], [])[0]:
        d = os.read(fd, 65536)
        if not d:
            sys.exit(0)
        while d:
            d = d[os.write(to[fd], d):]
PY
cp "$D/ssh_config" "$D/ssh_config.proxy"
printf 'Host *\n    ProxyCommand %s %s %%h %%p\n' "$PY" "$D/flood/relay.py" >>"$D/ssh_config.proxy"
RID2=proxy$$-$RANDOM
rj_start "$D/proxy.out" --discard "$D/hosts" --headless --known-hosts "$D/known_hosts" -i "$D/id_ed25519" \
    -F "$D/ssh_config.proxy" --agent-dir "$D/agent" --timeout 20 --log-dir "$D/logs" --no-check \
    --master-port "$(sshd_pick_port)" --run-id "$RID2" -- seq -f '%098g' 1 300000
rj_wait 120
seq -f '%098g' 1 300000 >"$D/want"
whole=0
for r in 0 1; do cmp -s "$D/want" "$D/logs/$RID2/attempt-0/rank-$r.log" && whole=$((whole + 1)); done
tap_check "through a ProxyCommand (it ran: $([ -e "$D/flood/relay.used" ] && echo yes || echo no)): exit $RJ_RC, $whole of 2 ranks' 30 MB floods whole and in order in their logs" \
    test "$RJ_RC" = 0 -a "$whole" = 2 -a -e "$D/flood/relay.used"
tap_done
