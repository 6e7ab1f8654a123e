/* The measured preflight's requests (`ddptop check --bench`, docs/protocol.md "Measuring"):
 * bench_listen and bench_unlisten (agent_bench_listen.c: a receiver that echoes pings, counts a
 * bulk transfer and says the count), bench_send (agent_bench_send.c: the sender, for the round
 * trip and the bandwidth of one link) and bench_host (agent_bench_host.c: CPU memory bandwidth
 * and, through agent_bench_gpu.c, each GPU's matrix products and copies, on a thread).
 *
 * On the wire between two agents, after the TCP handshake: the sender's nonce line
 * ("<hex>\n"), then K times a ping byte that the receiver echoes, then the bulk byte and bulk
 * data up to the sender's end of writing; the receiver answers with the count of bulk bytes,
 * 8 bytes little-endian, and closes. Nothing else is ever written or read. */
#ifndef DDPTOP_AGENT_BENCH_H
#define DDPTOP_AGENT_BENCH_H

#include "agent.h"

#define BENCH_PING 'p'
#define BENCH_BULK 'b'
#define BENCH_COUNT_BYTES 8
/* A nonce is hex digits: the controller's 32 (128 random bits); 16 to 64 accepted. */
#define BENCH_NONCE_MIN 16
#define BENCH_NONCE_MAX 64

void agent_bench_listen_op(struct agent *ag, const cJSON *req, const cJSON *id);
void agent_bench_unlisten_op(struct agent *ag, const cJSON *req, const cJSON *id);
void agent_bench_send_op(struct agent *ag, const cJSON *req, const cJSON *id);
void agent_bench_host_op(struct agent *ag, const cJSON *req, const cJSON *id);
/* NCCL's all-reduce across nodes (agent_bench_nccl.c, its process agent_bench_nccl_run.c) and
 * `dcgmi diag -r 1` (agent_bench_dcgmi.c). */
void agent_bench_nccl_op(struct agent *ag, const cJSON *req, const cJSON *id);
void agent_bench_nccl_stop_op(struct agent *ag, const cJSON *req, const cJSON *id);
void agent_bench_dcgmi_op(struct agent *ag, const cJSON *req, const cJSON *id);
/* `ddptop-agent --bench-nccl ...`: the NCCL measurement's own process; its exit status. */
int agent_bench_nccl_main(int argc, char **argv);

/* ncclUniqueId's size (NCCL_UNIQUE_ID_BYTES), carried as twice as many hex digits. */
#define BENCH_NCCL_ID_BYTES 128

/* nonce is BENCH_NONCE_MIN to BENCH_NONCE_MAX hex digits. */
int agent_bench_nonce_ok(const char *nonce);

#endif
