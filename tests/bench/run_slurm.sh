#!/usr/bin/env bash
# Benchmark: `ddptop run --slurm` (the agents as one job step through srun) against what a user
# would run instead, on a real Slurm cluster of 3 nodes (tests/lib/slurm.sh: slurmctld and three
# slurmd, each node in its own network + UTS namespace), all inside ONE allocation
# (`salloc -N3 --ntasks-per-node=2` running this script again as its inner part, so the
# allocation's own time is not counted). Each contender: the time from its start until every
# one of the 6 ranks (3 nodes x 2) printed its first line, `sh -c 'echo up'`:
#   srun      `srun -N3 --ntasks-per-node=2 sh -c 'echo up'` (srun starting the ranks itself);
#   slurm     `ddptop run --slurm --headless` (agents through srun) with the preflight;
#   slurm-nc  the same with --no-check;
#   slurm-io, slurm-io-nc  the same two with DDPTOP_SRUN_DIRECT=0: every agent's lines through
#             srun's I/O forwarding instead of its direct connection to ddptop (docs/slurm.md,
#             "The direct connection"), as before issue 22's last change;
#   ssh       `ddptop run HOSTFILE --headless` over SSH to an sshd inside each node's namespace
#             (listening on the node's address, port 22; hostfile `USER@ADDR slots=2`), with
#             the preflight;
#   ssh-nc    the same with --no-check.
# The controller runs on the login node (the controller's namespace, slurm_login), like salloc.
# One warm-up of each (not counted: the agent is uploaded to the nodes over SSH then), then
# BENCH_REPEAT rounds (default 5) in which every contender runs once in turn; medians and
# ratios are printed, plus a markdown snippet for docs/performance.md. A timing line is
# counted when it arrives on the command's stdout (ddptop headless: "[r3 n2] up", srun: "up");
# then the command is let finish (killed after BENCH_DEADLINE s, default 60).
# Login user: the SSH contenders log in as a throwaway user (shell /bin/sh, a plain home, its
# own key, its own known_hosts) that the bench creates and removes: root's ~/.bashrc runs
# pyenv, which would slow every root login. The Slurm contenders run as root (salloc, srun);
# their tasks start without a login shell but with salloc's environment, which srun passes on
# (--export=ALL): salloc runs with PATH=/usr/local/bin:/usr/bin:/bin (what sshd gives the SSH
# user), not root's, whose pyenv shims make every `python3` (the preflight's facts probe) take
# about 1.5 s. BENCH_KEEP_PATH=1 keeps the caller's PATH instead.
# Env: BENCH_REPEAT (5), BENCH_DEADLINE (60), BENCH_PHASES=1 (one more run of each ddptop
# contender with -v, its stderr lines with their arrival times printed, to see where time
# goes; default 1, 0 skips it), BENCH_KEEP_PATH (see above), BENCH_SLURM_OPTS (more options
# for the two --slurm contenders, split on blanks, e.g. "--agent-bcast never"), BENCH_TPUT_MB
# (default 10; 0 skips it): log throughput under Slurm, 6 ranks (3 nodes x 2) each printing that
# many MB of 100-byte lines, best of 3 rounds taking turns: `srun -N3 --ntasks-per-node=2 CMD >
# file` (srun's own I/O forwarding to one file), ddptop --slurm --no-check (every byte to its
# per-rank logs, headless output to /dev/null) over its direct connections, and the same through
# srun's I/O (DDPTOP_SRUN_DIRECT=0). Needs root, slurm-wlm, munge and sshd.
set -u
cd "$(dirname "$0")/../.."
PY=/usr/bin/python3
REPEAT=${BENCH_REPEAT:-5}
DEADLINE=${BENCH_DEADLINE:-60}
PHASES=${BENCH_PHASES:-1}
TPUT_MB=${BENCH_TPUT_MB:-10}
DDPTOP=${DDPTOP:-${DDPTOP_BUILD:-$PWD/${BUILD:-build}}/ddptop}
CONTENDERS=(srun slurm slurm-nc slurm-io slurm-io-nc ssh ssh-nc)

# ---------------------------------------------------------------------------------------------
# Inner part: runs inside the allocation on the login node (BENCH_D, BENCH_HOSTS, ... from the
# outer part). Writes "ROUND CONTENDER MS_ALL MS_END RC SEEN" lines to $BENCH_D/results.
if [ "${1:-}" = --inner ]; then
    D=$BENCH_D
    read -r -a SSHOPT <<<"$BENCH_SSHOPT"
    COMMON=(--headless --log-dir "$D/logs" --timeout 30)
    n=0
    one() {   # one CONTENDER ROUND [EXTRA DDPTOP OPTION...]
        local c=$1 r=$2; shift 2
        local mode=ddptop rid=b$r-$c-$RANDOM port=$((20000 + RANDOM % 10000))
        local -a cmd
        case $c in
        srun) mode=srun cmd=(srun -N3 --ntasks-per-node=2 sh -c 'echo up') ;;
        slurm) cmd=("$DDPTOP" run --slurm "${COMMON[@]}" ${BENCH_SLURM_OPTS:-}) ;;
        slurm-nc) cmd=("$DDPTOP" run --slurm "${COMMON[@]}" ${BENCH_SLURM_OPTS:-} --no-check) ;;
        slurm-io) cmd=(env DDPTOP_SRUN_DIRECT=0 "$DDPTOP" run --slurm "${COMMON[@]}" ${BENCH_SLURM_OPTS:-}) ;;
        slurm-io-nc) cmd=(env DDPTOP_SRUN_DIRECT=0 "$DDPTOP" run --slurm "${COMMON[@]}" ${BENCH_SLURM_OPTS:-} --no-check) ;;
        ssh) cmd=("$DDPTOP" run "$BENCH_HOSTS" "${COMMON[@]}" "${SSHOPT[@]}") ;;
        ssh-nc) cmd=("$DDPTOP" run "$BENCH_HOSTS" "${COMMON[@]}" "${SSHOPT[@]}" --no-check) ;;
        esac
        [ "$mode" = ddptop ] && cmd+=("$@" --run-id "$rid" --master-port "$port" -- sh -c 'echo up')
        local out
        out=$($PY "$D/first_lines.py" "$mode" 6 "$DEADLINE" "$D/out/$r-$c" "${cmd[@]}")
        echo "$r $c $out" >>"$D/results"
    }
    echo "  inside allocation $SLURM_JOB_ID (nodes $SLURM_JOB_NODELIST), on $(hostname)"
    for c in "${CONTENDERS[@]}"; do one "$c" warmup; done
    for ((r = 1; r <= REPEAT; r++)); do
        for c in "${CONTENDERS[@]}"; do one "$c" "$r"; done
        echo "  round $r/$REPEAT: $(grep "^$r " "$D/results" | awk '{printf "%s %s ms  ", $2, $3}')"
    done
    if [ "$PHASES" = 1 ]; then
        for c in slurm slurm-nc ssh ssh-nc; do one "$c" phases -v; done
    fi
    if [ "$TPUT_MB" -gt 0 ]; then
        PRINT="head -c ${TPUT_MB}000000 /dev/zero | tr '\\0' x | fold -w 99"
        tput_one() {   # tput_one CONTENDER ROUND: "tput ROUND CONTENDER MS BYTES RC" to results
            local c=$1 r=$2 rid=t$2-$1-$RANDOM t0 rc bytes
            t0=$(date +%s%N)
            case $c in
            srun) srun -N3 --ntasks-per-node=2 sh -c "$PRINT" >"$D/tput.srun" 2>/dev/null; rc=$?
                  bytes=$(stat -c %s "$D/tput.srun"); rm -f "$D/tput.srun" ;;
            slurm|slurm-io)
                  if [ "$c" = slurm-io ]; then export DDPTOP_SRUN_DIRECT=0; else unset DDPTOP_SRUN_DIRECT; fi
                  "$DDPTOP" run --slurm --headless --no-check --log-dir "$D/logs" --run-id "$rid" \
                      --master-port $((20000 + RANDOM % 10000)) -- sh -c "$PRINT" >/dev/null 2>&1; rc=$?
                  unset DDPTOP_SRUN_DIRECT
                  bytes=$(cat "$D/logs/$rid"/attempt-0/rank-*.log 2>/dev/null | wc -c); rm -rf "${D:?}/logs/$rid" ;;
            esac
            echo "tput $r $c $((($(date +%s%N) - t0) / 1000000)) $bytes $rc" >>"$D/results"
        }
        echo "  log throughput: 6 ranks x $TPUT_MB MB, 3 rounds (srun > file, ddptop direct, ddptop through srun's I/O) ..."
        for r in 1 2 3; do for c in srun slurm slurm-io; do tput_one "$c" "$r"; done; done
    fi
    exit 0
fi

# ---------------------------------------------------------------------------------------------
# Outer part: the cluster, the sshd servers, the user; then salloc running the inner part.
. tests/lib/sshd.sh
. tests/lib/slurm.sh
SALLOC_PID=""
bench_cleanup() {
    if [ -n "$SALLOC_PID" ] && kill -0 "$SALLOC_PID" 2>/dev/null; then
        # The inner part and what it runs first (salloc alone waits for its command), then
        # salloc, which gives the nodes back; slurm_down kills whatever is left.
        local i all
        all=($(sshd_descendants "$SALLOC_PID") "$SALLOC_PID")
        kill -TERM "${all[@]}" 2>/dev/null
        for i in $(seq 1 50); do sshd_any_alive "${all[@]}" || break; sleep 0.1; done
    fi
    sshd_cleanup   # servers (and their sessions), the throwaway user, the directory
    slurm_down     # whatever is left in the namespaces, the daemons, the namespaces
}
trap bench_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

slurm_available || { echo "bench: needs root, slurm-wlm and munge (make deps)" >&2; exit 1; }
[ -x "$DDPTOP" ] || { echo "bench: $DDPTOP not built (make all)" >&2; exit 1; }
[ -x "$SSHD_BIN" ] || { echo "bench: $SSHD_BIN missing" >&2; exit 1; }
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
DATE=$(date -u '+%Y-%m-%d %H:%M UTC')
echo "starting a Slurm cluster of 3 nodes ..."
slurm_up 3 || { echo "bench: slurm_up 3 failed" >&2; exit 1; }
sshd_setup || exit 1
D=$SSHD_DIR
BUSER=ddpsl$$
sshd_user_create "$BUSER" || { echo "bench: could not create user $BUSER" >&2; exit 1; }
usermod -s /bin/sh "$BUSER" || exit 1
UHOME=$(getent passwd "$BUSER" | cut -d: -f6)
rm -f "$UHOME/.bashrc" "$UHOME/.profile" "$UHOME/.bash_logout"
mkdir -p "$D/agent" "$D/logs" "$D/out" && chown "$BUSER:" "$D/agent"
: >"$D/known_hosts"
for n in n1 n2 n3; do
    a=$(slurm_addr "$n")
    sshd_start "$n" "$a" 22 --netns "$(slurm_netns "$n")" "LogLevel VERBOSE" ||
        { echo "bench: sshd in node $n did not start" >&2; exit 1; }
    sshd_known_hosts_line "$a" 22 >>"$D/known_hosts"
    echo "$BUSER@$a slots=2" >>"$D/hosts"
done
echo "sshd on n1..n3 ($(slurm_addr n1) ...), port 22, login user $BUSER (shell /bin/sh, plain home)"

# first_lines.py MODE N DEADLINE OUTFILE CMD...: runs CMD (stdin /dev/null, stdout and stderr
# to OUTFILE as they come, each line with its arrival time in ms), prints
# "MS_ALL MS_END RC SEEN": the ms until the N-th rank's first line arrived ("-" if not),
# the ms until CMD ended, its exit status (or "killed") and how many ranks were seen.
# MODE ddptop: rank lines "[rR HOST] up" on stdout (each R once); MODE srun: lines "up".
cat >"$D/first_lines.py" <<'PY'
import os, re, selectors, signal, subprocess, sys, time
signal.signal(signal.SIGINT, signal.SIG_DFL)
mode, n, deadline, outf = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
cmd = sys.argv[5:]
log = open(outf, "w")
rank_re = re.compile(rb"^\[r(\d+) [^\]]*\] up$")
t0 = time.monotonic()
p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                     start_new_session=True)
sel = selectors.DefaultSelector()
bufs = {}
for f, tag in ((p.stdout, "out"), (p.stderr, "err")):
    os.set_blocking(f.fileno(), False)
    sel.register(f, selectors.EVENT_READ, tag)
    bufs[tag] = b""
seen, t_all, killed = set(), None, False
def line(tag, l, t):
    global t_all
    log.write(f"{(t - t0) * 1000:8.0f} {tag} {l.decode(errors='replace')}\n")
    if tag != "out" or t_all is not None:
        return
    if mode == "srun":
        if l.strip() == b"up": seen.add(len(seen))
    else:
        m = rank_re.match(l)
        if m: seen.add(int(m.group(1)))
    if len(seen) >= n: t_all = t
open_fds, hard = 2, t0 + deadline
while open_fds:
    now = time.monotonic()
    if now >= hard:
        if killed:      # SIGTERM 10 s ago: SIGKILL, and stop reading
            try: os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError: pass
            break
        killed, hard = True, now + 10
        try: os.killpg(p.pid, signal.SIGTERM)
        except ProcessLookupError: pass
        continue
    for key, _ in sel.select(timeout=max(0.05, min(hard - now, 1.0))):
        t = time.monotonic()
        data = os.read(key.fileobj.fileno(), 65536)
        tag = key.data
        if not data:
            sel.unregister(key.fileobj); open_fds -= 1
            if bufs[tag]: line(tag, bufs[tag], t); bufs[tag] = b""
            continue
        bufs[tag] += data
        *whole, bufs[tag] = bufs[tag].split(b"\n")
        for l in whole: line(tag, l, t)
try:
    rc = p.wait(timeout=10)
except subprocess.TimeoutExpired:
    os.killpg(p.pid, signal.SIGKILL); rc = p.wait()
t_end = time.monotonic()
a = "-" if t_all is None else f"{(t_all - t0) * 1000:.0f}"
print(f"{a} {(t_end - t0) * 1000:.0f} {'killed' if killed else rc} {len(seen)}")
PY

export BENCH_D=$D BENCH_HOSTS=$D/hosts BENCH_REPEAT=$REPEAT BENCH_DEADLINE=$DEADLINE BENCH_PHASES=$PHASES DDPTOP BENCH_SLURM_OPTS=${BENCH_SLURM_OPTS:-}
export BENCH_SSHOPT="--known-hosts $D/known_hosts -i $SSHD_USER_KEY -F $D/ssh_config --agent-dir $D/agent --workdir $UHOME"
echo "salloc -N3 --ntasks-per-node=2: one warm-up of each, then $REPEAT rounds ($(IFS=,; echo "${CONTENDERS[*]}")) ..."
SPATH=/usr/local/bin:/usr/bin:/bin
[ "${BENCH_KEEP_PATH:-0}" = 1 ] && SPATH=$PATH
echo "  PATH in the allocation: $SPATH"
# In the background, so that a signal to this script runs its trap at once (bash runs traps
# only between foreground commands).
slurm_login_bg env PATH="$SPATH" salloc -N3 --ntasks-per-node=2 bash "$PWD/tests/bench/run_slurm.sh" --inner </dev/null
SALLOC_PID=$SLURM_LOGIN_PID
wait "$SALLOC_PID"
src=$?
SALLOC_PID=""
LOAD1=$(cut -d' ' -f1-3 /proc/loadavg)
[ -s "$D/results" ] || { echo "bench: no results (salloc exit $src)" >&2; exit 1; }

# --- report -------------------------------------------------------------------------------
# med C: the median of C's MS_ALL over the counted rounds ("-" when a round failed).
med() {
    awk -v c="$1" '$1 ~ /^[0-9]+$/ && $2 == c { if ($3 == "-" || $5 != 0) bad = 1; v[n++] = $3 }
        END { if (bad || n == 0) { print "-"; exit }
              for (i = 0; i < n; i++) for (j = i + 1; j < n; j++) if (v[j] + 0 < v[i] + 0) { t = v[i]; v[i] = v[j]; v[j] = t }
              print (n % 2) ? v[int(n / 2)] : (v[n / 2 - 1] + v[n / 2]) / 2 }' "$D/results"
}
all() { awk -v c="$1" '$1 ~ /^[0-9]+$/ && $2 == c { printf "%s%s", s, ($5 == 0 ? $3 : "fail:" $5); s = " " }' "$D/results"; }
sec() { [ "$1" = - ] && { echo -; return; }; awk -v ms="$1" 'BEGIN { printf "%.2f s", ms / 1000 }'; }
ratio() { { [ "$1" = - ] || [ "$2" = - ]; } && { echo -; return; }; awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2fx", a / b }'; }
declare -A M NAME
NAME[srun]="srun -N3 --ntasks-per-node=2 (ranks directly)"
NAME[slurm]="ddptop run --slurm (agents via srun), preflight"
NAME[slurm-nc]="ddptop run --slurm --no-check"
NAME[slurm-io]="the same, preflight, through srun's I/O"
NAME[slurm-io-nc]="the same, --no-check, through srun's I/O"
NAME[ssh]="ddptop run HOSTFILE (ssh), preflight"
NAME[ssh-nc]="ddptop run HOSTFILE (ssh) --no-check"
for c in "${CONTENDERS[@]}"; do M[$c]=$(med "$c"); done
CPU=$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
echo
echo "Slurm launch, 3 nodes x 2 ranks, until every rank's first line; median of $REPEAT (ms per round)"
printf '%-50s %-9s %-9s %s\n' contender median "/ srun" rounds
for c in "${CONTENDERS[@]}"; do
    printf '%-50s %-9s %-9s %s\n' "${NAME[$c]}" "$(sec "${M[$c]}")" "$(ratio "${M[$c]}" "${M[srun]}")" "$(all "$c")"
done
R_SLURM_SSH=$(ratio "${M[slurm]}" "${M[ssh]}")
R_SLURM_SSH_NC=$(ratio "${M[slurm-nc]}" "${M[ssh-nc]}")
echo "ddptop --slurm / srun: $(ratio "${M[slurm]}" "${M[srun]}") (preflight), $(ratio "${M[slurm-nc]}" "${M[srun]}") (--no-check)"
echo "  through srun's I/O only (DDPTOP_SRUN_DIRECT=0): $(ratio "${M[slurm-io]}" "${M[srun]}") (preflight), $(ratio "${M[slurm-io-nc]}" "${M[srun]}") (--no-check)"
echo "ddptop over srun / ddptop over ssh: $R_SLURM_SSH (preflight), $R_SLURM_SSH_NC (--no-check)"
echo "machine: $(nproc) CPU cores ($CPU); $DATE; load average before $LOAD0, after $LOAD1"
echo "PATH in the allocation (srun passes it to the agents and ranks): $SPATH"
[ -n "${BENCH_SLURM_OPTS:-}" ] && echo "--slurm contenders' extra options: $BENCH_SLURM_OPTS"
if [ "$PHASES" = 1 ]; then
    for c in slurm slurm-nc ssh ssh-nc; do
        f="$D/out/phases-$c"
        [ -s "$f" ] || continue
        echo
        echo "--- phases: ${NAME[$c]} -v (ms since start, stream, line)"
        cut -c1-160 "$f" | head -n 60
    done
fi
echo
echo "--- markdown for docs/performance.md ---"
echo "| contender | median | / srun | rounds (ms) |"
echo "|---|---:|---:|---|"
for c in "${CONTENDERS[@]}"; do
    echo "| ${NAME[$c]} | $(sec "${M[$c]}") | $(ratio "${M[$c]}" "${M[srun]}") | $(all "$c") |"
done
echo
echo "ddptop over srun / ddptop over ssh: $R_SLURM_SSH with the preflight, $R_SLURM_SSH_NC with --no-check."
if grep -q '^tput ' "$D/results"; then
    # best MB/s of each (bytes that reached the file or logs over the wall time)
    tbest() { awk -v c="$1" '$1 == "tput" && $3 == c && $6 == 0 { v = $5 / $4 / 1000; if (v > b) b = v } END { printf "%.1f", b }' "$D/results"; }
    TS=$(tbest srun) TD=$(tbest slurm) TI=$(tbest slurm-io)
    echo
    echo "Log throughput under Slurm, 6 ranks x $TPUT_MB MB, best of 3 (MB/s): srun > file $TS, ddptop --slurm $TD ($(awk -v a="$TD" -v b="$TS" 'BEGIN { printf "%.2fx", a / b }')), through srun's I/O $TI ($(awk -v a="$TI" -v b="$TS" 'BEGIN { printf "%.2fx", a / b }'))"
    awk '$1 == "tput" { printf "  round %s %-9s %6d ms %10d bytes rc %s\n", $2, $3, $4, $5, $6 }' "$D/results"
fi
[ "$src" = 0 ] || { echo "bench: salloc exited $src" >&2; exit 1; }
bad=$(awk '$1 ~ /^[0-9]+$/ && ($3 == "-" || $5 != 0)' "$D/results")
[ -z "$bad" ] || { echo "bench: failed rounds:" >&2; echo "$bad" >&2; exit 1; }
exit 0
