"""A delay line for the network tests, where the kernel has no netem (CONFIG_NET_SCH_NETEM off,
as on the machines these tests run on): one end of a point-to-point link made of two tun
devices, one in each of two network namespaces, joined by this program's two running copies.

    ip netns exec NS python3 tests/lib/delayline.py TUN MY_SOCKET PEER_SOCKET DELAY_MS

attaches to the tun device TUN (made before with `ip tuntap add dev TUN mode tun`), sends every
packet the namespace writes into it to the other copy (a Unix datagram socket: paths are not
bound to a network namespace), and writes every packet the other copy sends into TUN once it
has waited DELAY_MS since it left the other side. Both copies together delay each direction by
DELAY_MS, so a round trip takes twice that. A full peer queue drops the packet, as a congested
link would. Standard library only; runs until killed."""
import fcntl
import heapq
import os
import select
import socket
import struct
import sys
import time

TUNSETIFF = 0x400454CA   # linux/if_tun.h
IFF_TUN, IFF_NO_PI = 0x0001, 0x1000


def main():
    name, mine, peer, delay = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]) / 1e3
    tun = os.open("/dev/net/tun", os.O_RDWR)
    fcntl.ioctl(tun, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TUN | IFF_NO_PI))
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(mine)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    queue, seq = [], 0
    while True:
        now = time.monotonic()
        while queue and queue[0][0] <= now:
            os.write(tun, heapq.heappop(queue)[2])
        timeout = max(0.0, queue[0][0] - now) if queue else None
        ready, _, _ = select.select([tun, sock], [], [], timeout)
        if tun in ready:
            pkt = os.read(tun, 65536)
            try:
                sock.sendto(struct.pack("d", time.monotonic() + delay) + pkt, socket.MSG_DONTWAIT, peer)
            except (BlockingIOError, FileNotFoundError, ConnectionRefusedError):
                pass   # the peer's queue is full, or it has not started: the packet is lost
        if sock in ready:
            data = sock.recv(70000)
            due = struct.unpack("d", data[:8])[0]
            seq += 1
            heapq.heappush(queue, (due, seq, data[8:]))


if __name__ == "__main__":
    main()
