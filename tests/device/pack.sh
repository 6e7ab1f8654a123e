#!/usr/bin/env bash
# Packs what a lent GPU machine needs to check all of ddptop into .gpukit/ (in .gitignore): the
# programs built here (nvcc, sm_90): ddptop, its agents (ddptop-agent beside it, as a local run
# starts it, and the portable ddptop-agent-x86_64; launcher/ssh/agent_kit.h), ddptop-train, the
# GPU tests and benchmark, the test doubles the GPU tests use (tests/fakecuda's builds and
# tests/fakenvml's libnvidia-ml.so.1), and tmux with the terminfo entries the dashboard check
# needs (the machine's image may have no tmux). Beside them, in lib/, every shared library
# they need but glibc's, libstdc++'s and CUDA's (OpenBLAS and its Fortran runtime, libcjson,
# libssh and what it needs, ncurses, libevent), as lib.tar.xz: tests/device/run.sh unpacks them
# and uses only those the machine lacks. MANIFEST lists what was packed. The machine has CUDA 13 and NCCL but none of
# the Debian -dev packages and no network, so it cannot build ddptop itself. Then, with the
# device tool (docs/gpu.md, "On a lent GPU"):
#   run(command="bash tests/device/run.sh", carry=[".gpukit"], timeout_s=420)
# Env: GPUKIT (the directory, default .gpukit), PACK_BUILD=0 packs the build as it is (no make),
# PACK_CUDA=0 packs a build without CUDA (the dry run of tests/it_device_kit.sh: the GPU
# programs are left out and named), PACK_COMPRESS (below).
set -eu
cd "$(dirname "$0")/../.."
B=${BUILD:-build}
K=${GPUKIT:-.gpukit}
case $K in ""|/|.|..) echo "pack: GPUKIT='$K' is not a kit directory" >&2; exit 2 ;; esac
[ "${PACK_BUILD:-1}" = 0 ] || make -s BUILD="$B" all bench-programs >/dev/null
rm -rf "$K"
mkdir -p -m 700 "$K"
mkdir -p "$K/build/tests" "$K/build/bench" "$K/build/fakecuda" "$K/build/fakenvml" "$K/lib" "$K/bin"
# what every check needs
progs=(ddptop ddptop-agent ddptop-agent-x86_64 ddptop-train fakenvml/libnvidia-ml.so.1)
# the GPU tests and benchmark (built only with CUDA)
cuda_progs=(tests/test_gpu_ops tests/test_gpu_ops_fake tests/test_gpu_lt tests/test_gpu_lt_fake
            tests/test_gpu_fakecuda bench/bench_gpu
            fakecuda/ddptop-train fakecuda/bench_gpu)
left_out=()
for p in "${progs[@]}"; do
    [ -e "$B/$p" ] || { echo "pack: $B/$p missing (make all)" >&2; exit 1; }
done
for p in "${cuda_progs[@]}"; do
    if [ -x "$B/$p" ]; then progs+=("$p")
    elif [ "${PACK_CUDA:-1}" = 0 ]; then left_out+=("$p")
    else echo "pack: $B/$p missing (is CUDA under CUDA_HOME? PACK_CUDA=0 packs without)" >&2; exit 1
    fi
done
# without their debug sections (a quarter of the size; the symbols stay): the carried tree has
# 64 MiB in all
for p in "${progs[@]}"; do strip --strip-debug -o "$K/build/$p" "$B/$p" 2>/dev/null || cp "$B/$p" "$K/build/$p"; done
bins=("${progs[@]/#/$B/}")
tmux_bin=$(command -v tmux || true)
if [ -n "$tmux_bin" ]; then
    cp -L "$tmux_bin" "$K/bin/tmux"
    bins+=("$tmux_bin")
    # the entries a dashboard under tmux looks up (TERM inside tmux, and the client's)
    for t in tmux-256color screen-256color screen xterm-256color xterm; do
        f=$(find /usr/share/terminfo /lib/terminfo /etc/terminfo -name "$t" 2>/dev/null | head -1)
        [ -n "$f" ] || continue
        mkdir -p "$K/terminfo/${t:0:1}"
        cp -L "$f" "$K/terminfo/${t:0:1}/$t"
    done
fi
# not glibc's (the machine's own is newer), not libstdc++'s or libgcc's, not CUDA's
system_lib='/(libc|libm|libpthread|libdl|librt|libresolv|libutil|libstdc\+\+|libgcc_s)\.so|/usr/local/cuda|ld-linux|/libcuda\.so|/libnvidia-ml\.so'
for p in "${bins[@]}"; do ldd "$p" 2>/dev/null; done | awk '/=> \//{print $3}' | sort -u |
    grep -vE "$system_lib" | while read -r lib; do cp -L "$lib" "$K/lib/"; done
{
    echo "# ddptop GPU kit, packed $(date -u '+%Y-%m-%d %H:%M UTC') on $(uname -n) from $B"
    for p in "${progs[@]}"; do echo "prog build/$p"; done
    [ -n "$tmux_bin" ] && echo "prog bin/tmux"
    for l in "$K"/lib/*; do [ -e "$l" ] && echo "lib lib/${l##*/}"; done
    for p in "${left_out[@]}"; do echo "left_out build/$p (no CUDA in this build)"; done
} >"$K/MANIFEST"
# lib/ travels as lib.tar.xz (OpenBLAS alone is 35 MB, 8 MB so); run.sh unpacks it there.
# PACK_COMPRESS=0 keeps lib/ as it is, =fast compresses less in 3 s instead of 15 (the dry run).
if [ "${PACK_COMPRESS:-1}" != 0 ]; then
    tar -C "$K" -cf - lib | xz -T0 "$([ "${PACK_COMPRESS:-1}" = fast ] && echo -0 || echo -6)" >"$K/lib.tar.xz"
    rm -rf "$K/lib"
fi
chmod -R go-rwx "$K"
echo "pack: $(du -sh "$K" | cut -f1) in $K: ${#progs[@]} programs$([ -n "$tmux_bin" ] && echo ", tmux"), $(grep -c '^lib ' "$K/MANIFEST") libraries$([ ${#left_out[@]} -gt 0 ] && echo "; left out (no CUDA): ${left_out[*]}")"
