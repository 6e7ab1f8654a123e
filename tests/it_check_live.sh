#!/usr/bin/env bash
# it_check_live: `ddptop check` on a terminal tall enough draws its table live and in place
# (tui/cmd/cmd_check.c draws the rows check_report.c makes): each line cleared before it is
# written, the cursor sent back up over the table (header + one line per host) to redraw it
# with the final verdicts, then the details. Two hosts that refuse the connection make the
# verdicts the same on every machine. Not a terminal: no escape sequence at all. A terminal
# shorter than the table: the live table is cut, then printed whole (issue 19).
set -u
cd "$(dirname "$0")/.."
. tests/lib/tap.sh

DDPTOP=${DDPTOP:-$PWD/${BUILD:-build}/ddptop}
T=$(mktemp -d /tmp/it_check_live.XXXXXX)
trap 'rm -rf "$T"' EXIT
printf '127.0.0.1:1\n127.0.0.2:1\n' >"$T/hosts"

script -qec "stty rows 40 cols 120; NO_COLOR=1 '$DDPTOP' check '$T/hosts' --timeout 5" /dev/null >"$T/tty.out" 2>&1
rc=$?
esc=$(printf '\033')
cr=$(printf '\r')
first=$(grep -c "^${cr}${esc}\[2KHOST  *ADDRESS  *SSH  *CLOCK" "$T/tty.out")
redraw=$(grep -c "${esc}\[3A${cr}${esc}\[2KHOST" "$T/tty.out")
if [ $rc -eq 1 ] && [ "$first" -ge 1 ] && [ "$redraw" -ge 1 ] &&
   grep -q "^${cr}${esc}\[2K127\.0\.0\.2  127\.0\.0\.2:1  fail   skip" "$T/tty.out" &&
   grep -q '127.0.0.1  ssh    fail  cannot connect to 127.0.0.1 port 1' "$T/tty.out" &&
   grep -q '2 hosts: 0 pass, 0 warn, 2 fail' "$T/tty.out"; then
    tap_ok "on a terminal the check table is drawn live, redrawn in place (3 lines up), then the details (exit 1)"
else
    tap_fail "on a terminal the check table is drawn live, redrawn in place (3 lines up), then the details" \
        "rc $rc, first draws $first, redraws $redraw" "$(cat -v "$T/tty.out" | head -20)"
fi

"$DDPTOP" check "$T/hosts" --timeout 5 >"$T/pipe.out" 2>&1
rc=$?
if [ $rc -eq 1 ] && ! grep -q "$esc" "$T/pipe.out" && grep -q '^127.0.0.2  127.0.0.2:1  fail   skip' "$T/pipe.out"; then
    tap_ok "into a pipe the table is printed once, without escape sequences"
else
    tap_fail "into a pipe the table is printed once, without escape sequences" "rc $rc" "$(cat -v "$T/pipe.out")"
fi

# A table taller than the terminal cannot be redrawn in place (the cursor cannot go back above
# the screen): it is cut with a note while the checks run, then erased and printed whole.
script -qec "stty rows 4 cols 120; NO_COLOR=1 '$DDPTOP' check '$T/hosts' --timeout 5" /dev/null >"$T/short.out" 2>&1
rc=$?
if [ $rc -eq 1 ] && grep -q '\.\.\. 2 more lines (the whole table follows' "$T/short.out" &&
   grep -q "${esc}\[2A${esc}\[J" "$T/short.out" &&
   grep -q "^127\.0\.0\.2  127\.0\.0\.2:1  fail   skip" "$T/short.out" &&
   grep -q '2 hosts: 0 pass, 0 warn, 2 fail' "$T/short.out"; then
    tap_ok "on a terminal too short for the table: cut with a note, then the whole table"
else
    tap_fail "on a terminal too short for the table: cut with a note, then the whole table" "rc $rc" \
        "$(cat -v "$T/short.out" | head -20)"
fi

tap_done
