#!/usr/bin/env bash
# Integration: what a run's files hold is not trusted (docs/logs.md "What a reader believes",
# "On a terminal"). Crafted run directories, as anyone who can write a log directory could
# leave them:
#   - a 2-line events.jsonl whose launch claims attempt 16777216 and 4 nodes of 16777216 ranks
#     (before the fix `ddptop view` took 4.8 GB and 40 s of CPU on it), one that claims 262140
#     ranks (within the limits) with no rank logs on disk, one that jumps to attempt 1000000
#     with no attempt-1000000/, and a gpu.jsonl line of 300000 GPUs: `ddptop ls` and `ddptop
#     view` (in a real terminal, tmux) finish at once, under `ulimit -v` and with a small peak
#     RSS, and say which file, which line and what is wrong;
#   - a rank log holding OSC 52 (clipboard write), OSC 0 (title) and CSI sequences: `ddptop
#     logs` on a terminal shows them as text (^[...), tmux's pane title and paste buffers are
#     unchanged; with --raw the same terminal gets the bytes (the title does change: the attack
#     is real), and a pipe gets the exact bytes (cmp), with or without --raw; a UTF-8 character
#     cut by a 64 KiB read is shown whole;
#   - FIFOs another user planted as a run's events.jsonl, controller.json and rank log in a
#     shared log directory: ls and logs do not hang in open() and say what is wrong.
# Every process started here is ended by id (the tmux server's tree), even on failure.
set -u
cd "$(dirname "$0")/.."
. tests/lib/tap.sh

BUILD_DIR=${DDPTOP_BUILD:-$PWD/${BUILD:-build}}
DDPTOP=$BUILD_DIR/ddptop
SOCK=ddph-$$
. tests/lib/tmux.sh
D=$(mktemp -d /tmp/it_hostile_runs.XXXXXX) || exit 1
cleanup() {
    tmux_cleanup
    rm -rf "$D"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
LOGS=$D/logs
VLIMIT_KB=400000        # ulimit -v for ls and view: the attack needed 4.8 GB
RSS_MAX_KB=65536        # their peak RSS must stay under this (a healthy view: about 7 MB)

[ -x "$DDPTOP" ] || { tap_fail "ddptop binary exists ($DDPTOP)"; tap_done; exit 1; }
command -v tmux >/dev/null || { tap_fail "tmux is available"; tap_done; exit 1; }
[ -x /usr/bin/time ] || { tap_fail "/usr/bin/time is available (peak RSS)"; tap_done; exit 1; }

T0='"time":"2026-11-25T10:00:00.000Z"'
T1='"time":"2026-11-25T10:00:01.000Z"'
mkrun() {   # mkrun ID LINE...: a run directory whose events.jsonl holds the lines
    local id=$1; shift
    mkdir -p "$LOGS/$id"
    printf '%s\n' "$@" >"$LOGS/$id/events.jsonl"
}

T new-session -d -s base -x 120 -y 40 "sleep 600"      # the server, for the whole test
T set -g set-clipboard on                                 # OSC 52 would make a paste buffer

# ---------------------------------------------------------------------------------------
# Row 1: counts from the files are bounded by what is on disk.
mkrun huge "{$T0,\"kind\":\"launch\",\"attempt\":16777216,\"ranks\":67108864,\"hosts\":[\"a\",\"b\",\"c\",\"d\"],\"ranks_per_node\":[16777216,16777216,16777216,16777216],\"text\":\"x\"}" \
           "{$T1,\"kind\":\"end\",\"attempt\":16777216,\"state\":\"failed\",\"text\":\"y\"}"
mkrun nologs "{$T0,\"kind\":\"launch\",\"attempt\":0,\"ranks\":262140,\"hosts\":[\"a\",\"b\",\"c\",\"d\"],\"ranks_per_node\":[65535,65535,65535,65535],\"text\":\"x\"}" \
             "{$T1,\"kind\":\"end\",\"attempt\":0,\"state\":\"failed\",\"text\":\"y\"}"
mkrun jump "{$T0,\"kind\":\"launch\",\"attempt\":0,\"ranks\":1,\"hosts\":[\"a\"],\"ranks_per_node\":[1],\"text\":\"x\"}" \
           "{$T1,\"kind\":\"launch\",\"attempt\":1000000,\"ranks\":1,\"hosts\":[\"a\"],\"ranks_per_node\":[1],\"text\":\"x\"}"
mkdir -p "$LOGS/jump/attempt-0" && echo "hello from attempt 0" >"$LOGS/jump/attempt-0/rank-0.log"
# a run that is fine but for its gpu.jsonl: one line of 300000 GPUs
mkrun gpus "{$T0,\"kind\":\"launch\",\"attempt\":0,\"ranks\":1,\"hosts\":[\"a\"],\"ranks_per_node\":[1],\"text\":\"x\"}" \
           "{$T1,\"kind\":\"end\",\"attempt\":0,\"state\":\"succeeded\",\"exit_code\":0,\"text\":\"y\"}"
mkdir -p "$LOGS/gpus/attempt-0" && echo "gpu run line" >"$LOGS/gpus/attempt-0/rank-0.log"
/usr/bin/python3 -c '
import json, sys
print(json.dumps({"time": "2026-11-25T10:00:00.500Z", "host": "a", "gpus": [{"index": 0, "util": 50}] * 300000}))
' >"$LOGS/gpus/gpu.jsonl"

out=$( (ulimit -v $VLIMIT_KB; exec /usr/bin/time -f 'PEAK-KB=%M' timeout 10 env -u COLUMNS "$DDPTOP" ls --log-dir "$LOGS") 2>&1)
rc=$?
peak=$(sed -n 's/^PEAK-KB=//p' <<<"$out")
if [ $rc -eq 0 ] && [ -n "$peak" ] && [ "$peak" -lt $RSS_MAX_KB ]; then
    tap_ok "ls on the crafted runs finishes under ulimit -v $VLIMIT_KB, peak RSS ${peak} KB"
else
    tap_fail "ls on the crafted runs finishes, bounded (rc $rc, peak ${peak:-?} KB)" "$out"
fi
check_row() {   # check_row NAME ID REGEX: ls's row of ID is unknown with a note matching REGEX
    local row
    row=$(awk -v id="$2" '$1 == id' <<<"$out")
    if grep -q ' unknown ' <<<"$row" && grep -qE -- "$3" <<<"$row"; then tap_ok "$1"; else tap_fail "$1" "$row"; fi
}
check_row "ls: attempt 16777216 is named with its file and line" huge \
    "note: $LOGS/huge/events.jsonl:1: attempt 16777216 is out of range \(0 to 1048576\)"
check_row "ls: 262140 ranks without their rank logs are not believed" nologs \
    "events.jsonl:1: the launch of attempt 0 claims 262140 ranks, but attempt-0/ holds 0 of their rank logs"
check_row "ls: a jump to attempt 1000000 without its directory is not believed" jump \
    "events.jsonl:2: a launch of attempt 1000000 after 1 launch, and there is no attempt-1000000/"
if grep -qE '^jump +unknown +1 +1 +1 ' <<<"$out"; then tap_ok "ls: the run keeps what its good lines say (1 attempt, 1 rank)"
else tap_fail "ls: the run keeps what its good lines say" "$out"; fi

# view RUN SESSION: ddptop view in a 120x40 tmux window, under ulimit -v, exec'd so that the
# pane's process is ddptop itself (its VmHWM is read while it shows the run)
view() {
    T new-session -d -s "$2" -x 120 -y 40 \
        "cd $D && ulimit -v $VLIMIT_KB && LANG=C.UTF-8 TERM=screen-256color exec $DDPTOP view --log-dir $LOGS $1"
}
view_check() {  # view_check NAME RUN REGEX
    local s=v$2 pid hwm
    view "$2" "$s"
    if wait_screen "$s" "$3" 10; then
        pid=$(T display -p -t "$s" '#{pane_pid}')
        hwm=$(awk '/^VmHWM:/ { print $2 }' /proc/"$pid"/status 2>/dev/null)
        if [ -n "$hwm" ] && [ "$hwm" -lt $RSS_MAX_KB ]; then tap_ok "$1 (VmHWM ${hwm} kB)"
        else tap_fail "$1: peak RSS bounded (VmHWM ${hwm:-?} kB)" "$SCREEN"; fi
    else
        tap_fail "$1: within 10 s under ulimit -v $VLIMIT_KB" "$SCREEN"
    fi
    T send-keys -t "$s" q
}
view_check "view of the 4.8 GB attack: shown at once, the line and what is wrong said" huge \
    'state unknown: events.jsonl:1: attempt 16777216 is out of range'
view_check "view of 262140 claimed ranks without logs: not believed, said" nologs \
    'events.jsonl:1: the launch of attempt 0 claims 262140 ranks'
view_check "view of the jump to attempt 1000000: attempt 0 shown, line 2 said" jump \
    'events.jsonl:2: a launch of attempt 1000000'
if grep -q 'hello from attempt 0' <<<"$SCREEN"; then tap_ok "view of the jump: attempt 0's log is there"
else tap_fail "view of the jump: attempt 0's log is there" "$SCREEN"; fi
view_check "view with a gpu.jsonl line of 300000 GPUs: the line is not taken, said" gpus \
    '1 line of events.jsonl or gpu.jsonl not understood'

# ---------------------------------------------------------------------------------------
# Row 2: `ddptop logs` on a terminal.
mkrun esc "{$T0,\"kind\":\"launch\",\"attempt\":0,\"ranks\":1,\"hosts\":[\"a\"],\"ranks_per_node\":[1],\"text\":\"x\"}" \
          "{$T1,\"kind\":\"end\",\"attempt\":0,\"state\":\"succeeded\",\"exit_code\":0,\"text\":\"y\"}"
mkdir -p "$LOGS/esc/attempt-0"
RLOG=$LOGS/esc/attempt-0/rank-0.log
printf 'before\033]52;c;SGVsbG8=\007after\n\033]0;PWNED-TITLE\007\n\033[31mred\033[0m done\n' >"$RLOG"

logs_in() {     # logs_in SESSION ARGS...: ddptop logs in a window that titled itself before-title
    local s=$1; shift
    T new-session -d -s "$s" -x 120 -y 40 \
        "printf '\\033]2;before-title\\033\\\\'; cd $D && LANG=C.UTF-8 TERM=screen-256color $DDPTOP logs --log-dir $LOGS $*; echo LOGS-EXIT=\$?; sleep 600"
}
logs_in safe esc
if wait_screen safe 'LOGS-EXIT=0' 10 &&
   grep -qF 'before^[]52;c;SGVsbG8=^Gafter' <<<"$SCREEN" && grep -qF '^[]0;PWNED-TITLE^G' <<<"$SCREEN" &&
   grep -qF '^[[31mred^[[0m done' <<<"$SCREEN" && grep -qF '==> rank 0 (a) <==' <<<"$SCREEN"; then
    tap_ok "logs on a terminal: OSC 52, OSC 0 and CSI shown as text"
else
    tap_fail "logs on a terminal: OSC 52, OSC 0 and CSI shown as text" "$SCREEN"
fi
title=$(T display -p -t safe '#{pane_title}')
bufs=$(T list-buffers 2>/dev/null)
if [ "$title" = before-title ] && [ -z "$bufs" ]; then
    tap_ok "logs on a terminal: the pane title and the clipboard are untouched"
else
    tap_fail "logs on a terminal: the pane title and the clipboard are untouched" "title: $title" "buffers: $bufs"
fi

logs_in raw esc --rank 0 --raw
if wait_screen raw 'LOGS-EXIT=0' 10 && [ "$(T display -p -t raw '#{pane_title}')" = PWNED-TITLE ] &&
   T list-buffers 2>/dev/null | grep -q Hello; then
    tap_ok "logs --raw on a terminal: the bytes reach it (the title changes, OSC 52 fills a buffer)"
else
    tap_fail "logs --raw on a terminal: the bytes reach it" "title: $(T display -p -t raw '#{pane_title}')" \
        "buffers: $(T list-buffers 2>&1)" "$SCREEN"
fi

"$DDPTOP" logs --log-dir "$LOGS" esc --rank 0 >"$D/pipe.out" 2>"$D/pipe.err"
rc1=$?
"$DDPTOP" logs --log-dir "$LOGS" esc --rank 0 --raw >"$D/raw.out" 2>>"$D/pipe.err"
rc2=$?
if [ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] && cmp -s "$RLOG" "$D/pipe.out" && cmp -s "$RLOG" "$D/raw.out"; then
    tap_ok "logs --rank to a pipe, with and without --raw: exactly the file's bytes"
else
    tap_fail "logs --rank to a pipe: exactly the file's bytes (rc $rc1/$rc2)" "$(cat "$D/pipe.err")" \
        "$(cmp "$RLOG" "$D/pipe.out" 2>&1)" "$(cmp "$RLOG" "$D/raw.out" 2>&1)"
fi

# a UTF-8 character across the 64 KiB reads: whole on the terminal, no U+FFFD
mkrun utf "{$T0,\"kind\":\"launch\",\"attempt\":0,\"ranks\":1,\"hosts\":[\"a\"],\"ranks_per_node\":[1],\"text\":\"x\"}"
mkdir -p "$LOGS/utf/attempt-0"
{ head -c 65535 /dev/zero | tr '\0' 'a'; printf '\303\251 end\n'; } >"$LOGS/utf/attempt-0/rank-0.log"
script -qfec "$DDPTOP logs --log-dir $LOGS utf --rank 0" /dev/null >"$D/tty.out" 2>&1 </dev/null
if grep -q $'a\303\251 end' "$D/tty.out" && ! grep -q $'\357\277\275' "$D/tty.out"; then
    tap_ok "logs on a terminal: a character cut by a read is shown whole"
else
    tap_fail "logs on a terminal: a character cut by a read is shown whole" "$(tail -c 200 "$D/tty.out" | od -c | tail -5)"
fi

out=$("$DDPTOP" logs --log-dir "$LOGS" esc --events --raw 2>&1)
if [ $? -eq 2 ] && grep -q -- '--raw is for the rank logs' <<<"$out"; then tap_ok "--raw with --events is a usage error"
else tap_fail "--raw with --events is a usage error" "$out"; fi

# ---------------------------------------------------------------------------------------
# FIFOs planted in a shared log directory (1777) by another user (uid 65534): a run whose
# events.jsonl, controller.json and rank log are FIFOs. ls, logs and view must neither hang
# in open() nor read them, and must say what is wrong.
SH=$D/shared
chmod 755 "$D"
mkdir -m 1777 "$SH"
setpriv --reuid=65534 --regid=65534 --clear-groups sh -c "mkdir -p $SH/trap/attempt-0 && mkfifo $SH/trap/events.jsonl $SH/trap/controller.json $SH/trap/attempt-0/rank-0.log && chmod -R a+rwX $SH/trap"
tap_check "uid 65534 planted the FIFOs" test -p "$SH/trap/events.jsonl" -a -p "$SH/trap/attempt-0/rank-0.log"
out=$(timeout 10 "$DDPTOP" ls --log-dir "$SH" 2>&1); rc=$?
if [ $rc = 0 ] && grep -q "trap .*note: cannot read $SH/trap/events.jsonl: not a regular file" <<<"$out"; then
    tap_ok "ls: a FIFO planted as a run's events.jsonl and controller.json does not hang it, and the run says why"
else
    tap_fail "ls: a FIFO planted as a run's events.jsonl and controller.json does not hang it, and the run says why" "rc $rc: $out"
fi
out=$(timeout 10 "$DDPTOP" logs --log-dir "$SH" trap --events 2>&1); rc=$?
if [ $rc = 1 ] && grep -q "cannot read $SH/trap/events.jsonl: not a regular file" <<<"$out"; then
    tap_ok "logs --events: the FIFO is refused at once (exit 1), with the reason"
else
    tap_fail "logs --events: the FIFO is refused at once (exit 1), with the reason" "rc $rc: $out"
fi
rm -f "$SH/trap/events.jsonl"
printf '%s\n' "{$T0,\"kind\":\"launch\",\"attempt\":0,\"ranks\":1,\"hosts\":[\"a\"],\"ranks_per_node\":[1],\"text\":\"x\"}" >"$SH/trap/events.jsonl"
out=$(timeout 10 "$DDPTOP" logs --log-dir "$SH" trap --rank 0 2>&1 </dev/null); rc=$?
if [ $rc = 1 ] && grep -q "run 'trap' has no rank logs in attempt 0" <<<"$out"; then
    tap_ok "logs --rank 0: a FIFO as the rank's log is not read (no hang, exit 1: no rank logs)"
else
    tap_fail "logs --rank 0: a FIFO as the rank's log is not read (no hang, exit 1: no rank logs)" "rc $rc: $out"
fi

tap_done
