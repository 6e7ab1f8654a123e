/* The direct connection under srun: each agent of a Slurm step connects back to ddptop over
 * TCP, so the control plane does not wait on srun's I/O forwarding, whose connections to every
 * slurmstepd run without TCP_NODELAY (40 ms waits, docs/slurm.md "The direct connection").
 * ddptop listens on an ephemeral port and gives the agents the port and a 256-bit key in the
 * step's environment (never on a command line). Each side proves it holds the key before the
 * other trusts a byte (HMAC-SHA-256 over both nonces and the task id):
 *
 *   agent -> ddptop   "ddptop-direct 2 TASK NA HM"       NA: 16 random bytes, hex;
 *                                                         HM = HMAC(key, "ddptop-direct hello TASK NA")
 *   ddptop -> agent   "NC MC"                             MC = HMAC(key, "ddptop-direct controller TASK NA NC")
 *   agent -> ddptop   "MA =NAME ADDR[ kept]"              MA = HMAC(key, "ddptop-direct agent TASK NA NC"),
 *                                                         then the relay's greeting (wire/relay.h)
 *
 * HM proves nothing by itself (anyone who saw it can send it again): it lets ddptop tell a
 * handshake that may come from a key holder from a stranger's, so that strangers' connections
 * can be let go first when too many wait (ssh/srun_step_direct.c). Then protocol lines both
 * ways, each sealed (direct_line.h), with the relay's control lines: "!eof" and "!unlink" from
 * ddptop, "!STATUS" last from the agent. A line of the handshake is at most DIRECT_LINE_MAX
 * bytes. Pure: strings in, strings out. */
#ifndef DDPTOP_WIRE_DIRECT_H
#define DDPTOP_WIRE_DIRECT_H

#include <stdbool.h>
#include <stddef.h>

#define DIRECT_KEY_LEN 32
#define DIRECT_NONCE_HEX 32
#define DIRECT_MAC_HEX 64
#define DIRECT_LINE_MAX 512
/* The step's environment: the port ddptop listens on, and the key (64 hex digits). */
#define DIRECT_ENV_PORT "DDPTOP_SRUN_PORT"
#define DIRECT_ENV_KEY "DDPTOP_SRUN_KEY"

/* HMAC-SHA-256 (RFC 2104) of msg under key: raw, and as 64 lower-case hex digits and a NUL.
 * What held the key on the way is wiped. */
void direct_hmac(const unsigned char *key, size_t key_len, const void *msg, size_t len, unsigned char out[32]);
void direct_hmac_hex(const unsigned char *key, size_t key_len, const char *msg, size_t len, char out[65]);
/* HMAC(key, "ddptop-direct ROLE TASK NA[ NC]") in hex: role "hello" (nc NULL), "controller" or
 * "agent" (the two proofs). */
void direct_mac(const unsigned char key[DIRECT_KEY_LEN], const char *role, int task, const char *na,
                const char *nc, char out[65]);
/* Whether two MACs (64 hex digits each) are equal; time independent of where they differ. */
bool direct_mac_equal(const char *a, const char *b);
/* 64 hex digits into key; -1 when it is anything else. */
int direct_key_parse(const char *hex, unsigned char key[DIRECT_KEY_LEN]);

/* "ddptop-direct 2 TASK NA HM": 0 and *task, na[33], hm[65]; -1 when malformed. */
int direct_hello_parse(const char *line, int *task, char na[DIRECT_NONCE_HEX + 1], char hm[DIRECT_MAC_HEX + 1]);
/* "NC MC": 0 and nc[33], mc[65]; -1 when malformed. */
int direct_reply_parse(const char *line, char nc[DIRECT_NONCE_HEX + 1], char mc[DIRECT_MAC_HEX + 1]);
/* "MA =GREETING": 0, ma[65] and *greeting (past the '='); -1 when malformed. */
int direct_proof_parse(const char *line, char ma[DIRECT_MAC_HEX + 1], const char **greeting);

#endif
