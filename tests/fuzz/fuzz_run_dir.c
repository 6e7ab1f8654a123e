/* libFuzzer harness for a run's directory as `ddptop view` and `ddptop ls` read it back
 * (launcher/record/run_replay.c, runs.c, gpu.c's job_gpu_restore, run_record.c; docs/logs.md):
 * events.jsonl, gpu.jsonl, a rank's log and adopt.json, written by the harness into a
 * directory of its own and read with the real readers, run_replay_load, runs_entry_read and
 * run_record_read, which take a path.
 *
 * Input: the four files' bytes, separated by NUL bytes: events.jsonl, then gpu.jsonl, then
 * attempt-0/rank-0.log, then adopt.json (a file whose part is absent is not there).
 *
 * Invariants: a loaded run has a job of the ranks and nodes it says, in an ended state, and
 * counts that are not negative; a run `ls` lists has attempts >= 0; once `ls` has seen an
 * ended run, its takeover record (when one can be read) holds no environment and no token. */
#include "fuzz_common.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <unistd.h>

#include "job/gpu.h"
#include "job/job.h"
#include "job/job_state.h"
#include "record/run_record.h"
#include "record/run_replay.h"
#include "record/runs.h"

static char dir[64];
static const char *const files[] = { "events.jsonl", "gpu.jsonl", "attempt-0/rank-0.log", "adopt.json" };

static void cleanup(void)
{
    char p[128];
    for (size_t k = 0; k < sizeof files / sizeof *files; k++) {
        snprintf(p, sizeof p, "%s/%s", dir, files[k]);
        unlink(p);
    }
    snprintf(p, sizeof p, "%s/adopt.json.tmp", dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/attempt-0", dir);
    rmdir(p);
    rmdir(dir);
}

static void put(const char *name, const uint8_t *data, size_t n)
{
    char p[128];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    EXPECT(fd >= 0);
    EXPECT(n == 0 || write(fd, data, n) == (ssize_t)n);
    close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/ddptop-fuzz-run.XXXXXX");
        EXPECT(mkdtemp(dir) != NULL);
        char p[128];
        snprintf(p, sizeof p, "%s/attempt-0", dir);
        EXPECT(mkdir(p, 0700) == 0);
        atexit(cleanup);
    }
    size_t at = 0;
    for (size_t k = 0; k < sizeof files / sizeof *files; k++) {
        char p[128];
        snprintf(p, sizeof p, "%s/%s", dir, files[k]);
        if (at > size) {
            unlink(p);
            continue;
        }
        const uint8_t *nul = memchr(data + at, '\0', size - at);
        size_t n = nul ? (size_t)(nul - (data + at)) : size - at;
        put(files[k], data + at, n);
        at += n + 1;
    }

    struct run_replay r;
    char err[512] = "";
    if (run_replay_load(dir, "fuzz", OWNER_GONE, &r, err, sizeof err) == 0) {
        const struct job *j = r.job;
        EXPECT(j && job_is_ended(j));
        EXPECT(r.events >= 0 && r.bad_lines >= 0 && r.gpu_samples >= 0);
        for (size_t k = 0; k < j->n_ranks; k++) {
            EXPECT(j->ranks[k].node >= 0 && (size_t)j->ranks[k].node < j->n_nodes);
            (void)job_rank_gpu(j, (int)k);
        }
        run_replay_done(&r);
    } else {
        EXPECT(err[0]);
    }

    struct run_entry e;
    runs_entry_read(&e, dir, "fuzz");
    EXPECT(e.sum.attempts >= 0);
    bool ended = e.sum.ended;
    runs_entry_free(&e);

    struct run_record rec;
    if (run_record_read(dir, &rec, err, sizeof err) == 0) {
        EXPECT(!ended || (!rec.adoptable && !rec.env && !rec.token));
        EXPECT(rec.n_nodes >= 1 && rec.state && rec.cwd);
        run_record_free(&rec);
    } else {
        EXPECT(err[0]);
    }
    return 0;
}
