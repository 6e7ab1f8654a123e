/* `ddptop check`: preflight of a cluster. Connects to every node over SSH with a bounded
 * fanout, runs ddptop-agent there, and checks ssh, clock, gpu, env parity, tcp reachability
 * and NCCL interfaces (docs/check.md). */
#ifndef DDPTOP_CHECK_H
#define DDPTOP_CHECK_H

#include <stdbool.h>
#include <stddef.h>

#include "check_report.h"
#include "hosts/hostfile.h"
#include "ssh/ssh_conn.h"

struct check_opts {
    struct ssh_conn_opts ssh;
    bool json;
    int fanout;              /* hosts connecting at once */
    int max_skew_ms;
    int master_port;
    struct host_env *env;    /* --env K=V, in order */
    size_t n_env;
    char **cmd;              /* training command after "--" (NULL: none) */
    size_t n_cmd;
    int verbose;
    /* Called from the check's loop whenever a host's row changed (and once at the end), so a
     * front end can show the table filling in as hosts answer; NULL: not called. */
    void (*on_progress)(void *ctx, const struct check_report *r);
    void *progress_ctx;
};

/* Defaults: fanout 64, timeout 10 s, max skew 500 ms, master port 29500. */
void check_opts_init(struct check_opts *o);
void check_opts_done(struct check_opts *o);

/* Runs every check on hl, fills *report (initialised here; caller frees with
 * check_report_done). Progress goes to stderr; the live table to stdout when `live`. */
void check_collect(const struct check_opts *o, const struct hostlist *hl, struct check_report *report,
                   bool live, bool colour);

/* check_collect, then prints the table and details (or --json) on stdout.
 * Returns the exit code: 0 nothing failed, 1 a check failed. */
int check_run(const struct check_opts *o, const struct hostlist *hl);

#endif
