/* events.jsonl's line for one event of the job (docs/logs.md): the writer of the run's files
 * (run_files.c) queues it; run_summary.c reads it back. */
#ifndef DDPTOP_RUN_EVENTS_H
#define DDPTOP_RUN_EVENTS_H

#include "job/job.h"

/* ev as one JSON object, no newline (malloc'd), or NULL when cJSON runs out of memory. */
char *run_events_line(const struct job *j, const struct job_event *ev);

#endif
