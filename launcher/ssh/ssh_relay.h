/* The TCP socket of an SSH session read 64 KiB at a time, under libssh, without touching
 * libssh: libssh 0.10 reads its socket 4 KiB per recv(), each after a poll(), and every such
 * read of a TCP socket can send a window update back (issue 22: a quarter of the controller's
 * loop in a flood of rank output; issue 32: no libc function redefined to change that). So
 * libssh is handed one end of a socket pair (SSH_OPTIONS_FD, its only supported way to take a
 * connection it did not make) and this relay moves the bytes between the other end and the
 * TCP socket ddptop connected: down (node to libssh) up to SSH_RELAY_SIZE a read, up (libssh
 * to node) as libssh writes. Nothing is added, dropped or reordered; a direction that cannot
 * move stops reading its source (a full socket pair stops the TCP reads, so the SSH window
 * still holds the agent back). The TCP socket's end of file or error reaches libssh as the
 * end of file of its end, after every byte before it; ssh_relay_error keeps the error's
 * words for the messages.
 *
 * One relay is the loop thread's only: libssh's end may be used by another thread meanwhile
 * (the SFTP upload), which is what the pair is for. */
#ifndef DDPTOP_SSH_RELAY_H
#define DDPTOP_SSH_RELAY_H

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>

#define SSH_RELAY_SIZE (64 * 1024)
/* The fds a relay polls (ssh_relay_pollfds). */
#define SSH_RELAY_POLLFDS 2

struct ssh_relay;

/* Takes net, a connected non-blocking stream socket (closed by ssh_relay_free), and makes the
 * pair: *lib is libssh's end (SSH_OPTIONS_FD; libssh closes it). NULL with errno set when the
 * pair cannot be made (net is then still the caller's). */
struct ssh_relay *ssh_relay_new(int net, int *lib);
/* Fills p with what to poll (SSH_RELAY_POLLFDS entries, events 0 where nothing can move);
 * returns how many. */
int ssh_relay_pollfds(const struct ssh_relay *r, struct pollfd *p);
/* Moves what can move now, both ways, without blocking. revents: the poll's answer for any
 * fd of the caller (0 on a timer tick): reads are tried only when it says something may be
 * readable, so an idle pass costs no system call; writes whenever bytes wait. */
void ssh_relay_pump(struct ssh_relay *r, short revents);
/* Takes at once what libssh wrote since (a request, a window update), without waiting for
 * the next poll to say so. */
void ssh_relay_flush_up(struct ssh_relay *r);
/* 0, or the errno that ended the TCP socket (a reset, a timeout). */
int ssh_relay_error(const struct ssh_relay *r);
/* Closes its fds and frees it. What libssh wrote last (its end closed already: a disconnect,
 * an exit request) goes to the TCP socket first, as far as its send buffer takes it now. */
void ssh_relay_free(struct ssh_relay *r);

#endif
