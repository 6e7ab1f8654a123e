# Stopping a `perf record` that a bench started in the background (tests/bench/*.sh).
#
# perf ends on SIGINT and writes its data. A background job of a non-interactive script starts
# with SIGINT ignored, and perf installs its own handler only once it has set itself up (with -a
# on a busy machine, a second or more): a SIGINT sent before then is lost, and a `wait` for perf
# never returns. perf_stop sends SIGINT again until perf is gone (at most 30 s, then SIGKILL).

# perf_stop PID: stops that perf (a child of this shell) and reaps it.
perf_stop() {
    local i
    for ((i = 0; i < 60; i++)); do
        kill -INT "$1" 2>/dev/null || break
        [ "$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null)" = Z ] && break
        sleep 0.5
    done
    kill -KILL "$1" 2>/dev/null
    wait "$1" 2>/dev/null
}
