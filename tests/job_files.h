/* For the unit tests: a job with its run's files, made as the controller makes them (job_new,
 * then record/run_files.h when the job has a log directory), and freed in the same order (the
 * files closed, then the job). The run_files are the job's sink context. */
#ifndef DDPTOP_TEST_JOB_FILES_H
#define DDPTOP_TEST_JOB_FILES_H

#include "job/job.h"
#include "record/logw.h"
#include "record/run_files.h"

static inline struct run_files *tjob_files(const struct job *j)
{
    return j && j->sink ? (struct run_files *)j->sink->ctx : NULL;
}

static inline struct logw *tjob_writer(const struct job *j)
{
    return run_files_writer(tjob_files(j));
}

static inline struct job *tjob_new(const char *run_id, const char *log_root, int max_restarts,
                                   const char *const *node_names, const struct host *const *hosts,
                                   const int *ranks_per_node, size_t n_nodes, char *err, size_t errlen)
{
    struct job *j = job_new(run_id, log_root, max_restarts, node_names, hosts, ranks_per_node, n_nodes,
                            err, errlen);
    if (j && j->log_dir && !run_files_open(j, err, errlen)) {
        job_free(j);
        return NULL;
    }
    return j;
}

static inline void tjob_free(struct job *j)
{
    if (!j) return;
    run_files_close(tjob_files(j));
    job_free(j);
}

#endif
