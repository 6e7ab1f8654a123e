/* A spawn request's "env_old_torch" (docs/protocol.md): variables only a PyTorch older than 2.2
 * reads, which a newer one warns about on every rank. ddptop's NCCL_ASYNC_ERROR_HANDLING=1
 * travels so (torchrun sets the name its own version reads): PyTorch 2.2 renamed it
 * TORCH_NCCL_ASYNC_ERROR_HANDLING, which ddptop always sets, and from 2.2 on the old name
 * prints "NCCL_ASYNC_ERROR_HANDLING is deprecated" twice per rank. The node's torch is the one
 * the facts report (agent_pyver.h: the python3 on PATH; its cached answer when there is one). */
#ifndef DDPTOP_AGENT_TORCHENV_H
#define DDPTOP_AGENT_TORCHENV_H

#include <stdbool.h>

#include <cJSON.h>

/* Whether a torch.__version__ ("2.1.2", "1.13.0a0", "2.11.0+cu130") is older than 2.2. NULL or
 * a version that does not start with MAJOR.MINOR counts as older: unknown keeps the old name,
 * which an old torch needs and a new one only warns about. */
bool torchenv_before_2_2(const char *version);

/* The node's torch version as the facts would give it, without starting python3: the facts'
 * cache for the python3 on PATH, else its torch/version.py; NULL when neither tells.
 * Malloc'd. */
char *torchenv_node_torch(void);

/* The rank's env (the request's "env", may be NULL) with the old-torch variables added that
 * neither env nor the agent's own environment names, as a new object the caller deletes, when the node's torch (torch_version,
 * torchenv_node_torch's answer) is older than 2.2; NULL when they do not apply. */
cJSON *torchenv_apply(const cJSON *env, const cJSON *old_torch, const char *torch_version);

#endif
