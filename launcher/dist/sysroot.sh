#!/usr/bin/env bash
# Makes a Debian 11 (bullseye, glibc 2.31) sysroot for one architecture, to build what runs on
# nodes that are not this machine: the agents (glibc 2.28 at most, checked by
# tests/it_agent_glibc.sh) and `make dist` (launcher/dist/README.md says why this way).
#
#   sysroot.sh CACHE ARCH     ARCH: amd64 | arm64; prints the sysroot's path
#   sysroot.sh CACHE cjson    the cJSON sources (Debian's, with Debian's patches); prints the path
#
# CACHE is a private directory of ours (made 0700; refused when it is a link or another user's):
# its own apt state (Debian's archive keys verify every index and package, as apt does), the
# .debs, and the unpacked trees, each made under a temporary name and renamed when complete,
# so an interrupted run leaves nothing half made. A tree whose stamp names this script's
# package list is reused: nothing is fetched again.
set -euo pipefail

cache=$1 what=$2
mirror=${DDPTOP_DEBIAN_MIRROR:-http://deb.debian.org}
keyring=/usr/share/keyrings/debian-archive-keyring.gpg

# What a sysroot holds: the C library and kernel headers (the agents), and what `make dist`
# links or carries (libssh and its libraries, ncurses, OpenBLAS). Changing this list changes
# the stamp, and the trees are made again.
pkgs_common="libc6 libc6-dev linux-libc-dev libgcc-s1
  libssh-4 libssh-dev libssl1.1 libssl-dev zlib1g zlib1g-dev
  libgssapi-krb5-2 libkrb5-3 libk5crypto3 libkrb5support0 libcom-err2 libkeyutils1
  libncurses-dev libncursesw6 libtinfo6 libcjson-dev libcjson1
  libopenblas0-pthread libopenblas-pthread-dev libopenblas-dev libgfortran5"
pkgs_amd64="libquadmath0"
pkgs_arm64=""
stamp_text="bullseye 1 $pkgs_common | $pkgs_amd64 | $pkgs_arm64"

die() { echo "sysroot.sh: $*" >&2; exit 1; }

mkdir -p -m 700 "$cache" 2>/dev/null || true
[ -d "$cache" ] && [ ! -L "$cache" ] && [ -O "$cache" ] ||
    die "$cache is not a directory of ours (a link, or another user's): set SYSROOT_CACHE to one"
case "$(stat -c %a "$cache")" in 700) ;; *) chmod 700 "$cache" ;; esac
[ -r "$keyring" ] || die "$keyring is missing: apt-get install debian-archive-keyring"
# one at a time (make -j builds both architectures at once; clones share the cache)
exec 9>"$cache/.lock"
flock 9

# apt with a state of its own: nothing of this machine's apt is read or changed, no root needed.
apt_root=$cache/apt
aptopt=(-o "Dir=$apt_root" -o "Dir::State::status=$apt_root/status" -o Debug::NoLocking=1
        -o APT::Architecture=amd64 -o APT::Architectures::=amd64 -o APT::Architectures::=arm64
        -o Acquire::Languages=none -o APT::Get::AllowUnauthenticated=false -o quiet=2
        -o APT::Sandbox::User="$(id -un)")
apt_update() {
    local fresh=$apt_root/.updated
    [ -f "$fresh" ] && [ -n "$(find "$fresh" -mmin -1440 2>/dev/null)" ] && return 0
    mkdir -p "$apt_root/etc/apt/apt.conf.d" "$apt_root/etc/apt/preferences.d" \
        "$apt_root/etc/apt/sources.list.d" "$apt_root/var/lib/apt/lists/partial" \
        "$apt_root/var/cache/apt/archives/partial"
    : >"$apt_root/status"
    # The security archive's arm64 packages are not served by every mirror (not by the one these
    # machines reach): arm64 comes from the point release alone; its sysroot only links.
    cat >"$apt_root/etc/apt/sources.list" <<EOF
deb [arch=amd64,arm64 signed-by=$keyring] $mirror/debian bullseye main
deb [arch=amd64 signed-by=$keyring] $mirror/debian-security bullseye-security main
deb-src [signed-by=$keyring] $mirror/debian bullseye main
EOF
    apt-get "${aptopt[@]}" update >"$apt_root/update.log" 2>&1 ||
        die "apt-get update of Debian 11's indexes failed ($apt_root/update.log): is $mirror reachable?"
    touch "$fresh"
}

fresh_tree() { # DIR: true when DIR holds a complete tree of this stamp
    [ -f "$1/.ddptop-sysroot" ] && [ "$(cat "$1/.ddptop-sysroot")" = "$stamp_text" ]
}

# Absolute links inside the tree (libm.so -> /lib/x86_64-linux-gnu/libm.so.6) would reach this
# machine's newer libraries: each becomes relative, inside the tree.
relink() {
    local root=$1 l t rel
    while IFS= read -r -d '' l; do
        t=$(readlink "$l")
        case $t in /*) ;; *) continue ;; esac
        rel=$(realpath -m --relative-to="$(dirname "$l")" "$root$t")
        ln -sfn "$rel" "$l"
    done < <(find "$root" -type l -print0)
}

make_sysroot() {
    local arch=$1 out=$cache/bullseye-$1 tmp extra
    fresh_tree "$out" && { echo "$out"; return 0; }
    apt_update
    case $arch in amd64) extra=$pkgs_amd64 ;; arm64) extra=$pkgs_arm64 ;; *) die "unknown arch $arch" ;; esac
    tmp=$(mktemp -d "$cache/.bullseye-$arch.XXXXXX")
    mkdir -p "$tmp/debs"
    local list=()
    for p in $pkgs_common $extra; do list+=("$p:$arch"); done
    # All at once; a package the mirror does not serve in its newest version (security
    # updates go missing on some mirrors) is taken in the next version it lists.
    (cd "$tmp/debs" && apt-get "${aptopt[@]}" download "${list[@]}") >"$tmp/download.log" 2>&1 || true
    for p in "${list[@]}"; do
        ls "$tmp/debs/${p%:*}_"*"_$arch.deb" >/dev/null 2>&1 && continue
        local got=""
        for v in $(apt-cache "${aptopt[@]}" madison "$p" | awk -F'|' '{gsub(/ /,"",$2); print $2}'); do
            (cd "$tmp/debs" && apt-get "${aptopt[@]}" download "$p=$v") >>"$tmp/download.log" 2>&1 && { got=$v; break; }
        done
        [ -n "$got" ] || { cat "$tmp/download.log" >&2; rm -rf "$tmp"; die "cannot download $p from Debian 11's archive"; }
    done
    mkdir -p "$tmp/root"
    for d in "$tmp"/debs/*.deb; do dpkg-deb -x "$d" "$tmp/root"; done
    relink "$tmp/root"
    # bullseye's usr is not merged: both lib dirs are searched through the sysroot anyway
    echo "$stamp_text" >"$tmp/root/.ddptop-sysroot"
    rm -rf "$out"
    mv "$tmp/root" "$out"
    rm -rf "$tmp"
    echo "$out"
}

# cJSON's own sources, compiled into the agents and into the tarball's ddptop so that neither
# carries a libcjson.so (one file per agent, nothing else to upload). Debian's source package,
# its checksums from the signed Sources index, Debian's patches applied.
make_cjson() {
    local out=$cache/cjson tmp dir files f sum name
    fresh_tree "$out" && { echo "$out"; return 0; }
    apt_update
    tmp=$(mktemp -d "$cache/.cjson.XXXXXX")
    apt-cache "${aptopt[@]}" showsrc cjson >"$tmp/src" || { rm -rf "$tmp"; die "no cjson in Debian 11's Sources"; }
    # the first (newest) stanza: Directory and its files' SHA-256
    dir=$(awk '/^Directory:/{print $2; exit}' "$tmp/src")
    files=$(awk '/^Checksums-Sha256:/{on=1; next} on && /^ /{print $1, $3; next} on{exit}' "$tmp/src")
    [ -n "$dir" ] && [ -n "$files" ] || { rm -rf "$tmp"; die "cannot read cjson's entry in Debian 11's Sources"; }
    while read -r sum name; do
        case $name in *.dsc) continue ;; esac
        /usr/lib/apt/apt-helper "${aptopt[@]}" download-file "$mirror/debian/$dir/$name" "$tmp/$name" \
            "SHA256:$sum" >/dev/null 2>&1 || { rm -rf "$tmp"; die "downloading $name failed (or its SHA-256 differs)"; }
    done <<<"$files"
    mkdir -p "$tmp/src.d"
    tar -xzf "$tmp"/cjson_*.orig.tar.gz -C "$tmp/src.d" --strip-components=1
    f=$(ls "$tmp"/cjson_*.debian.tar.* 2>/dev/null | head -1)
    if [ -n "$f" ]; then
        tar -xf "$f" -C "$tmp/src.d"
        if [ -f "$tmp/src.d/debian/patches/series" ]; then
            while read -r p _; do
                case $p in ''|'#'*) continue ;; esac
                patch -s -p1 -d "$tmp/src.d" <"$tmp/src.d/debian/patches/$p" ||
                    { rm -rf "$tmp"; die "Debian's patch $p does not apply to cJSON"; }
            done <"$tmp/src.d/debian/patches/series"
        fi
    fi
    [ -f "$tmp/src.d/cJSON.c" ] || { rm -rf "$tmp"; die "no cJSON.c in cjson's sources"; }
    mkdir -p "$tmp/out/cjson"
    cp "$tmp/src.d/cJSON.c" "$tmp/src.d/cJSON.h" "$tmp/src.d/LICENSE" "$tmp/out/"
    cp "$tmp/src.d/cJSON.h" "$tmp/out/cjson/"
    echo "$stamp_text" >"$tmp/out/.ddptop-sysroot"
    rm -rf "$out"
    mv "$tmp/out" "$out"
    rm -rf "$tmp"
    echo "$out"
}

case $what in
    amd64|arm64) make_sysroot "$what" ;;
    cjson) make_cjson ;;
    *) die "usage: sysroot.sh CACHE amd64|arm64|cjson" ;;
esac
