/* Which of --env's NCCL_* variables bench_nccl's request may carry to the agent's NCCL process
 * ("env", docs/protocol.md): one rule for both ends, so that a key ddptop would send is one the
 * agent takes, and a bad one is the user's typo, said when the options are read, not a node's
 * NCCL failure. */
#ifndef DDPTOP_WIRE_NCCL_ENV_H
#define DDPTOP_WIRE_NCCL_ENV_H

#include <stdbool.h>

#define WIRE_NCCL_ENV_MAX 32          /* variables in one request */
#define WIRE_NCCL_ENV_MAX_TEXT "32"
#define WIRE_NCCL_ENV_VALUE_MAX 256   /* bytes of one value */

/* Whether key is one of NCCL's (it starts with NCCL_): only those are sent. */
bool wire_nccl_env_is_nccl(const char *key);
/* NULL when key=value may be sent; else the rule it breaks, for a message. */
const char *wire_nccl_env_bad(const char *key, const char *value);

#endif
