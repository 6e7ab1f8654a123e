#!/usr/bin/env bash
# Integration: the run's files on disk when things go wrong (issue 18), with real local ranks:
#  - a full disk: a small tmpfs as --log-dir, filled by the job's own output (a job that fails
#    and restarts three times) and by a filler file a rank writes (a job that succeeds): every
#    line of events.jsonl is whole, the end and the real outcome are on disk, the final line,
#    `ddptop ls` and `ddptop ls --json` say "incomplete: disk full", no run is "succeeded" alone;
#  - modes: another user (uid 65534 through setpriv) cannot list the run's directory nor read
#    its files (0700 / 0600), --log-mode 0644 and group open them as asked, a bad one is refused;
#    a run directory another user made first (a shared --log-dir, a known --run-id) is refused;
#  - SIGKILL of the controller while its ranks printed fast: at most one block (4 KiB) per
#    rank is missing from the logs, what is there is the ranks' sequence in order, and `ddptop
#    ls` shows the run's real duration.
# Runs in a mount namespace of its own (unshare --mount): the tmpfs goes with it.
set -u
cd "$(dirname "$0")/.."
if [ -z "${IT_RECORDS_NS:-}" ]; then
    exec env IT_RECORDS_NS=1 unshare --mount --propagation private "$0" "$@"
fi
. tests/lib/tap.sh
. tests/lib/run_job.sh

T=$(mktemp -d /tmp/it_run_records.XXXXXX)
chmod 755 "$T"
cleanup() {
    rj_cleanup
    kill_marker_pids "$T"
    umount "$T/full" 2>/dev/null
    rm -rf "$T"
    # the NCCL flight-recorder directories of runs whose agents were killed (they cannot remove them)
    rm -rf /tmp/ddptop-nccl-{fill,filler,group,killed,open,or,private,taken}
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
PY=/usr/bin/python3
COMMON=(--headless --no-check --term-timeout 2)

if [ ! -x "$DDPTOP" ]; then tap_fail "ddptop binary exists ($DDPTOP)"; tap_done; exit 1; fi

# json_lines FILE: every line is a JSON object and the file ends with a newline
json_lines() {
    $PY - "$1" <<'PY'
import json, sys
data = open(sys.argv[1], "rb").read()
if data and not data.endswith(b"\n"):
    sys.exit("ends in part of a line: %r" % data[-80:])
for i, l in enumerate(data.splitlines(), 1):
    json.loads(l)
PY
}

# ls_field DIR RUN KEY: the run's KEY in `ddptop ls --json`
ls_field() {
    "$DDPTOP" ls --log-dir "$1" --json | $PY -c '
import json, sys
for r in json.load(sys.stdin):
    if r["run_id"] == sys.argv[1]:
        print(json.dumps(r.get(sys.argv[2])))' "$2" "$3"
}

# ---------------------------------------------------------------------------------------
# A full disk.
FULL=$T/full
mkdir -p "$FULL"
if ! mount -t tmpfs -o size=512k,mode=0755 tmpfs "$FULL"; then
    tap_fail "mount a 512 KiB tmpfs for the full disk (needs root in a mount namespace)"
    tap_done
    exit 1
fi

# Each attempt prints about 180 KiB and exits 3: the disk fills in the third attempt.
rj_run "$T/fill.out" "${COMMON[@]}" --max-restarts 3 --log-dir "$FULL" --run-id fill \
    -- sh -c 'i=0; while [ $i -lt 2000 ]; do echo "line $i of a rank that fills the disk ......................................."; i=$((i+1)); done; exit 3' \
    "$T/marker"
rj_expect_rc "a job that fills its log directory and fails after 4 attempts exits 1" 1
last=$(tail -1 "$T/fill.out")
if [[ "$last" == *"incomplete: disk full"*"exit code 1" ]] &&
   grep -q "^\[ddptop\] the run's record is incomplete (disk full): .* bytes of rank logs" "$T/fill.out" &&
   grep -q "^\[ddptop\] FAILED after 4 attempts" "$T/fill.out"; then
    tap_ok "the final lines say FAILED after 4 attempts and that the record is incomplete (disk full)"
else
    tap_fail "the final lines say FAILED after 4 attempts and that the record is incomplete (disk full)" \
        "$(tail -6 "$T/fill.out")"
fi
if grep -q "cannot write $FULL/fill/.*No space left on device" "$T/fill.out"; then
    tap_ok "the failed write is said on the screen as it happens"
else
    tap_fail "the failed write is said on the screen as it happens" "$(grep -i cannot "$T/fill.out" | head -3)"
fi
if err=$(json_lines "$FULL/fill/events.jsonl" 2>&1) && tail -1 "$FULL/fill/events.jsonl" | grep -q '"kind":"end".*"state":"failed"'; then
    tap_ok "events.jsonl holds whole lines only and ends with the run's real end (failed)"
else
    tap_fail "events.jsonl holds whole lines only and ends with the run's real end (failed)" "$err" \
        "$(tail -c 400 "$FULL/fill/events.jsonl")"
fi
row=$(env -u COLUMNS "$DDPTOP" ls --log-dir "$FULL" | awk '$1 == "fill"')
if [[ "$row" == "fill  failed (incomplete: disk full)  "*" 4 "* ]]; then
    tap_ok "ddptop ls: failed (incomplete: disk full), 4 attempts"
else
    tap_fail "ddptop ls: failed (incomplete: disk full), 4 attempts" "$row"
fi
got="$(ls_field "$FULL" fill state) $(ls_field "$FULL" fill attempts) $(ls_field "$FULL" fill incomplete)"
detail=$(ls_field "$FULL" fill incomplete_detail)
if [ "$got" = '"failed" 4 "disk full"' ] && [[ "$detail" == *"bytes of rank logs"* ]]; then
    tap_ok "ddptop ls --json: state failed, attempts 4, incomplete \"disk full\" with what was lost"
else
    tap_fail "ddptop ls --json: state failed, attempts 4, incomplete \"disk full\" with what was lost" "$got" "$detail"
fi
tap_check "the space reserve is given back at the end" test ! -e "$FULL/fill/reserve"
rm -rf "${FULL:?}/fill"

# A job that succeeds while a filler file (written by rank 0) takes the rest of the disk.
rj_run "$T/ok.out" "${COMMON[@]}" --nproc-per-node 2 --log-dir "$FULL" --run-id filler \
    -- sh -c 'if [ "$RANK" = 0 ]; then dd if=/dev/zero of="$0" bs=4k 2>/dev/null; fi
              i=0; while [ $i -lt 300 ]; do echo "rank $RANK line $i after the disk is full ..................."; i=$((i+1)); done' \
    "$FULL/zeros"
rj_expect_rc "a job whose ranks succeed on a disk filled meanwhile exits 0" 0
row=$(env -u COLUMNS "$DDPTOP" ls --log-dir "$FULL" | awk '$1 == "filler"')
if [[ "$row" == "filler  succeeded (incomplete: disk full)  "* ]] &&
   [ "$(ls_field "$FULL" filler incomplete)" = '"disk full"' ] && [[ "$(tail -1 "$T/ok.out")" == *"incomplete: disk full"* ]]; then
    tap_ok "not listed as plain succeeded: ls says succeeded (incomplete: disk full), --json and the final line too"
else
    tap_fail "not listed as plain succeeded: ls says succeeded (incomplete: disk full), --json and the final line too" \
        "$row" "$(tail -2 "$T/ok.out")"
fi
umount "$FULL"

# ---------------------------------------------------------------------------------------
# Modes: other users on the machine.
LOGS=$T/logs
mkdir -p "$LOGS"
chmod 755 "$LOGS"
rj_run "$T/mode.out" "${COMMON[@]}" --log-dir "$LOGS" --run-id private \
    -- sh -c 'echo "secret token abc123"' "$T/marker"
rj_expect_rc "a run with the default modes" 0
R=$LOGS/private
bad=$(find "$R" \( -type d ! -perm 0700 \) -o \( -type f ! -perm 0600 \) -printf '%m %p\n')
if [ -z "$bad" ] && [ -s "$R/attempt-0/rank-0.log" ] && [ -e "$R/agent.log" ]; then
    tap_ok "the run's directories are 0700 and every file in them 0600"
else
    tap_fail "the run's directories are 0700 and every file in them 0600" "$bad"
fi
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
if ! as_nobody cat "$R/attempt-0/rank-0.log" >/dev/null 2>&1 && ! as_nobody ls "$R" >/dev/null 2>&1 &&
   as_nobody cat "$R/events.jsonl" 2>&1 | grep -q "Permission denied"; then
    tap_ok "another user (uid 65534) can neither list the run nor read its logs (Permission denied)"
else
    tap_fail "another user (uid 65534) can neither list the run nor read its logs (Permission denied)" \
        "$(as_nobody cat "$R/attempt-0/rank-0.log" 2>&1 | head -2)"
fi

rj_run "$T/mode2.out" "${COMMON[@]}" --log-dir "$LOGS" --run-id open --log-mode 0644 \
    -- sh -c 'echo "shared on purpose"' "$T/marker"
rj_expect_rc "a run with --log-mode 0644" 0
R=$LOGS/open
bad=$(find "$R" \( -type d ! -perm 0755 \) -o \( -type f ! -perm 0644 ! -name adopt.json ! -name controller.lock \) -printf '%m %p\n')
if [ -z "$bad" ] && [ "$(stat -c %a "$R/adopt.json")" = 600 ] &&
   [ "$(as_nobody cat "$R/attempt-0/rank-0.log" 2>&1)" = "shared on purpose" ]; then
    tap_ok "--log-mode 0644: directories 0755, logs 0644 and read by another user; adopt.json stays 0600"
else
    tap_fail "--log-mode 0644: directories 0755, logs 0644 and read by another user; adopt.json stays 0600" "$bad" \
        "$(stat -c '%a %n' "$R/adopt.json")"
fi

rj_run "$T/mode3.out" "${COMMON[@]}" --log-dir "$LOGS" --run-id group --log-mode group \
    -- sh -c 'echo "for the group"' "$T/marker"
R=$LOGS/group
gid=$(id -g)
if [ "$(stat -c %a "$R" "$R/attempt-0" "$R/attempt-0/rank-0.log" "$R/events.jsonl" | tr '\n' ' ')" = "750 750 640 640 " ] &&
   [ "$(setpriv --reuid=65534 --regid="$gid" --clear-groups cat "$R/attempt-0/rank-0.log" 2>&1)" = "for the group" ] &&
   ! as_nobody cat "$R/attempt-0/rank-0.log" >/dev/null 2>&1; then
    tap_ok "--log-mode group: 0750/0640, read by a user of the group, not by others"
else
    tap_fail "--log-mode group: 0750/0640, read by a user of the group, not by others" \
        "$(stat -c '%a %n' "$R" "$R/attempt-0" "$R/attempt-0/rank-0.log" "$R/events.jsonl")"
fi

msg=$("$DDPTOP" run --headless --log-dir "$LOGS" --log-mode 0666 -- true 2>&1)
rc=$?
if [ "$rc" = 2 ] && [[ "$msg" == *"--log-mode wants private, group or an octal file mode"*"never write"*"not '0666'"* ]]; then
    tap_ok "--log-mode 0666 (writable by others) is refused with exit 2 and says what is allowed"
else
    tap_fail "--log-mode 0666 (writable by others) is refused with exit 2 and says what is allowed" "rc $rc: $msg"
fi

# A shared --log-dir (1777) and a known --run-id: another user makes the run's directory first
# (0777, theirs). ddptop must not write the run's logs where its owner reads them.
SHARED=$T/shared
mkdir -m 1777 "$SHARED"
as_nobody mkdir -m 777 "$SHARED/taken"
msg=$("$DDPTOP" run --headless --no-check --log-dir "$SHARED" --run-id taken -- sh -c 'echo "secret token abc123"' 2>&1)
rc=$?
if [ "$rc" != 0 ] && [ -z "$(ls -A "$SHARED/taken")" ] &&
   [[ "$msg" == *"the run directory $SHARED/taken belongs to uid 65534, not to you"*"choose another --run-id or --log-dir"* ]]; then
    tap_ok "a run directory another user made first is refused (nothing written there) and the message says whose it is"
else
    tap_fail "a run directory another user made first is refused (nothing written there) and the message says whose it is" \
        "rc $rc: $msg" "$(ls -la "$SHARED/taken")"
fi

# ---------------------------------------------------------------------------------------
# SIGKILL of the controller after its ranks printed fast.
K=20000
PRINT='sleep 3; awk -v r="$RANK" -v k='$K' '"'"'BEGIN { for (i = 0; i < k; i++) printf "rank %d seq %06d ................................\n", r, i }'"'"'; touch "$0.done$RANK"; exec sleep 60'
rj_start "$T/kill.out" "${COMMON[@]}" --nproc-per-node 2 --log-dir "$LOGS" --run-id killed --agent-grace 0 \
    -- sh -c "$PRINT" "$T/marker"
if wait_until 40 test -e "$T/marker.done0" -a -e "$T/marker.done1"; then
    sleep 0.4      # the bytes travel rank -> agent -> controller -> its writer; less than its 1 s sync
    kill -KILL "$RJ_PID"
    wait "$RJ_PID" 2>/dev/null
    RJ_PID=""
    t_kill=$(date +%s%N)
    res=$($PY - "$LOGS/killed" "$K" <<'PY'
import sys
run, k = sys.argv[1], int(sys.argv[2])
out = []
for r in (0, 1):
    data = open(f"{run}/attempt-0/rank-{r}.log", "rb").read()
    lines = data.split(b"\n")
    whole = lines[:-1]
    want = [b"rank %d seq %06d ................................" % (r, i) for i in range(len(whole))]
    ok = whole == want
    missing = (k - len(whole)) * 50 - len(lines[-1])   # 50 bytes a line
    out.append(f"{r}:{len(whole)}:{missing}:{'inorder' if ok else 'BAD'}")
print(" ".join(out))
PY
)
    ok=1
    for f in $res; do
        IFS=: read -r r n miss order <<<"$f"
        [ "$order" = inorder ] && [ "$miss" -le 4096 ] || ok=0
    done
    if [ "$ok" = 1 ]; then
        tap_ok "SIGKILL of the controller: at most 4 KiB per rank missing from the logs, in order ($res of $K lines)"
    else
        tap_fail "SIGKILL of the controller: at most 4 KiB per rank missing from the logs, in order" "rank:lines:bytes missing: $res"
    fi
    kill_marker_pids "$T"
    dur=$(ls_field "$LOGS" killed duration_s)
    start=$(ls_field "$LOGS" killed start)
    row=$(env -u COLUMNS "$DDPTOP" ls --log-dir "$LOGS" | awk '$1 == "killed"')
    # from its first event to the kill, within the 1 s at which its controller marks itself alive
    want=$($PY -c 'import sys, datetime as d
t = d.datetime.strptime(sys.argv[1].strip("\""), "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=d.timezone.utc)
print("%.1f" % (int(sys.argv[2]) / 1e9 - t.timestamp()))' "$start" "$t_kill")
    if $PY -c 'import sys; d, w = float(sys.argv[1]), float(sys.argv[2]); sys.exit(not (w >= 3 and abs(d - w) <= 1.5))' "$dur" "$want" &&
       [[ "$row" != *" 0m00s"* ]]; then
        tap_ok "ddptop ls shows the killed run's duration (${dur} s of ${want} s): $row"
    else
        tap_fail "ddptop ls shows the killed run's duration" "duration_s $dur, ran $want s, start $start" "$row"
    fi
else
    tap_fail "the ranks printed their $K lines" "$(tail -5 "$T/kill.out")"
fi

tap_done
