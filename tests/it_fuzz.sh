#!/usr/bin/env bash
# The fuzz targets (tests/fuzz/fuzz_*.c: agent requests, the controller's reading of agent
# messages, the srun relay, events.jsonl and gpu.jsonl, rank output lines, NCCL lines, hostfiles, themes),
# each for a bounded time under ASan and UBSan (DDPTOP_FUZZ_SECONDS, 8 s by default), from
# their seed corpora in tests/fuzz/corpus/: one ok/not ok per target, a failure naming the
# input that reproduces it (build/fuzz/crashes/). Built here with clang (`make fuzz-programs`,
# apart from the gcc build). `make fuzz` runs them for longer.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
if ! make --no-print-directory -s BUILD="$BUILD" fuzz-programs >"$BUILD/fuzz-build.log" 2>&1; then
    echo "not ok 1 - the fuzz targets build (make fuzz-programs; needs clang and libclang-rt-14-dev: make deps)"
    sed 's/^/#   /' "$BUILD/fuzz-build.log" | tail -20
    echo "1..1"
    exit 1
fi
work=$(mktemp -d /tmp/it_fuzz.XXXXXX)
trap 'rm -rf "$work"' EXIT
BUILD=$BUILD FUZZ_SECONDS=${DDPTOP_FUZZ_SECONDS:-8} FUZZ_CORPUS=$work tests/fuzz/run.sh
