/* The controller <-> ddptop-agent protocol: one JSON object per line, both ways, over the SSH
 * exec channel's stdin/stdout (or a local child's pipes). Every message is documented in
 * docs/protocol.md; bump PROTOCOL_VERSION when a message changes incompatibly. A field once
 * shipped is never renamed. */
#ifndef DDPTOP_PROTOCOL_H
#define DDPTOP_PROTOCOL_H

#define PROTOCOL_VERSION 3

/* Every message name (docs/protocol.md). Requests carry "op"; answers and the agent's own
 * messages carry "ev" (an answer is named after its request, except spawn -> spawned,
 * stop -> stopped, ping -> pong, bench_listen -> bench_listening and bench_send -> bench_sent). */
#define WIRE_OP_FACTS     "facts"
#define WIRE_OP_CLOCK     "clock"
#define WIRE_OP_LISTEN    "listen"
#define WIRE_OP_CONNECT   "connect"
#define WIRE_OP_UNLISTEN  "unlisten"
#define WIRE_OP_SPAWN     "spawn"
#define WIRE_OP_SIGNAL    "signal"
#define WIRE_OP_STOP      "stop"
#define WIRE_OP_STACKS    "stacks"
#define WIRE_OP_LIST      "list"
#define WIRE_OP_READ      "read"
#define WIRE_OP_PING      "ping"
#define WIRE_OP_EXIT      "exit"
#define WIRE_OP_GPU_WATCH "gpu_watch"
#define WIRE_OP_RESUME    "resume"
#define WIRE_OP_ATTACH    "attach"    /* to a bridge (ddptop-agent --attach), its first line */
/* The measured preflight (check --bench): links and GPUs, docs/protocol.md "Measuring" */
#define WIRE_OP_BENCH_LISTEN   "bench_listen"
#define WIRE_OP_BENCH_UNLISTEN "bench_unlisten"
#define WIRE_OP_BENCH_SEND     "bench_send"
#define WIRE_OP_BENCH_HOST     "bench_host"
#define WIRE_OP_BENCH_NCCL     "bench_nccl"
#define WIRE_OP_BENCH_NCCL_STOP "bench_nccl_stop"
#define WIRE_OP_BENCH_DCGMI    "bench_dcgmi"

#define WIRE_EV_HELLO     "hello"
#define WIRE_EV_OUT       "out"
#define WIRE_EV_STATUS    "status"
#define WIRE_EV_EXIT      "exit"
#define WIRE_EV_SPAWNED   "spawned"
#define WIRE_EV_STOPPED   "stopped"
#define WIRE_EV_STACKS    "stacks"
#define WIRE_EV_LIST      "list"
#define WIRE_EV_READ      "read"
#define WIRE_EV_ERROR     "error"
#define WIRE_EV_PONG      "pong"
#define WIRE_EV_FACTS     "facts"
#define WIRE_EV_CLOCK     "clock"
#define WIRE_EV_LISTEN    "listen"
#define WIRE_EV_CONNECT   "connect"
#define WIRE_EV_UNLISTEN  "unlisten"
#define WIRE_EV_SIGNAL    "signal"
#define WIRE_EV_GPU_WATCH "gpu_watch"
#define WIRE_EV_GPU       "gpu"
#define WIRE_EV_NOTICE    "notice"
#define WIRE_EV_RESUME    "resume"
#define WIRE_EV_BRIDGE    "bridge"    /* a bridge's first line */
#define WIRE_EV_GONE      "gone"      /* a bridge found no agent, or the agent died */
#define WIRE_EV_BENCH_LISTENING "bench_listening"
#define WIRE_EV_BENCH_UNLISTEN  "bench_unlisten"
#define WIRE_EV_BENCH_SENT      "bench_sent"
#define WIRE_EV_BENCH_HOST      "bench_host"
#define WIRE_EV_BENCH_NCCL      "bench_nccl"
#define WIRE_EV_BENCH_NCCL_ID   "bench_nccl_id"   /* a partial answer ("more": true) */
#define WIRE_EV_BENCH_NCCL_STOP "bench_nccl_stop"
#define WIRE_EV_BENCH_DCGMI     "bench_dcgmi"

/* The agent's remote file name: one per version and machine architecture, so nodes sharing a
 * home directory reuse the same copy and versions never overwrite each other. */
#define AGENT_REMOTE_DIR "~/.cache/ddptop"
#define AGENT_REMOTE_NAME_FMT "ddptop-agent-%s-p%d-%s" /* version, PROTOCOL_VERSION, arch */

/* How many unread bytes of agent output the controller holds per node before it stops reading
 * that node: the agent then stops reading its ranks' pipes, and the ranks wait on their writes.
 * Nothing is lost, and the controller's memory stays bounded whatever the ranks print. Through
 * srun (one output for every node) srun's output is not read while any node holds that much. */
#define PROTOCOL_BACKLOG_MAX (4u << 20)

/* Longest line either side accepts; longer ones are a protocol error. The controller then
 * drops the node's link with this message (node name, PROTOCOL_MAX_LINE), over SSH and srun
 * alike. */
#define PROTOCOL_MAX_LINE (1024 * 1024)
#define PROTOCOL_LONG_LINE_FMT "ddptop-agent on %s sent a line longer than %d bytes"

#endif
