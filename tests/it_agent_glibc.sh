#!/usr/bin/env bash
# it_agent_glibc: every agent ddptop can upload runs on the nodes people have. Read with GNU
# readelf (not with ddptop's own ELF reader, which test_agent_kit checks against these files):
# each build/ddptop-agent-ARCH is built for ARCH, asks for no glibc symbol version above 2.28
# (RHEL 8), needs nothing but glibc's own libraries (cJSON is compiled in: nothing to upload
# beside it) and keeps a dynamic loader, so it can still dlopen the node's NVML and NCCL. Both
# architectures are there (x86_64 and aarch64), and the x86_64 one starts here. docs/check.md,
# "Which nodes"; launcher/dist/README.md says how they are built.
set -u
. "$(dirname "$0")/lib/tap.sh"

B=${DDPTOP_BUILD:-build}
MAX_MINOR=28   # glibc 2.28: RHEL/Rocky/Alma 8, the oldest glibc ddptop's agents support

# readelf's name for each architecture's machine
machine_of() { case $1 in x86_64) echo 'Advanced Micro Devices X86-64' ;; aarch64) echo 'AArch64' ;; esac; }

for arch in x86_64 aarch64; do
    a=$B/ddptop-agent-$arch
    if [ ! -x "$a" ]; then
        tap_fail "$arch: agent built ($a)" "missing: run make (make deps installs the cross compiler)"
        continue
    fi
    m=$(readelf -h "$a" 2>&1 | sed -n 's/^ *Machine: *//p')
    if [ "$m" = "$(machine_of "$arch")" ]; then tap_ok "$arch: the agent is an $arch ELF file"
    else tap_fail "$arch: the agent is an $arch ELF file" "readelf says: $m"; fi

    vers=$(readelf -V --wide "$a" 2>&1 | grep -o 'GLIBC_[0-9][0-9.]*' | sort -u)
    top=$(printf '%s\n' $vers | sed 's/GLIBC_//' | sort -t. -k1,1n -k2,2n -k3,3n | tail -1)
    over=$(printf '%s\n' $vers | sed 's/GLIBC_//' | awk -F. -v m="$MAX_MINOR" '$1 > 2 || ($1 == 2 && $2 > m)')
    if [ -n "$top" ] && [ -z "$over" ]; then
        tap_ok "$arch: the newest glibc symbol version it needs is $top (at most 2.$MAX_MINOR)"
    else
        tap_fail "$arch: glibc symbol versions at most 2.$MAX_MINOR" "over: $(echo $over)" \
            "symbols: $(readelf --dyn-syms --wide "$a" | grep -E "GLIBC_($(echo $over | tr ' ' '|'))" | head -5)"
    fi

    needed=$(readelf -d "$a" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort | tr '\n' ' ')
    extra=$(printf '%s\n' $needed | grep -vxE 'lib(c|m|dl|pthread|rt)\.so\.[0-9]+|ld-linux.*')
    interp=$(readelf -l "$a" | sed -n 's/.*Requesting program interpreter: \(.*\)\]/\1/p')
    if [ -z "$extra" ] && [ -n "$interp" ] && ! readelf -d "$a" | grep -q 'RUNPATH\|RPATH'; then
        tap_ok "$arch: needs only glibc ($needed), has a dynamic loader ($interp) to dlopen NVML and NCCL"
    else
        tap_fail "$arch: needs only glibc, dynamic" "needed: $needed" "interpreter: $interp" \
            "$(readelf -d "$a" | grep -E 'RUNPATH|RPATH')"
    fi
done

# The x86_64 agent runs here and says so (the aarch64 one runs on a node: it_nodes_other).
out=$("$B/ddptop-agent-x86_64" --version 2>&1)
if [ $? -eq 0 ] && [[ $out == ddptop-agent\ * ]]; then tap_ok "the x86_64 agent starts here: $out"
else tap_fail "the x86_64 agent starts here" "$out"; fi

# This machine's ddptop-agent (local runs, srun, pbs_tmrsh) is the portable one of its arch.
if cmp -s "$B/ddptop-agent" "$B/ddptop-agent-$(uname -m)"; then
    tap_ok "build/ddptop-agent is the portable agent of this machine's architecture"
else
    tap_fail "build/ddptop-agent is the portable agent of this machine's architecture"
fi

# The test agent linked against this machine's glibc (it_nodes_other's "too old a glibc" case)
# does ask for more: the check above would see an agent built the ordinary way.
hv=$(readelf -V --wide "$B/tests/ddptop-agent-hostlibc" 2>/dev/null | grep -o 'GLIBC_2\.[0-9]*' |
     sed 's/GLIBC_2\.//' | sort -n | tail -1)
if [ -n "$hv" ] && [ "$hv" -gt "$MAX_MINOR" ]; then
    tap_ok "an agent linked against this machine's glibc needs 2.$hv: the check can fail"
else
    tap_fail "an agent linked against this machine's glibc needs more than 2.$MAX_MINOR" "got 2.$hv"
fi
tap_done
