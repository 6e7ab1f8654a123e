#!/usr/bin/env bash
# Packs what a lent GPU machine needs for the GPU checks into .gpukit/ (in .gitignore): the
# programs built here (nvcc, sm_90) and the shared libraries they need that the machine's image
# lacks (OpenBLAS and its Fortran runtime, libcjson, libssh, ncurses; not CUDA's, not glibc's).
# The machine has CUDA 13 and NCCL but none of the Debian -dev packages and no network, so it
# cannot build ddptop itself. Then, with the device tool (docs/gpu.md, "On a lent GPU"):
#   run(command="bash tests/device/run.sh", carry=[".gpukit"])
set -eu
cd "$(dirname "$0")/../.."
make -s all bench-programs >/dev/null
K=.gpukit
rm -rf "$K"
mkdir -p "$K/build/tests" "$K/build/bench" "$K/build/fakecuda" "$K/lib"
progs=(ddptop-train ddptop-agent-x86_64 tests/test_gpu_ops tests/test_gpu_ops_fake tests/test_gpu_fakecuda bench/bench_gpu
       fakecuda/ddptop-train fakecuda/bench_gpu)
for p in "${progs[@]}"; do
    [ -x "build/$p" ] || { echo "pack: build/$p missing (is CUDA under CUDA_HOME?)" >&2; exit 1; }
    cp "build/$p" "$K/build/$p"
done
for p in "${progs[@]}"; do ldd "build/$p"; done | awk '/=> \//{print $3}' | sort -u |
    grep -vE '/(libc|libm|libpthread|libdl|librt|libstdc\+\+|libgcc_s)\.so|/usr/local/cuda|ld-linux' |
    while read -r lib; do cp -L "$lib" "$K/lib/"; done
echo "pack: $(du -sh "$K" | cut -f1) in $K: $(ls "$K/lib" | tr '\n' ' ')"
