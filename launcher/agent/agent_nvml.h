/* GPU telemetry on the node: NVML (libnvidia-ml.so.1) loaded with dlopen through the normal
 * library search path, never linked, so a node without the driver runs the agent as before and
 * a test double on LD_LIBRARY_PATH (tests/fakenvml) is used like the real one. A thread of its
 * own samples every GPU each interval (NVML calls can take milliseconds; the agent's loop never
 * waits on them) and waits for XID events in between; the loop forwards its "gpu" lines. The
 * "gpu_watch" request starts and stops it (docs/protocol.md). */
#ifndef DDPTOP_AGENT_NVML_H
#define DDPTOP_AGENT_NVML_H

#include <cJSON.h>

struct agent;

/* {"op":"gpu_watch","interval_ms":1000}: 0 stops. Answered {"ev":"gpu_watch","ok":true,
 * "gpus":N,"driver":"..."} or {"ok":false,"error":"..."}. */
void agent_nvml_watch_op(struct agent *ag, const cJSON *req, const cJSON *id);

/* The GPUs' health for the facts (ddptop check): {"driver":..,"gpus":[{"index","name",
 * "ecc_uncorrected","retired_pending","persistence","mig","throttle"}]}, {"error":..} when NVML
 * is there but fails, NULL when the node has no NVML at all. */
cJSON *agent_nvml_health(void);

#endif
