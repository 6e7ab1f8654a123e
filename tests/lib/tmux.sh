# The dashboard on a real terminal: a private tmux server (-L SOCK) the test drives with
# send-keys and reads back with capture-pane. Source it after setting SOCK; the test's own EXIT
# trap calls tmux_cleanup, which ends the server and every process under it by id (never by
# name), even on failure.
T() { tmux -L "$SOCK" "$@"; }

# tree_of PID: the process's descendants, children before their parents' ids are printed.
tree_of() {
    local c
    for c in $(pgrep -P "$1" 2>/dev/null); do tree_of "$c"; echo "$c"; done
}

tmux_cleanup() {
    local srv pids
    srv=$(T display -p '#{pid}' 2>/dev/null)
    if [ -n "$srv" ]; then
        pids=$(tree_of "$srv")
        T kill-server 2>/dev/null
        [ -n "$pids" ] && kill -KILL $pids 2>/dev/null
    fi
    rm -f "${TMUX_TMPDIR:-/tmp}/tmux-$(id -u)/$SOCK"
}

# wait_screen SESSION REGEX SECONDS: polls the screen into $SCREEN until REGEX matches it
# (0) or the time is up (1).
SCREEN=""
wait_screen() {
    local s=$1 re=$2 limit=$3 end
    end=$((SECONDS + limit))
    while :; do
        SCREEN=$(T capture-pane -p -t "$s" 2>/dev/null)
        grep -Eq -- "$re" <<<"$SCREEN" && return 0
        [ $SECONDS -ge $end ] && return 1
        sleep 0.2
    done
}
