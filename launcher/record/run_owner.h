/* Who owns a run directory: the controller process writing it, recorded when the run starts
 * in LOGDIR/RUN_ID/controller.json (run_files_open), so that `ddptop ls` can tell a run in
 * progress from one whose controller is gone, and `ddptop logs -f` knows when to stop. A pid
 * alone would not do: pids are reused. The record also holds the process's start time (field 22
 * of /proc/PID/stat, clock ticks since boot), the boot id and the host name, and the owner
 * is alive only when all of them still match (docs/logs.md). */
#ifndef DDPTOP_RUN_OWNER_H
#define DDPTOP_RUN_OWNER_H

#include <stddef.h>
#include <stdint.h>

#define RUN_OWNER_FILE "controller.json"

struct run_owner {
    int pid;
    unsigned long long start_ticks;   /* /proc/PID/stat field 22; 0 when /proc was unreadable */
    char boot_id[64];                 /* /proc/sys/kernel/random/boot_id; "" unknown */
    char host[256];                   /* gethostname() */
    int64_t started_ns;               /* wall clock when written */
};

enum run_owner_status {
    OWNER_NONE,       /* no record (a run written before it existed, or not readable) */
    OWNER_ALIVE,      /* the recorded process still runs, here */
    OWNER_GONE,       /* it exited, or this machine rebooted since */
    OWNER_ELSEWHERE,  /* it runs (or ran) on another host: cannot be checked from here */
};

/* Writes the calling process's record into run_dir (atomically: a reader sees the old file
 * or the new one). Returns 0, or -1 with err filled. */
int run_owner_write(const char *run_dir, char *err, size_t errlen);

#define RUN_LOCK_FILE "controller.lock"

/* Takes the run directory for this process: an exclusive lock (flock) on run_dir's lock file,
 * held until the returned descriptor is closed (close-on-exec: no child holds it). Two
 * controllers never write one run: a second `ddptop run --run-id` of a run in progress, or
 * two `ddptop attach` racing to take an orphaned run over, get -1 with err naming the
 * holder. */
int run_owner_lock(const char *run_dir, char *err, size_t errlen);

/* Reads run_dir's record into *o (zeroed when there is none) and says whether its process
 * is alive. */
enum run_owner_status run_owner_check(const char *run_dir, struct run_owner *o);

/* The start time of process pid (field 22 of /proc/PID/stat), 0 when it does not exist or
 * is a zombie (it has exited; only its exit status waits to be collected). */
unsigned long long run_owner_proc_start(int pid);

#endif
