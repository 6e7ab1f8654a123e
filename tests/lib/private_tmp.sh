# private_tmp_mount SIZE [DIR...]: a fresh tmpfs on /tmp (and on each DIR given, e.g. /dev/shm)
# in the current mount namespace, which must be private (unshare --mount --propagation
# private). The checkout stays visible at its own path when it lives under /tmp (CI may clone
# there): it is bind-mounted aside first and back into the new /tmp after. Returns non-zero
# when a mount fails.
private_tmp_mount() {
    local size=$1 repo keep="" d
    shift
    repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
    case $repo/ in
    /tmp/*)
        keep=$(mktemp -d /var/tmp/ddptop-keep.XXXXXX) || return 1
        mount --bind "$repo" "$keep" || return 1
        ;;
    esac
    mount -t tmpfs -o "size=$size,mode=1777" tmpfs /tmp || return 1
    for d in "$@"; do mount -t tmpfs -o "size=$size,mode=1777" tmpfs "$d" || return 1; done
    if [ -n "$keep" ]; then
        (umask 022 && mkdir -p "$repo") && mount --bind "$keep" "$repo" || return 1
        umount "$keep" && rmdir "$keep"
    fi
    return 0
}
