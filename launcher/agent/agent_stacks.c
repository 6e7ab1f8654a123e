/* Stack dumps of a rank: see agent_stacks.h. A tool that fails leaves a note above the next
 * tool's text, so the person reading it knows why they see less than they asked for. */
#include "agent_stacks.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent_exec.h"
#include "agent_proc.h"

/* Runs a tool; 0 when it exited 0 and its output holds want (NULL: anything). Otherwise a note
 * for the person goes into notes. */
static int run_tool(char *const argv[], int timeout_ms, const char *want, struct strbuf *out, struct strbuf *notes)
{
    struct strbuf got;
    strbuf_init(&got);
    int st = agent_exec_capture(argv, timeout_ms, 1, &got);
    if (st == 0 && got.len && (!want || strstr(got.buf, want))) {
        strbuf_add(out, got.buf, got.len);
        strbuf_done(&got);
        return 0;
    }
    if (st == -1) strbuf_addf(notes, "%s: timed out after %d ms\n", argv[0], timeout_ms);
    else if (st == 127 && !got.len) strbuf_addf(notes, "%s: could not be started\n", argv[0]);
    else strbuf_addf(notes, "%s: exit status %d, no stacks in its output\n", argv[0], st);
    if (got.len) {
        size_t n = got.len < 2000 ? got.len : 2000;
        strbuf_adds(notes, "  ");
        for (size_t i = 0; i < n; i++) {
            strbuf_add(notes, got.buf + i, 1);
            if (got.buf[i] == '\n' && i + 1 < n) strbuf_adds(notes, "  ");
        }
        if (got.buf[n - 1] != '\n') strbuf_adds(notes, "\n");
    }
    strbuf_done(&got);
    return -1;
}

/* One line of /proc/PID/task/TID/status starting with key (e.g. "State:"), or "?". */
static void status_line(const char *dir, const char *key, struct strbuf *out)
{
    char path[512];
    struct strbuf sb;
    snprintf(path, sizeof path, "%s/status", dir);
    strbuf_init(&sb);
    const char *line = NULL;
    if (proc_read_file(path, &sb, 8192) == 0 && sb.len) {
        for (char *p = sb.buf; p && *p; ) {
            char *nl = strchr(p, '\n');
            if (nl) *nl = '\0';
            if (strncmp(p, key, strlen(key)) == 0) {
                line = p + strlen(key);
                while (*line == ' ' || *line == '\t') line++;
                break;
            }
            p = nl ? nl + 1 : NULL;
        }
    }
    strbuf_adds(out, line ? line : "?");
    strbuf_done(&sb);
}

static void proc_file(const char *dir, const char *name, const char *label, struct strbuf *out)
{
    char path[512];
    struct strbuf sb;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    strbuf_init(&sb);
    if (proc_read_file(path, &sb, 16384) < 0) {
        strbuf_addf(out, "  %s: (unreadable: %s)\n", label, strerror(errno));
    } else {
        while (sb.len && sb.buf[sb.len - 1] == '\n') sb.buf[--sb.len] = '\0';
        if (strchr(sb.buf ? sb.buf : "", '\n')) {
            strbuf_addf(out, "  %s:\n    ", label);
            for (size_t i = 0; i < sb.len; i++) {
                strbuf_add(out, sb.buf + i, 1);
                if (sb.buf[i] == '\n') strbuf_adds(out, "    ");
            }
            strbuf_adds(out, "\n");
        } else {
            strbuf_addf(out, "  %s: %s\n", label, sb.len ? sb.buf : "(empty)");
        }
    }
    strbuf_done(&sb);
}

static int cmp_tid(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

static void proc_stacks(pid_t pid, struct strbuf *out)
{
    char dir[128];
    long tids[1024];
    int n = 0;
    snprintf(dir, sizeof dir, "/proc/%d", (int)pid);
    strbuf_addf(out, "process %d: ", (int)pid);
    status_line(dir, "Name:", out);
    strbuf_adds(out, ", state ");
    status_line(dir, "State:", out);
    strbuf_adds(out, "\n(the kernel's view from /proc: user-space stacks need gdb, or py-spy for "
                     "Python)\n");
    snprintf(dir, sizeof dir, "/proc/%d/task", (int)pid);
    DIR *d = opendir(dir);
    if (!d) {
        strbuf_addf(out, "%s: %s\n", dir, strerror(errno));
        return;
    }
    for (struct dirent *e; (e = readdir(d)) && n < 1024; )
        if (e->d_name[0] >= '0' && e->d_name[0] <= '9') tids[n++] = atol(e->d_name);
    closedir(d);
    qsort(tids, (size_t)n, sizeof tids[0], cmp_tid);
    for (int i = 0; i < n && out->len < STACKS_TEXT_MAX; i++) {
        char tdir[192];
        snprintf(tdir, sizeof tdir, "/proc/%d/task/%ld", (int)pid, tids[i]);
        strbuf_addf(out, "thread %ld (", tids[i]);
        status_line(tdir, "Name:", out);
        strbuf_adds(out, "): state ");
        status_line(tdir, "State:", out);
        strbuf_adds(out, "\n");
        proc_file(tdir, "wchan", "wchan", out);
        proc_file(tdir, "stack", "kernel stack", out);
    }
}

const char *stacks_collect(pid_t pid, const char *path_env, struct strbuf *text)
{
    char num[32];
    struct strbuf notes, out;
    const char *tool = "proc";
    snprintf(num, sizeof num, "%d", (int)pid);
    strbuf_init(&notes);
    strbuf_init(&out);
    char *spy = proc_is_python(pid) ? agent_exec_resolve("py-spy", path_env) : NULL;
    char *gdb = agent_exec_resolve("gdb", path_env);
    if (spy) {
        /* --native adds the C/C++ frames (a collective's wait inside libtorch) between the
         * Python ones; it needs py-spy's unwinder, missing on some builds and platforms, so a
         * quick failure falls back to the Python frames alone. */
        char *native[] = { spy, "dump", "--native", "--pid", num, NULL };
        char *plain[] = { spy, "dump", "--pid", num, NULL };
        int64_t t0 = mono_ms();
        if (run_tool(native, STACKS_TOOL_TIMEOUT_MS, NULL, &out, &notes) == 0) tool = "py-spy";
        else if (mono_ms() - t0 < STACKS_TOOL_TIMEOUT_MS / 3 &&
                 run_tool(plain, STACKS_TOOL_TIMEOUT_MS, NULL, &out, &notes) == 0)
            tool = "py-spy";
    }
    if (strcmp(tool, "proc") == 0 && gdb) {
        char *argv[] = { gdb, "-p", num, "-batch", "-nx", "-ex", "thread apply all bt", NULL };
        if (run_tool(argv, STACKS_GDB_TIMEOUT_MS, "#0", &out, &notes) == 0) tool = "gdb";
    }
    if (strcmp(tool, "proc") == 0) proc_stacks(pid, &out);
    if (notes.len) strbuf_add(text, notes.buf, notes.len);
    if (out.len) strbuf_add(text, out.buf, out.len);
    if (text->len > STACKS_TEXT_MAX) {
        text->len = STACKS_TEXT_MAX;
        text->buf[text->len] = '\0';
        strbuf_adds(text, "\n[cut at 256 KiB]\n");
    }
    strbuf_done(&notes);
    strbuf_done(&out);
    free(spy);
    free(gdb);
    return tool;
}
