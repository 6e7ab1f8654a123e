/* Larger reads of an SSH session's socket than libssh makes. libssh 0.10 reads its socket 4 KiB
 * at a time, one poll() and one recv() per 4 KiB, and every such read of a loopback or LAN socket
 * also sends a window update back: in a flood of rank output that was a quarter of the
 * controller's main loop (docs/performance.md, "Issue 22: the log path"). This file defines
 * recv() and poll() for the ddptop binary (libssh calls them through its PLT, so the
 * executable's definitions are the ones it gets; nm -D libssh.so shows `U recv`, `U poll`):
 * for a socket registered here, recv() reads up to SSH_READAHEAD_SIZE bytes from the kernel
 * at once and hands them out in the pieces libssh asks for; poll() reports such a socket
 * readable while bytes wait here (with a zero timeout, and without the system call when
 * every polled fd has bytes waiting and asks only to read). Every other fd, and every call
 * with flags, goes to the kernel as before. Bytes are handed out in order, none is added or
 * lost; what waits here is at most SSH_READAHEAD_SIZE per socket. */
#ifndef DDPTOP_SSH_READAHEAD_H
#define DDPTOP_SSH_READAHEAD_H

#include <stddef.h>

#define SSH_READAHEAD_SIZE (64 * 1024)

/* Starts reading fd ahead (a session's socket, on the loop's thread, once no other thread
 * uses the session). Returns fd, or -1 when fd is out of the table's range (then it is read
 * as before). */
int ssh_readahead_add(int fd);
/* Stops it and drops what waits (the session is being torn down): before fd can be closed
 * and its number reused, or right after its closing on the thread that closed it. */
void ssh_readahead_del(int fd);
/* Bytes read ahead on fd and not handed out yet (tests). */
size_t ssh_readahead_pending(int fd);

#endif
