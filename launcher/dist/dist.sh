#!/usr/bin/env bash
# Packs `make dist`'s tarball (the Makefile builds what goes in; docs/install.md says how it is
# used):
#
#   dist.sh ARCH VERSION DIST_DIR SYSROOT BUILD OUT
#
# ddptop-VERSION-linux-ARCH/ is laid out as `make install` lays out PREFIX, so ddptop finds its
# agents, trainer and themes where it always looks (../libexec/ddptop, ../share/ddptop):
#
#   bin/ddptop                          RPATH $ORIGIN/../lib/ddptop
#   libexec/ddptop/ddptop-agent[-ARCH]  every architecture's agent (one file each)
#   libexec/ddptop/ddptop-train         the CPU build, OpenBLAS linked in
#   lib/ddptop/                         the shared libraries ddptop needs beyond glibc (libssh,
#                                       OpenSSL's libcrypto, Kerberos, zlib), from the sysroot
#   share/ddptop/themes, share/ddptop/terminfo, share/man/man1, share/bash-completion
#
# The libraries carried are found by following DT_NEEDED from ddptop through the sysroot, so a
# library libssh starts to need is carried without a list here going stale. Everything is
# made under a temporary name and renamed when complete.
set -euo pipefail

arch=$1 version=$2 dist=$3 sysroot=$4 build=$5 out=$6
name=ddptop-$version-linux-$arch
die() { echo "dist.sh: $*" >&2; exit 1; }

# glibc's own libraries: the node has them (the point of a 2.28 floor), never carried
is_glibc() {
    case $1 in
    libc.so.*|libm.so.*|libdl.so.*|libpthread.so.*|librt.so.*|libresolv.so.*|libutil.so.*|libanl.so.*|ld-linux*) return 0 ;;
    esac
    return 1
}
needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }
find_lib() {
    local d
    for d in "$sysroot/usr/lib/$arch-linux-gnu" "$sysroot/lib/$arch-linux-gnu"; do
        [ -e "$d/$1" ] && { echo "$d/$1"; return 0; }
    done
    return 1
}

tmp=$(mktemp -d "$dist/.$name.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
root=$tmp/$name
mkdir -p "$root/bin" "$root/libexec/ddptop" "$root/lib/ddptop" "$root/share/ddptop/themes" \
    "$root/share/ddptop/terminfo" "$root/share/man/man1" "$root/share/bash-completion/completions"

install -m 755 "$dist/$arch/ddptop" "$root/bin/ddptop"
install -m 755 "$dist/$arch/ddptop-train" "$root/libexec/ddptop/ddptop-train"
for a in "$build"/ddptop-agent-*; do
    [ -x "$a" ] || continue
    install -m 755 "$a" "$root/libexec/ddptop/"
done
[ -x "$root/libexec/ddptop/ddptop-agent-$arch" ] || die "no agent for $arch in $build"
# the unsuffixed one is the machine's own (local runs, srun, pbs_tmrsh): a link, not a copy
ln -s "ddptop-agent-$arch" "$root/libexec/ddptop/ddptop-agent"

# the libraries ddptop needs, and theirs, by DT_NEEDED
queue=$(needed "$root/bin/ddptop")
seen=" "
while [ -n "$queue" ]; do
    set -- $queue
    lib=$1; shift; queue="$*"
    case $seen in *" $lib "*) continue ;; esac
    seen="$seen$lib "
    is_glibc "$lib" && continue
    src=$(find_lib "$lib") || die "$lib (needed by ddptop) is not in the sysroot $sysroot"
    cp -L "$src" "$root/lib/ddptop/$lib"
    chmod 644 "$root/lib/ddptop/$lib"
    queue="$queue $(needed "$root/lib/ddptop/$lib")"
done

install -m 644 docs/ddptop.1 "$root/share/man/man1/ddptop.1"
install -m 644 tui/cmd/completion.bash "$root/share/bash-completion/completions/ddptop"
install -m 644 themes/*.theme "$root/share/ddptop/themes/"
# terminfo entries for machines that lack them (ddptop searches them after the system's):
# Debian's ncurses-base set, which this build machine has
for d in /lib/terminfo /usr/share/terminfo; do
    [ -d "$d" ] && cp -R "$d/." "$root/share/ddptop/terminfo/"
done
[ -e "$root/share/ddptop/terminfo/x/xterm-256color" ] || die "no terminfo entry for xterm-256color on this machine"
chmod -R u=rwX,go=rX "$root/share/ddptop/terminfo"

cat >"$root/README" <<EOF
ddptop $version for Linux on $arch (glibc 2.28 or newer; nothing else to install).

  bin/ddptop --version                 # from wherever this directory is
  export PATH="\$PWD/bin:\$PATH"        # or put bin/ on your PATH
  ddptop check hosts.txt               # the nodes need nothing: ddptop uploads its agent
  man -l share/man/man1/ddptop.1

Agents for the nodes (x86_64 and aarch64): libexec/ddptop/. ddptop-train here is the CPU
build; the GPU backend is built from source on a machine with CUDA (docs/gpu.md).
EOF

tar -C "$tmp" --owner=0 --group=0 --numeric-owner -czf "$tmp/out.tar.gz" "$name"
mv "$tmp/out.tar.gz" "$out"
