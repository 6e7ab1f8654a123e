# TAP-style helpers for the shell tests, the same lines as tests/tap.h prints.
# Source it; call tap_ok / tap_fail / tap_skip / tap_check; end with tap_done.
TAP_N=0
TAP_FAILED=0
tap_ok()   { TAP_N=$((TAP_N + 1)); echo "ok $TAP_N - $1"; }
tap_fail() { TAP_N=$((TAP_N + 1)); TAP_FAILED=$((TAP_FAILED + 1)); echo "not ok $TAP_N - $1"; shift
             for l in "$@"; do printf '%s\n' "$l" | sed 's/^/#   /'; done; }
tap_skip() { TAP_N=$((TAP_N + 1)); echo "ok $TAP_N - $1 # SKIP $2"; }
# tap_check NAME CMD...: ok when CMD succeeds.
tap_check() { local name=$1; shift; if "$@"; then tap_ok "$name"; else tap_fail "$name" "failed: $*"; fi; }
tap_done() { echo "1..$TAP_N"; [ "$TAP_FAILED" -eq 0 ]; }
