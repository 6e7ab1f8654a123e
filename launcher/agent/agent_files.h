/* Files a rank left on its node that the controller wants on its side: PyTorch's NCCL flight
 * recorder dumps (TORCH_NCCL_DEBUG_INFO_TEMP_FILE, one file per rank: the prefix plus the rank
 * number), fetched when a hang is acted on (docs/protocol.md, "list" and "read"). The agent
 * also makes the dump's directory at spawn, since PyTorch writes the file without creating it. */
#ifndef DDPTOP_AGENT_FILES_H
#define DDPTOP_AGENT_FILES_H

#include "agent.h"

/* Bytes of a file one "read" answer carries (base64 keeps the line under PROTOCOL_MAX_LINE). */
#define FILES_READ_CHUNK (512 * 1024)
/* Files one "list" answer names at most. */
#define FILES_LIST_MAX 256

/* {"op":"list","prefix":P}: the regular files in P's directory whose name starts with P's last
 * component, sorted, with their sizes. */
void agent_files_list_op(struct agent *ag, const cJSON *req, const cJSON *id);
/* {"op":"read","path":P,"offset":O}: up to FILES_READ_CHUNK bytes of P from O, in base64. */
void agent_files_read_op(struct agent *ag, const cJSON *req, const cJSON *id);

/* At spawn, for a rank whose environment names the dump prefix (DIR/NAME-START): makes DIR
 * (mode 0700, parents too), remembered so that agent_files_done removes it again when it is
 * still empty. A DIR that is not ours alone (another user's, writable by others, a link) is not
 * used: the dumps go to a directory in the agent's own (agent_nodedir.h), which "list" reads
 * for DIR, and the value to give the rank instead comes back (malloc'd; "" when there is none),
 * with note saying why. NULL: the value stands. */
#define FILES_TRACE_VAR "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"
#define FILES_TRACE_VAR_NEW "TORCH_FR_DUMP_TEMP_FILE"   /* its name from PyTorch 2.7 on */
char *agent_files_prepare(const char *prefix, char *note, size_t notelen);
void agent_files_done(void);

#endif
