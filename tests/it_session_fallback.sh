#!/usr/bin/env bash
# it_session_fallback: with XDG_RUNTIME_DIR unset the session sockets go to /tmp/ddptop-UID,
# a name another user can take first. Here user nobody (uid 65534, through setpriv) makes
# /tmp/ddptop-UID before us; ddptop still runs in a session (`ddptop run --detach`) and
# attaches to it, through $HOME/.cache/ddptop/run-HOST (0700), and says which directory it
# used and why; the other user's directory is left as it was (docs/dashboard.md).
# The test runs in a mount namespace of its own with a fresh /tmp (a tmpfs), so that the
# /tmp/ddptop-UID of everything else on the machine is not touched. Every process is ended by id.
set -u
if [ -z "${DDPTOP_IN_NS:-}" ]; then
    exec unshare --mount --propagation private env DDPTOP_IN_NS=1 "$0" "$@"
fi
cd "$(dirname "$0")/.."
. tests/lib/tap.sh
. tests/lib/private_tmp.sh
private_tmp_mount 64m || { tap_fail "a private /tmp (tmpfs in a mount namespace)"; tap_done; exit 1; }

BUILD_DIR=${DDPTOP_BUILD:-$PWD/${BUILD:-build}}
DDPTOP=$BUILD_DIR/ddptop
SOCK=ddpf-$$
. tests/lib/tmux.sh
D=$(mktemp -d /tmp/it_session_fallback.XXXXXX) || exit 1
chmod 755 "$D"
test_pids() {
    local p
    for p in $(pgrep -f -- "$D" 2>/dev/null); do tree_of "$p"; echo "$p"; done | sort -u
}
cleanup() {
    tmux_cleanup
    local pids
    pids=$(test_pids)
    [ -n "$pids" ] && kill -KILL $pids 2>/dev/null
    rm -rf "$D"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

[ -x "$DDPTOP" ] || { tap_fail "$DDPTOP is built"; tap_done; exit 1; }
command -v tmux >/dev/null || { tap_fail "tmux is available"; tap_done; exit 1; }

cat >"$D/counter.sh" <<'EOF'
#!/bin/sh
i=0
while [ $i -lt 300 ]; do echo "tick $i"; i=$((i + 1)); sleep 0.2; done
EOF
chmod +x "$D/counter.sh"
mkdir -m 700 "$D/home"
TMPD=/tmp/ddptop-$(id -u)
# what a user of ours runs: no XDG_RUNTIME_DIR, its own HOME
U=(env -u XDG_RUNTIME_DIR HOME="$D/home" LANG=C.UTF-8 TERM=screen-256color)

# --- the other user takes the name first ------------------------------------------------------
setpriv --reuid=65534 --regid=65534 --clear-groups mkdir -m 755 "$TMPD"
if [ "$(stat -c %u "$TMPD")" = 65534 ]; then tap_ok "user nobody made $TMPD first"
else tap_fail "user nobody made $TMPD first" "$(ls -ld "$TMPD")"; fi

out=$(cd "$D" && "${U[@]}" "$DDPTOP" run --detach --log-dir "$D/logs" --run-id fb -- "$D/counter.sh" </dev/null 2>&1)
rc=$?
FB=$(ls -d "$D"/home/.cache/ddptop/run-* 2>/dev/null | head -1)
if [ $rc -eq 0 ] && [ -n "$FB" ] && [ -S "$FB/fb.sock" ] && [ "$(stat -c %a "$FB")" = 700 ] &&
   [ "$(stat -c %a "$D/home/.cache/ddptop")" = 700 ]; then
    tap_ok "run --detach runs, its socket in $FB (0700)"
else
    tap_fail "run --detach runs, its socket in the \$HOME fallback (rc $rc)" "$out" "$(ls -laR "$D/home" 2>&1)"
fi
if grep -qF "the session directory $TMPD belongs to uid 65534, not to you" <<<"$out" &&
   grep -qF "the session sockets are in $FB instead" <<<"$out"; then
    tap_ok "run says which directory it used and why"
else
    tap_fail "run says which directory it used and why" "$out"
fi
if [ -z "$(ls -A "$TMPD")" ] && [ "$(stat -c %u:%a "$TMPD")" = 65534:755 ]; then
    tap_ok "the other user's directory is left as it was (nothing of ours in it)"
else
    tap_fail "the other user's directory is left as it was" "$(ls -la "$TMPD")"
fi

# attach without a terminal: refused for that reason, after the note
out=$(cd "$D" && "${U[@]}" "$DDPTOP" attach fb --headless </dev/null 2>&1)
if grep -qF "ddptop attach: the session directory $TMPD belongs to uid 65534" <<<"$out" &&
   grep -qF "the session sockets are in $FB instead" <<<"$out" && grep -q 'runs in a session' <<<"$out"; then
    tap_ok "attach finds the session in the fallback and says so"
else
    tap_fail "attach finds the session in the fallback and says so" "$out"
fi

# attach on a terminal: the dashboard of the run, then q y stops it
T new-session -d -s a -x 120 -y 40 \
    "cd $D && env -u XDG_RUNTIME_DIR HOME=$D/home LANG=C.UTF-8 TERM=screen-256color $DDPTOP attach fb; echo ATTACH-EXIT=\$?; sleep 600"
if wait_screen a 'run fb' 15 && wait_screen a 'tick [0-9]+' 10; then
    tap_ok "attach shows the run's dashboard through the fallback"
else
    tap_fail "attach shows the run's dashboard through the fallback" "$SCREEN"
fi
T send-keys -t a q
sleep 0.5
T send-keys -t a y
if wait_screen a 'ATTACH-EXIT=' 20 && [ ! -e "$FB/fb.sock" ]; then
    tap_ok "q y stops the run; its socket is gone"
else
    tap_fail "q y stops the run; its socket is gone" "$SCREEN" "$(ls -la "$FB" 2>&1)"
fi

# the fallback stays in use while it is there, even once the other user's directory is gone
rmdir "$TMPD"
out=$(cd "$D" && "${U[@]}" "$DDPTOP" run --detach --log-dir "$D/logs" --run-id fb2 -- "$D/counter.sh" </dev/null 2>&1)
if [ -S "$FB/fb2.sock" ] && [ ! -e "$TMPD" ] && grep -qF "the session sockets are in $FB (made when $TMPD was not yours" <<<"$out"; then
    tap_ok "a later run uses the same fallback (every ddptop agrees) and says why"
else
    tap_fail "a later run uses the same fallback" "$out" "$(ls -la "$FB" "$TMPD" 2>&1)"
fi
out=$(cd "$D" && "${U[@]}" "$DDPTOP" attach fb2 --headless </dev/null 2>&1)
if grep -q 'runs in a session' <<<"$out"; then tap_ok "attach finds that run too"
else tap_fail "attach finds that run too" "$out"; fi

tap_done
