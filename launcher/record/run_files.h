/* The run's files (docs/logs.md), the one module that writes LOGDIR/RUN_ID/ for a live run:
 * it makes the directory with its mode, takes the run's lock, starts the log writer (logw.h)
 * and records the controller (run_owner.h, controller.json), then becomes the job's sink
 * (job/job.h: struct job_sink) so that every byte a rank printed, every event and every GPU
 * sample the model takes reaches the writer's thread. The controller (controller/) opens it after
 * job_new, flushes it on its timer and settles and closes it at the end; the model itself
 * does no I/O. */
#ifndef DDPTOP_RUN_FILES_H
#define DDPTOP_RUN_FILES_H

#include <stddef.h>

#include "job/job.h"

struct logw;
struct run_files;

/* The files of j's run (j->log_dir, which must be set): the directory made (private: 0700,
 * until run_files_set_mode), its lock taken (a second controller of the run stops here,
 * before it touches a file), events.jsonl opened by the writer, controller.json written; j's
 * sink set. NULL with err filled (naming the directory and what to do). */
struct run_files *run_files_open(struct job *j, char *err, size_t errlen);
/* Writes what is left (logw_free), lets go of the lock after the writer's last byte and
 * unhooks the job's sink. Before job_free. NULL is fine. */
void run_files_close(struct run_files *f);

/* --log-mode: the run's directory, its files and every one made from now on get file_mode
 * (0600 by default; 0640 lets the group read), directories the same with x where r is.
 * Also makes agent.log with it, for the transports that append to it, and sets j->log_mode. */
void run_files_set_mode(struct run_files *f, unsigned file_mode);

/* On the controller's timer (every second) and when an attempt's ranks have all ended: the
 * writer's buffers go to disk, the log index is replaced, and its errors become events and
 * what it lost j->incomplete. The files stay open: a line that arrives late still reaches
 * the disk. NULL is fine. */
void run_files_flush(struct run_files *f);
/* The run is over (ddptop exits): waits at most timeout_ms for the writer to have written all
 * that was given to it, then takes its errors and losses as run_files_flush does. */
void run_files_settle(struct run_files *f, int timeout_ms);

/* The run's shape changed before its first attempt (--nproc-per-node gpu, from what the
 * preflight found): j replaces the job the files were written for. The writer is started
 * again for j's ranks (what the old one was given is written first); the lock stays held.
 * 0, or -1 with err filled: the writer could not start again (events.jsonl cannot be opened)
 * and the old job goes on in memory only. */
int run_files_rebind(struct run_files *f, struct job *j, char *err, size_t errlen);

/* The writer, for what the controller asks of it directly (the log index's durable marks,
 * its backlog, adopt.json, cutting logs back on a takeover); NULL for NULL. */
struct logw *run_files_writer(const struct run_files *f);

#endif
