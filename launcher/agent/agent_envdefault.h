/* A spawn request's "env_default" (docs/protocol.md): variables the controller sets for a rank
 * only where the node does not set any of them already, in the agent's own environment or in
 * the files NCCL reads its variables from (/etc/nccl.conf, $NCCL_CONF_FILE or else
 * ~/.nccl.conf; NCCL lets the environment win over them, so ddptop's value would). ddptop's
 * NCCL_DEBUG=INFO travels so: a user's own NCCL_DEBUG on the node is never changed. */
#ifndef DDPTOP_AGENT_ENVDEFAULT_H
#define DDPTOP_AGENT_ENVDEFAULT_H

#include <stddef.h>

#include <cJSON.h>

/* The rank's env (the request's "env", may be NULL) with the defaults added, as a new object
 * the caller deletes, when none of the defaults' names is set in env, in environ or in NCCL's
 * configuration files; NULL when they do not apply (or there are none). */
cJSON *envdefault_apply(const cJSON *env, const cJSON *defaults);
/* Whether a configuration file's text (NCCL's format: NAME=VALUE lines) sets name. */
int envdefault_conf_sets(const char *text, size_t len, const char *name);

#endif
