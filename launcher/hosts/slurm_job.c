/* Hosts of a Slurm job named by its id, and an allocation made for one command (slurm_job.h).
 * These run Slurm's own commands (scontrol, salloc, scancel) once, before the controller's loop
 * starts or after it ended: nothing here is on the loop's path. */
#include "slurm_job.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "hostfile_int.h"
#include "util/util.h"

/* The command's stdout and stderr together, or NULL when it could not run. *status: its exit. */
static char *run_capture(const char *cmd, int *status)
{
    struct strbuf out;
    char buf[4096];
    size_t n;
    FILE *f = popen(cmd, "r");
    if (!f) return NULL;
    strbuf_init(&out);
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) strbuf_add(&out, buf, n);
    *status = pclose(f);
    strbuf_add(&out, "", 1);
    return out.buf;
}

/* The value of KEY= in scontrol's one-line output (malloc'd), or NULL. */
static char *field(const char *text, const char *key)
{
    size_t kl = strlen(key);
    for (const char *p = text; (p = strstr(p, key)) != NULL; p += kl) {
        if ((p == text || p[-1] == ' ' || p[-1] == '\n') && p[kl] == '=') {
            const char *v = p + kl + 1, *e = v + strcspn(v, " \n");
            return xstrndup(v, (size_t)(e - v));
        }
    }
    return NULL;
}

/* GPUs per node in TresPerNode: "gres:gpu:4", "gres/gpu:a100:4", "gres:gpu:a100:4,gres:nvme:1". */
static long tres_gpus(const char *tres)
{
    const char *g = tres ? strstr(tres, "gpu") : NULL;
    if (!g) return 0;
    size_t len = strcspn(g, ",");
    const char *colon = NULL;
    for (const char *p = g; p < g + len; p++)
        if (*p == ':') colon = p;
    return colon ? strtol(colon + 1, NULL, 10) : 0;
}

static bool valid_jobid(const char *id)
{
    if (!id || !*id) return false;
    for (const char *p = id; *p; p++)
        if (!((*p >= '0' && *p <= '9') || *p == '_')) return false;
    return true;
}

int slurm_job_hosts(const char *jobid, struct hostlist *out, char *err, size_t errlen)
{
    char *cmd, *text, *state, *nodes, *tres, *ntpn, *ntasks, *nnodes, counts[32] = "";
    const char *cvar = NULL;
    int status = 0, rc;
    memset(out, 0, sizeof *out);
    if (!valid_jobid(jobid))
        return hostfile_fail(err, errlen, "--jobid %s: not a Slurm job id such as 12345", jobid ? jobid : "");
    cmd = xasprintf("scontrol show job -o %s 2>&1", jobid);
    text = run_capture(cmd, &status);
    free(cmd);
    if (!text || (WIFEXITED(status) && WEXITSTATUS(status) == 127)) {
        free(text);
        return hostfile_fail(err, errlen, "--jobid %s: cannot run scontrol (is Slurm installed here?)", jobid);
    }
    if (status != 0) {
        text[strcspn(text, "\n")] = '\0';
        rc = hostfile_fail(err, errlen, "--jobid %s: scontrol says: %s (squeue -u $USER lists your jobs)", jobid,
                           text[0] ? text : "no such job");
        free(text);
        return rc;
    }
    state = field(text, "JobState");
    nodes = field(text, "NodeList");
    tres = field(text, "TresPerNode");
    ntpn = field(text, "NtasksPerN:B:S:C");
    ntasks = field(text, "NumTasks");
    nnodes = field(text, "NumNodes");
    /* CONFIGURING: nodes still booting (cloud, power saving); srun waits for them */
    if (!state || (strcmp(state, "RUNNING") != 0 && strcmp(state, "CONFIGURING") != 0)) {
        rc = hostfile_fail(err, errlen, "--jobid %s: the job is %s, not RUNNING: ddptop starts its agents "
                           "as a step of a running allocation (squeue -j %s)", jobid, state ? state : "unknown", jobid);
    } else if (!nodes || !*nodes || strcmp(nodes, "(null)") == 0) {
        rc = hostfile_fail(err, errlen, "--jobid %s: scontrol shows no NodeList for the job", jobid);
    } else {
        /* GPUs per node first, as --slurm does; then tasks per node */
        long nt = ntasks ? strtol(ntasks, NULL, 10) : 0, nn = nnodes ? strtol(nnodes, NULL, 10) : 0;
        long gpus = tres_gpus(tres);
        if (gpus > 0) {
            snprintf(counts, sizeof counts, "%ld", gpus);
            cvar = "TresPerNode";
        } else if (ntpn && strtol(ntpn, NULL, 10) > 0) {
            snprintf(counts, sizeof counts, "%ld", strtol(ntpn, NULL, 10));
            cvar = "NtasksPerN";
        } else if (nt > 0 && nn > 0 && nt % nn == 0) {
            snprintf(counts, sizeof counts, "%ld", nt / nn);
            cvar = "NumTasks/NumNodes";
        }
        rc = hostfile_from_slurm_values("NodeList", nodes, cvar, cvar ? counts : NULL, out, err, errlen);
    }
    free(state);
    free(nodes);
    free(tres);
    free(ntpn);
    free(ntasks);
    free(nnodes);
    free(text);
    return rc;
}

char *slurm_job_allocate(const char *args, char *err, size_t errlen)
{
    struct strbuf cmd, word;
    char *text, *id = NULL, *p;
    char quote = 0;
    int status = 0;
    bool in_word = false;
    /* words as a shell splits them, quotes honoured, nothing expanded: -w n[1-2] stays itself */
    strbuf_init(&cmd);
    strbuf_init(&word);
    strbuf_adds(&cmd, "salloc --no-shell");
    for (const char *c = args;; c++) {
        if (*c && (quote ? *c != quote : !strchr(" \t\n", *c))) {
            if (!quote && (*c == '\'' || *c == '"')) quote = *c;
            else strbuf_add(&word, c, 1);
            in_word = true;
            continue;
        }
        if (*c && quote) { /* the closing quote */
            quote = 0;
            continue;
        }
        if (in_word) {
            strbuf_add(&word, "", 1);
            strbuf_add(&cmd, " ", 1);
            strbuf_add_shell_quoted(&cmd, word.buf);
            strbuf_reset(&word);
            in_word = false;
        }
        if (!*c) break;
    }
    strbuf_done(&word);
    if (quote) {
        strbuf_done(&cmd);
        hostfile_fail(err, errlen, "--salloc '%s': a quote (%c) is not closed", args, quote);
        return NULL;
    }
    strbuf_adds(&cmd, " 2>&1");
    fprintf(stderr, "ddptop: asking Slurm for nodes: %.*s\n", (int)(cmd.len - 5), cmd.buf);
    text = run_capture(cmd.buf, &status);
    strbuf_done(&cmd);
    if (!text || (WIFEXITED(status) && WEXITSTATUS(status) == 127)) {
        free(text);
        hostfile_fail(err, errlen, "--salloc: cannot run salloc (is Slurm installed here?)");
        return NULL;
    }
    /* "salloc: Granted job allocation 12" (also "salloc: Pending job allocation 12" before it) */
    if ((p = strstr(text, "Granted job allocation ")) != NULL) {
        p += strlen("Granted job allocation ");
        id = xstrndup(p, strspn(p, "0123456789"));
    }
    if (!id || !*id || status != 0) {
        char *last = text, *nl;
        /* salloc's last line says why */
        while ((nl = strchr(last, '\n')) != NULL && nl[1]) last = nl + 1;
        last[strcspn(last, "\n")] = '\0';
        hostfile_fail(err, errlen, "--salloc: salloc gave no allocation%s%s", *last ? ": " : "", last);
        free(id);
        id = NULL;
    }
    free(text);
    return id;
}

void slurm_job_cancel(const char *jobid)
{
    char *cmd;
    int status = 0;
    if (!valid_jobid(jobid)) return;
    cmd = xasprintf("scancel %s 2>&1", jobid);
    free(run_capture(cmd, &status));
    free(cmd);
    fprintf(stderr, "ddptop: gave back Slurm job %s (scancel)\n", jobid);
}
