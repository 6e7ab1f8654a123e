/* The controller <-> ddptop-agent protocol: one JSON object per line, both ways, over the SSH
 * exec channel's stdin/stdout (or a local child's pipes). Every message is documented in
 * docs/protocol.md; bump PROTOCOL_VERSION when a message changes incompatibly. A field once
 * shipped is never renamed. */
#ifndef DDPTOP_PROTOCOL_H
#define DDPTOP_PROTOCOL_H

#define PROTOCOL_VERSION 1

/* The agent's remote file name: one per version and machine architecture, so nodes sharing a
 * home directory reuse the same copy and versions never overwrite each other. */
#define AGENT_REMOTE_DIR "~/.cache/ddptop"
#define AGENT_REMOTE_NAME_FMT "ddptop-agent-%s-p%d-%s" /* version, PROTOCOL_VERSION, arch */

/* The shared library the agent needs beyond libc, uploaded beside it (the agent finds it
 * through RUNPATH $ORIGIN), so a node needs nothing installed. */
#define AGENT_BUNDLED_LIB "libcjson.so.1"

/* How many unread bytes of agent output the controller holds per node before it stops reading
 * that node: the agent then stops reading its ranks' pipes, and the ranks wait on their writes.
 * Nothing is lost, and the controller's memory stays bounded whatever the ranks print. */
#define PROTOCOL_BACKLOG_MAX (4u << 20)

/* Longest line either side accepts; longer ones are a protocol error. */
#define PROTOCOL_MAX_LINE (1024 * 1024)

#endif
