#!/usr/bin/env bash
# Runs the libFuzzer targets (build/fuzz/fuzz_*, `make fuzz-programs`) for FUZZ_SECONDS each,
# one after the other, and says in TAP how each went: "ok N - fuzz_NAME: ... exec/s, cov ..."
# or "not ok N - fuzz_NAME: what it found" with the input that reproduces it. Arguments: the
# targets' names (relay, agent_request, ...); none: all. docs/testing.md, "Fuzzing".
#
# Each target starts from its seeds (tests/fuzz/corpus/NAME, read only, and the regression
# inputs of bugs it found) and adds what it learns to FUZZ_CORPUS/NAME (`make fuzz`:
# build/fuzz/corpus, kept between runs; tests/it_fuzz.sh: a directory of its own, so that
# `make test` starts from the same seeds every time). Crashes are written to
# build/fuzz/crashes/NAME/.
set -u
cd "$(dirname "$0")/../.."
. tests/lib/tap.sh
BUILD=${BUILD:-build}
FUZZ_SECONDS=${FUZZ_SECONDS:-120}
FUZZ_CORPUS=${FUZZ_CORPUS:-$BUILD/fuzz/corpus}
bin_dir=$BUILD/fuzz

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    for f in tests/fuzz/fuzz_*.c; do
        t=${f#tests/fuzz/fuzz_}
        targets+=("${t%.c}")
    done
fi

# An input larger than any real one of its kind buys nothing but time.
max_len() {
    case $1 in
        agent_request|run_dir|ctl_agent) echo 16384 ;;
        *) echo 4096 ;;
    esac
}

for t in "${targets[@]}"; do
    bin=$bin_dir/fuzz_$t
    if [ ! -x "$bin" ]; then
        tap_fail "fuzz_$t: no $bin (make fuzz-programs builds it; clang and libclang-rt-14-dev: make deps)"
        continue
    fi
    work=$FUZZ_CORPUS/$t crashes=$BUILD/fuzz/crashes/$t log=$BUILD/fuzz/logs/$t.log
    mkdir -p "$work" "$crashes" "$(dirname "$log")"
    seeds=()
    [ -d "tests/fuzz/corpus/$t" ] && seeds+=("tests/fuzz/corpus/$t")
    before=$(ls "$crashes" | wc -l)
    # -timeout: one input taking 10 s is a hang; -malloc_limit_mb: no input of a few KiB may ask
    # for a GiB at once (the rss limit catches the slow way there)
    "$bin" -max_total_time="$FUZZ_SECONDS" -max_len="$(max_len "$t")" -timeout=10 \
        -rss_limit_mb=2560 -malloc_limit_mb=1024 -print_final_stats=1 \
        -artifact_prefix="$crashes/" "$work" "${seeds[@]}" >"$log" 2>&1 </dev/null
    rc=$?
    done_line=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -1)
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    cov=$(sed -nE 's/.* cov: ([0-9]+) ft: ([0-9]+) .*/\1 edges, \2 features/p' <<<"$done_line")
    eps=$(sed -nE 's/.* exec\/s: ([0-9]+).*/\1/p' <<<"$done_line")
    if [ "$rc" -eq 0 ] && [ -n "$done_line" ]; then
        tap_ok "fuzz_$t: ${runs:-?} inputs in ${FUZZ_SECONDS}s (${eps:-?} exec/s), ${cov:-coverage ?}"
        continue
    fi
    what=$(grep -m1 -E 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:|invariant failed' "$log")
    crash=$(sed -n "s|.*Test unit written to \(.*\)|\1|p" "$log" | tail -1)
    [ -n "$crash" ] || [ "$(ls "$crashes" | wc -l)" -eq "$before" ] || crash=$crashes/$(ls -t "$crashes" | head -1)
    tap_fail "fuzz_$t: ${what:-exited with status $rc}" \
        "reproduce: $bin ${crash:-(no input saved)}" "log: $log" \
        "$(grep -m12 -E '^ *#[0-9]+ 0x|SUMMARY' "$log")"
done
tap_done
