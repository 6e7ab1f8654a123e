/* The run's owner record (run_owner.h): written once when the run directory is made, read
 * by `ddptop ls` and `ddptop logs -f`. JSON, one object, replaced by rename so a reader
 * never sees half of it. */
#include "run_owner.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "util/util.h"

/* Up to n-1 bytes of a small file, NUL-terminated; -1 when it cannot be read. */
static ssize_t read_small(const char *path, char *buf, size_t n)
{
    FILE *f = util_fopen_read(path); /* controller.json may be a FIFO in a shared --log-dir */
    if (!f) return -1;
    size_t got = fread(buf, 1, n - 1, f);
    int bad = ferror(f);
    fclose(f);
    if (bad) return -1;
    buf[got] = '\0';
    return (ssize_t)got;
}

unsigned long long run_owner_proc_start(int pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    if (pid <= 0 || read_small(path, buf, sizeof buf) <= 0) return 0;
    /* "pid (comm) state ppid ...": comm may hold spaces and ')', so start after the last ')' */
    char *p = strrchr(buf, ')');
    if (!p) return 0;
    p++;
    char state = 0;
    unsigned long long start = 0;
    int field = 2;
    for (char *tok = strtok(p, " "); tok; tok = strtok(NULL, " ")) {
        field++;
        if (field == 3) state = tok[0];
        if (field == 22) {
            start = strtoull(tok, NULL, 10);
            break;
        }
    }
    if (state == 'Z' || state == 'X') return 0;
    return start;
}

static void boot_id(char *buf, size_t n)
{
    if (read_small("/proc/sys/kernel/random/boot_id", buf, n) <= 0) {
        buf[0] = '\0';
        return;
    }
    buf[strcspn(buf, "\n")] = '\0';
}

static void host_name(char *buf, size_t n)
{
    if (gethostname(buf, n) != 0) buf[0] = '\0';
    buf[n - 1] = '\0';
}

int run_owner_write(const char *run_dir, char *err, size_t errlen)
{
    struct run_owner o = { .pid = (int)getpid(), .started_ns = wall_ns() };
    o.start_ticks = run_owner_proc_start(o.pid);
    boot_id(o.boot_id, sizeof o.boot_id);
    host_name(o.host, sizeof o.host);
    cJSON *doc = cJSON_CreateObject();
    cJSON_AddNumberToObject(doc, "pid", o.pid);
    cJSON_AddNumberToObject(doc, "start_ticks", (double)o.start_ticks);
    cJSON_AddStringToObject(doc, "boot_id", o.boot_id);
    cJSON_AddStringToObject(doc, "host", o.host);
    cJSON_AddNumberToObject(doc, "started_ms", (double)(o.started_ns / 1000000));
    char *text = cJSON_PrintUnformatted(doc);
    cJSON_Delete(doc);
    char *path = xasprintf("%s/%s", run_dir, RUN_OWNER_FILE);
    char *line = xasprintf("%s\n", text ? text : "{}");
    int rc = 0;
    if (util_replace_file(path, line, strlen(line), 0600, false) != 0) {
        snprintf(err, errlen, "cannot write %s: %s (choose another --log-dir)", path, strerror(errno));
        rc = -1;
    }
    free(line);
    free(text);
    free(path);
    return rc;
}

static bool read_record(const char *run_dir, struct run_owner *o);

int run_owner_lock(const char *run_dir, char *err, size_t errlen)
{
    char *path = xasprintf("%s/%s", run_dir, RUN_LOCK_FILE);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        snprintf(err, errlen, "cannot open %s: %s (choose another --log-dir)", path, strerror(errno));
        free(path);
        return -1;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        struct run_owner o;
        close(fd);
        if (e == EWOULDBLOCK && read_record(run_dir, &o))
            snprintf(err, errlen, "run %s is written by another ddptop (pid %d on %s): choose another --run-id, "
                     "or watch it with ddptop attach", run_dir, o.pid, o.host[0] ? o.host : "?");
        else if (e == EWOULDBLOCK)
            snprintf(err, errlen, "run %s is written by another ddptop: choose another --run-id, or watch it "
                     "with ddptop attach", run_dir);
        else
            snprintf(err, errlen, "cannot lock %s: %s (choose another --log-dir)", path, strerror(e));
        free(path);
        return -1;
    }
    free(path);
    return fd;
}

static bool read_record(const char *run_dir, struct run_owner *o)
{
    char *path = xasprintf("%s/%s", run_dir, RUN_OWNER_FILE);
    char buf[4096];
    ssize_t n = read_small(path, buf, sizeof buf);
    free(path);
    if (n <= 0) return false;
    cJSON *doc = cJSON_Parse(buf);
    const cJSON *pid = cJSON_GetObjectItemCaseSensitive(doc, "pid");
    if (!cJSON_IsNumber(pid) || !(pid->valuedouble >= 1 && pid->valuedouble <= INT_MAX)) {
        cJSON_Delete(doc);
        return false;
    }
    o->pid = (int)pid->valuedouble;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(doc, "start_ticks");
    if (cJSON_IsNumber(v) && v->valuedouble > 0 && v->valuedouble < 1e18)
        o->start_ticks = (unsigned long long)v->valuedouble;
    v = cJSON_GetObjectItemCaseSensitive(doc, "boot_id");
    if (cJSON_IsString(v)) snprintf(o->boot_id, sizeof o->boot_id, "%s", v->valuestring);
    v = cJSON_GetObjectItemCaseSensitive(doc, "host");
    if (cJSON_IsString(v)) snprintf(o->host, sizeof o->host, "%s", v->valuestring);
    v = cJSON_GetObjectItemCaseSensitive(doc, "started_ms");
    if (cJSON_IsNumber(v) && v->valuedouble > 0 && v->valuedouble < 1e13)
        o->started_ns = (int64_t)v->valuedouble * 1000000;
    cJSON_Delete(doc);
    return true;
}

enum run_owner_status run_owner_check(const char *run_dir, struct run_owner *o)
{
    memset(o, 0, sizeof *o);
    if (!read_record(run_dir, o)) return OWNER_NONE;
    char here[256], boot[64];
    host_name(here, sizeof here);
    if (o->host[0] && strcmp(o->host, here) != 0) return OWNER_ELSEWHERE;
    boot_id(boot, sizeof boot);
    if (o->boot_id[0] && boot[0] && strcmp(o->boot_id, boot) != 0) return OWNER_GONE;
    if (!o->start_ticks) /* written without /proc: the pid is all there is */
        return kill(o->pid, 0) == 0 || errno == EPERM ? OWNER_ALIVE : OWNER_GONE;
    return run_owner_proc_start(o->pid) == o->start_ticks ? OWNER_ALIVE : OWNER_GONE;
}
