#!/usr/bin/env bash
# The dashboard's panes on a real terminal (issue 12), ddptop under tmux (a private server,
# -L) read back with capture-pane. One local rank runs a shell script that prints 300-column
# lines, the runtime's JSON step line and its TORCHELASTIC_RESTART_COUNT, then sleeps. At
# 80x24, 120x40 and 200x50: a long log line is cut at its pane's edge, a blank column before
# the events pane beside it (wide) or the full width without running into the events below
# (narrow); the launch event, longer than the events pane is wide, is on screen whole,
# wrapped. At 120x40: the step line in words while the rank's log file holds the JSON; after
# `r` the log pane shows the new attempt's lines under an "attempt 1" marker and none of the
# old attempt's, `[` shows the old attempt and `]` comes back. Every wait polls the screen
# against a deadline; every tmux server and process is ended by id on the way out.
set -u
cd "$(dirname "$0")/.."
. tests/lib/tap.sh

BUILD_DIR=${DDPTOP_BUILD:-$PWD/${BUILD:-build}}
DDPTOP=$BUILD_DIR/ddptop
SOCK=ddpt-panes-$$
. tests/lib/tmux.sh
D=""
cleanup() {
    tmux_cleanup
    [ -n "$D" ] && rm -rf "$D"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

for tool in tmux "$DDPTOP"; do
    command -v "$tool" >/dev/null || { tap_fail "$tool is available"; tap_done; exit; }
done
# a short directory: the launch event names it, and at 80x24 it must fit two rows
D=$(mktemp -d /tmp/ddpt.XXXXXX) || { tap_fail "test directory"; tap_done; exit; }
# the dashboard's session socket in this test's own directory (tests/it_attach.sh)
mkdir -m 700 "$D/xdg" && export XDG_RUNTIME_DIR=$D/xdg

LONG=$(printf 'X%.0s' $(seq 300))
STEP='{"event":"step","v":1,"rank":0,"step":12,"loss":4.87,"step_ms":100.0,"tokens_per_s":12345.6}'
cat >"$D/rank.sh" <<EOF
#!/bin/sh
n=\${TORCHELASTIC_RESTART_COUNT:-none}
echo "rank says restart-count=\$n"
if [ "\$n" = 0 ]; then
    i=0
    while [ \$i -lt 40 ]; do echo "$LONG"; i=\$((i + 1)); done
fi
echo '$STEP'
echo "restart-count=\$n is running"
exec sleep 1000
EOF
chmod +x "$D/rank.sh"

cmd="cd $D && LANG=C.UTF-8 TERM=screen-256color $DDPTOP --nproc-per-node 1 --log-dir $D/logs"
cmd+=" --run-id panes --hang-timeout 0 -- $D/rank.sh; echo DDPTOP-EXIT=\$?; sleep 600"
T new-session -d -s panes -x 120 -y 40 "$cmd"
if ! wait_screen panes 'restart-count=0 is running' 60; then
    tap_fail "the job runs and its rank's lines are on screen" "$SCREEN"
    tap_done
    exit
fi

# The launch event as the model has it (events.jsonl), blanks dropped.
launch=""
end=$((SECONDS + 10))
while [ -z "$launch" ] && [ $SECONDS -lt $end ]; do
    launch=$(grep -o '"kind":"launch"[^}]*' "$D/logs/panes/events.jsonl" 2>/dev/null |
             grep -o '"text":"[^"]*"' | head -1 | sed 's/^"text":"//; s/"$//')
    [ -n "$launch" ] || sleep 0.2
done
[ -n "$launch" ] || launch="attempt 0: launching 1 rank on 1 node (run panes, logs in $D/logs/panes/attempt-0)"
launch_sq=$(tr -d ' ' <<<"$launch")

# events_text: the events pane's rows as one string: the columns from the pane's title on,
# from the row under the title to the row above the status line, each row without its head
# (time and kind, 19 columns) or the indent of a wrapped row (9), blanks dropped.
events_text() {
    awk '
        { row[NR] = $0 }
        END {
            for (i = 1; i <= NR; i++) if ((c = index(row[i], " Events ")) > 0) { t = i; break }
            if (!t) exit
            out = ""
            for (i = t + 1; i < NR; i++) {
                r = substr(row[i], c)
                r = substr(r, (r ~ /^[0-9][0-9]:/) ? 20 : 10)
                gsub(/ /, "", r)
                out = out r
            }
            print out
        }' <<<"$SCREEN"
}

for size in 120x40 200x50 80x24; do
    cols=${size%x*} rows=${size#*x}
    T resize-window -t panes -x "$cols" -y "$rows"
    wait_screen panes "^X{20}" 10
    sleep 0.5                                  # the frame after the resize
    wait_screen panes "Events" 5
    if [ "$cols" -ge 110 ]; then
        # wide: the events beside the log, one blank column between them
        if grep -Eq "X [0-9]{2}:[0-9]{2}:[0-9]{2} launch" <<<"$SCREEN" &&
           ! grep -Eq "XXXX[^X ]" <<<"$SCREEN"; then
            tap_ok "$size: a long log line stops one blank column before the events pane"
        else
            tap_fail "$size: a long log line stops one blank column before the events pane" "$SCREEN"
        fi
    else
        # narrow: the log takes the width, cut at its edge; nothing of it in the events below
        xrows=$(grep -c "XXXX" <<<"$SCREEN")
        full=$(grep -Ec "^X{$cols}\$" <<<"$SCREEN")
        after=$(sed -n '/ Events /,$p' <<<"$SCREEN" | grep -c XXXX)
        if [ "$xrows" -gt 0 ] && [ "$xrows" -eq "$full" ] && [ "$after" -eq 0 ]; then
            tap_ok "$size: long log lines are cut at the pane's edge, none reaches the events pane"
        else
            tap_fail "$size: long log lines are cut at the pane's edge ($xrows rows with X, $full whole, $after in the events)" "$SCREEN"
        fi
    fi
    got=$(events_text)
    if [[ $got == *"$launch_sq"* ]]; then
        tap_ok "$size: the launch event (${#launch} characters) is on screen whole, wrapped"
    else
        tap_fail "$size: the launch event is on screen whole, wrapped" "want: $launch_sq" "got:  $got" "$SCREEN"
    fi
done

# --- the runtime's step line in words; the log file keeps the JSON ---------------------------
T resize-window -t panes -x 120 -y 40
if wait_screen panes 'step 12  loss 4\.87  100\.0 ms/step  12\.3k tok/s' 10 &&
   ! grep -q '"event"' <<<"$SCREEN"; then
    tap_ok "the step line is shown in words (step 12  loss 4.87  100.0 ms/step  12.3k tok/s)"
else
    tap_fail "the step line is shown in words" "$SCREEN"
fi
raw=""
end=$((SECONDS + 10))                          # log files are flushed every second
while [ $SECONDS -lt $end ]; do
    grep -qxF "$STEP" "$D/logs/panes/attempt-0/rank-0.log" 2>/dev/null && { raw=1; break; }
    sleep 0.3
done
if [ -n "$raw" ] && ! grep -q 'ms/step' "$D/logs/panes/attempt-0/rank-0.log"; then
    tap_ok "the rank's log file holds the raw JSON step line"
else
    tap_fail "the rank's log file holds the raw JSON step line" "$(cat "$D/logs/panes/attempt-0/rank-0.log" 2>&1 | cut -c1-120)"
fi

# --- r: the log pane follows the new attempt -------------------------------------------------
T send-keys -t panes r
wait_screen panes 'y/n' 10 && T send-keys -t panes y
if wait_screen panes 'restart-count=1 is running' 60 && wait_screen panes '--- attempt 1' 5 &&
   ! grep -q 'restart-count=0' <<<"$SCREEN" && ! grep -q 'XXXX' <<<"$SCREEN" &&
   grep -q 'rank says restart-count=1' <<<"$SCREEN"; then
    tap_ok "after r the log pane shows attempt 1's lines under its marker, none of attempt 0's"
else
    tap_fail "after r the log pane shows attempt 1's lines under its marker, none of attempt 0's" "$SCREEN"
fi
new=""
end=$((SECONDS + 10))                          # flushed every second
while [ $SECONDS -lt $end ]; do
    grep -q 'restart-count=1' "$D/logs/panes/attempt-1/rank-0.log" 2>/dev/null && { new=1; break; }
    sleep 0.3
done
if [ -n "$new" ]; then
    tap_ok "attempt 1's lines are in attempt-1/rank-0.log"
else
    tap_fail "attempt 1's lines are in attempt-1/rank-0.log" "$(ls -R "$D/logs" 2>&1)"
fi
T send-keys -t panes '['
if wait_screen panes 'restart-count=0 is running' 10 && grep -q 'attempt 0 of 0-1' <<<"$SCREEN" &&
   ! grep -q 'restart-count=1' <<<"$SCREEN"; then
    tap_ok "[ shows attempt 0's lines"
else
    tap_fail "[ shows attempt 0's lines" "$SCREEN"
fi
T send-keys -t panes ']'
if wait_screen panes 'restart-count=1 is running' 10 && ! grep -q 'restart-count=0' <<<"$SCREEN"; then
    tap_ok "] comes back to the current attempt"
else
    tap_fail "] comes back to the current attempt" "$SCREEN"
fi

# --- q, y: the job ends, nothing is left -----------------------------------------------------
srv=$(T display -p '#{pid}')
pids_before=$(tree_of "$srv" | tr '\n' ' ')
T send-keys -t panes q
wait_screen panes 'y/n' 5 && T send-keys -t panes y
if wait_screen panes 'DDPTOP-EXIT=' 30; then
    left=""
    end=$((SECONDS + 10))
    while [ $SECONDS -lt $end ]; do
        left=""
        for p in $pids_before; do
            c=$(cat /proc/$p/comm 2>/dev/null) || continue
            case $c in
            ddptop|ddptop-agent|rank.sh) left="$left $p($c)" ;;
            sleep) tr '\0' ' ' </proc/$p/cmdline 2>/dev/null | grep -q 'sleep 1000' &&
                   left="$left $p($c)" ;;
            esac
        done
        [ -z "$left" ] && break
        sleep 0.2
    done
    if [ -z "$left" ]; then tap_ok "after q, y: ddptop, its agent and the rank are gone"
    else tap_fail "after q, y: no process left" "left:$left"; fi
else
    tap_fail "q, y: ddptop exits" "$SCREEN"
fi

tap_done
