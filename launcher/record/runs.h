/* The runs under a log directory, as `ddptop ls` and `ddptop logs` find them on disk:
 * LOGDIR/RUN_ID/ with its events.jsonl (what makes a directory a run), its owner record,
 * attempt-N/ directories and rank-R.log files (docs/logs.md). Read-only: nothing here
 * writes to a run. */
#ifndef DDPTOP_RUNS_H
#define DDPTOP_RUNS_H

#include <stddef.h>
#include <stdint.h>

#include "run_owner.h"
#include "run_summary.h"

struct run_entry {
    char *id;                   /* the directory's name */
    char *dir;                  /* LOGDIR/RUN_ID */
    struct run_summary sum;
    struct run_owner owner;
    enum run_owner_status owner_status;
    char *note;                 /* why the state is unknown or unchecked ("FILE:LINE: ..."); NULL */
    int64_t sort_ns;            /* its start, else events.jsonl's change time */
    long orphan_left_s;         /* RUN_ORPHANED: how long its agents still wait; -1 otherwise */
    char *incomplete;           /* its record or logs lack something: why ("disk full"); NULL whole */
    char *incomplete_detail;    /* what was lost (LOG_INCOMPLETE_FILE's second line); NULL */
    int64_t last_alive_ns;      /* a run without its end: when its controller last wrote (0) */
};

struct run_list {
    struct run_entry *v;
    size_t n;
};

/* --log-dir as `ddptop run` reads it: dir, or JOB_LOG_ROOT_DEFAULT, absolute. malloc'd. */
char *runs_log_root(const char *dir);

/* Every run under log_root, newest first (by start time, then by id). A directory without
 * events.jsonl is not a run and is skipped; one whose events.jsonl cannot be read or holds a
 * line that is not an event is listed with state unknown and a note. Returns 0, or -1 with
 * err filled when log_root itself cannot be read. */
int runs_list(const char *log_root, struct run_list *out, char *err, size_t errlen);
void runs_list_free(struct run_list *l);

/* Reads one run directory (summary, owner, note). id may be NULL (then dir's last part). */
void runs_entry_read(struct run_entry *e, const char *dir, const char *id);
void runs_entry_free(struct run_entry *e);

/* The directory of RUN: a path when it holds a '/' (or is "." or ".."), else the run id
 * under log_root, else a run directory of that name in the current one. malloc'd; NULL
 * with err filled ("no run 'x' under /path (ddptop ls lists them ...)"). */
char *runs_find(const char *log_root, const char *run, char *err, size_t errlen);

/* The numbers N of dir's attempt-N directories, ascending (malloc'd, *n of them; NULL none). */
int *runs_attempts(const char *dir, size_t *n);
/* The ranks R of dir/attempt-N/rank-R.log, ascending (malloc'd; NULL none). */
int *runs_rank_logs(const char *dir, int attempt, size_t *n);

#endif
