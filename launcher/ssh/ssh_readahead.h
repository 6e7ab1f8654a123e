/* Larger reads of an SSH session's socket than libssh makes. libssh 0.10 reads its socket 4 KiB
 * at a time, one poll() and one recv() per 4 KiB, and every such read of a loopback or LAN socket
 * also sends a window update back: in a flood of rank output that was a quarter of the
 * controller's main loop (docs/performance.md, "Issue 22: the log path"). This file defines
 * recv() and poll() for the ddptop binary (libssh calls them through its PLT, so the
 * executable's definitions are the ones it gets; nm -D libssh.so shows `U recv`, `U poll`):
 * for a socket registered here, recv() reads up to SSH_READAHEAD_SIZE bytes from the kernel
 * at once and hands them out in the pieces libssh asks for; poll() reports such a socket
 * readable while bytes wait here (with a zero timeout, and without the system call when
 * every polled fd has bytes waiting and asks only to read). Every other fd goes to the kernel
 * as before. A recv with flags is served as the kernel would serve it from these bytes
 * (MSG_PEEK looks without taking, MSG_WAITALL takes them and waits for the rest, MSG_TRUNC
 * drops them, MSG_DONTWAIT takes them); MSG_OOB and MSG_ERRQUEUE, which are not the stream, and
 * any flags while nothing waits here, go to the kernel. Bytes are handed out in order, none is
 * added or lost; what waits here is at most SSH_READAHEAD_SIZE per socket.
 *
 * A registration belongs to one session: an fd number outlives its socket, so each add gets a
 * key of its own (never reused), a later add on the same number starts empty (the bytes of a
 * socket that was closed without its del are never handed to the new one), and a del or a
 * pending with another session's key does nothing. */
#ifndef DDPTOP_SSH_READAHEAD_H
#define DDPTOP_SSH_READAHEAD_H

#include <stddef.h>
#include <stdint.h>

#define SSH_READAHEAD_SIZE (64 * 1024)

/* One session's registration of its socket: fd -1 when not read ahead. */
struct ssh_readahead_ref {
    int fd;
    uint64_t key;
};

#define SSH_READAHEAD_NONE ((struct ssh_readahead_ref){.fd = -1, .key = 0})

/* Starts reading fd ahead for one session (on the loop's thread, once no other thread uses the
 * session), dropping whatever an earlier registration of that number left. The returned ref
 * names this registration; its fd is -1 when fd is out of the table's range (then it is read
 * as before). */
struct ssh_readahead_ref ssh_readahead_add(int fd);
/* Stops it and drops what waits (the session is being torn down): before fd can be closed and
 * its number reused, or right after its closing on the thread that closed it. Only the
 * registration ref names is removed (a newer session's on the same number is left alone);
 * ref becomes SSH_READAHEAD_NONE. */
void ssh_readahead_del(struct ssh_readahead_ref *ref);
/* Bytes read ahead for ref's registration and not handed out yet (0 once it is gone). */
size_t ssh_readahead_pending(struct ssh_readahead_ref ref);

#endif
