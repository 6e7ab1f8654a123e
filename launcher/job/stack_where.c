/* Where a rank is, from its stack dump (stack_where.h). The dump is cut into threads of frames,
 * innermost first, by the format of the tool that made it; the rules then look at names and
 * file paths only, never at addresses. */
#include "stack_where.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

struct frame {
    char *name;        /* "all_reduce", "c10d::ProcessGroupGloo::runLoop", "do_signal_stop" */
    char *where;       /* py-spy: "train.py:12" or "libc.so.6"; gdb: "from LIB" / "at FILE:LINE" */
    bool python;       /* a Python frame (py-spy: its where is FILE.py:LINE) */
    bool kernel;       /* /proc's wait channel */
};

struct thread {
    bool main;
    long id, num;      /* gdb: the LWP and gdb's thread number */
    struct frame *f;
    size_t n;
};

struct dump {
    struct thread *t;
    size_t n;
};

static struct thread *thread_new(struct dump *d, long id, bool main)
{
    d->t = xrealloc(d->t, (d->n + 1) * sizeof *d->t);
    d->t[d->n] = (struct thread){ .main = main, .id = id };
    return &d->t[d->n++];
}

static void frame_add(struct thread *t, char *name, char *where, bool python, bool kernel)
{
    t->f = xrealloc(t->f, (t->n + 1) * sizeof *t->f);
    t->f[t->n++] = (struct frame){ .name = name, .where = where, .python = python, .kernel = kernel };
}

static void dump_free(struct dump *d)
{
    for (size_t i = 0; i < d->n; i++) {
        for (size_t k = 0; k < d->t[i].n; k++) {
            free(d->t[i].f[k].name);
            free(d->t[i].f[k].where);
        }
        free(d->t[i].f);
    }
    free(d->t);
}

static bool starts(const char *s, const char *p)
{
    return strncmp(s, p, strlen(p)) == 0;
}

/* ---- reading the three formats ---------------------------------------------------------- */

/* gdb's function name: up to " (" outside template brackets, its parameter list cut off
 * ("c10d::ProcessGroupGloo::runLoop(int)" -> "...::runLoop"), "(anonymous namespace)" kept. */
static char *gdb_name(const char *s, const char **rest)
{
    struct strbuf b;
    int angle = 0;
    strbuf_init(&b);
    const char *p = s;
    bool cut = false;
    for (; *p; p++) {
        if (starts(p, "(anonymous namespace)")) {
            if (!cut) strbuf_adds(&b, "(anonymous namespace)");
            p += strlen("(anonymous namespace)") - 1;
            continue;
        }
        if (*p == '<') angle++;
        else if (*p == '>' && angle > 0) angle--;
        else if (angle == 0 && *p == ' ' && p[1] == '(') break;
        else if (angle == 0 && *p == '(') cut = true;
        if (!cut) strbuf_add(&b, p, 1);
    }
    *rest = p;
    return b.buf ? b.buf : xstrdup("");
}

static void read_gdb(struct dump *d, char **lines, size_t n, int pid)
{
    struct thread *cur = NULL;
    for (size_t i = 0; i < n; i++) {
        const char *l = lines[i];
        if (starts(l, "Thread ") && strstr(l, "(LWP ")) {
            long num = strtol(l + 7, NULL, 10), lwp = strtol(strstr(l, "(LWP ") + 5, NULL, 10);
            cur = thread_new(d, lwp, pid > 0 && lwp == pid);
            cur->num = num;
            continue;
        }
        if (l[0] != '#' || !isdigit((unsigned char)l[1])) continue;
        if (!cur) cur = thread_new(d, 0, true);   /* a plain "bt": one thread */
        const char *p = l + 1;
        while (isdigit((unsigned char)*p)) p++;
        while (*p == ' ') p++;
        if (starts(p, "0x")) {
            const char *in = strstr(p, " in ");
            if (!in) continue;
            p = in + 4;
        }
        const char *rest;
        char *name = gdb_name(p, &rest);
        const char *from = strstr(rest, ") from "), *at = strstr(rest, ") at ");
        char *where = from ? xstrdup(from + 7) : at ? xstrdup(at + 5) : NULL;
        frame_add(cur, name, where, false, false);
    }
    /* No thread is the process id (another pid namespace, or none given): gdb's thread 1. */
    bool any = false;
    for (size_t i = 0; i < d->n; i++) any = any || d->t[i].main;
    for (size_t i = 0; i < d->n && !any; i++) any = d->t[i].main = d->t[i].num == 1;
}

/* "    name (where)" as py-spy writes a frame; deeper indents (locals) are not frames. */
static void read_pyspy(struct dump *d, char **lines, size_t n, int pid)
{
    struct thread *cur = NULL;
    for (size_t i = 0; i < n; i++) {
        const char *l = lines[i];
        if (starts(l, "Thread ")) {
            long id = strtol(l + 7, NULL, 0);
            bool main = pid > 0 ? id == pid : false;
            if (strstr(l, "\"MainThread\"")) main = true;
            cur = thread_new(d, id, main);
            continue;
        }
        if (!cur || !starts(l, "    ") || l[4] == ' ' || l[4] == '\0') continue;
        const char *open = strrchr(l, '(');
        size_t len = strlen(l);
        if (!open || open == l + 4 || l[len - 1] != ')') continue;
        char *name = xstrndup(l + 4, (size_t)(open - (l + 4)));
        size_t nl = strlen(name);
        while (nl && name[nl - 1] == ' ') name[--nl] = '\0';
        char *where = xstrndup(open + 1, (size_t)(l + len - 1 - (open + 1)));
        frame_add(cur, name, where, strstr(where, ".py:") || strstr(where, "<frozen"),
                  false);
    }
    /* py-spy names MainThread only for threads Python knows: without it, the first listed. */
    bool any = false;
    for (size_t i = 0; i < d->n; i++) any = any || d->t[i].main;
    if (!any && d->n) d->t[0].main = true;
}

/* "thread TID (NAME): state S (sleeping)" then "  wchan: NAME" (agent_stacks.c's proc dump). */
static void read_proc(struct dump *d, char **lines, size_t n, int pid)
{
    struct thread *cur = NULL;
    for (size_t i = 0; i < n; i++) {
        const char *l = lines[i];
        if (starts(l, "thread ")) {
            long tid = strtol(l + 7, NULL, 10);
            cur = thread_new(d, tid, pid > 0 ? tid == pid : d->n == 0);
            const char *st = strstr(l, "): state ");
            if (st) frame_add(cur, xstrdup(st + 9), xstrdup("state"), false, true);
            continue;
        }
        if (cur && starts(l, "  wchan: ")) {
            const char *w = l + 9;
            if (strcmp(w, "0") != 0 && *w && *w != '(')   /* "0": running; "(unreadable...)" */
                frame_add(cur, xstrdup(w), xstrdup("wchan"), false, true);
        }
    }
}

static const char *guess_tool(const char *text)
{
    if (strstr(text, "\n#0 ") || starts(text, "#0 ")) return "gdb";
    if (strstr(text, "  wchan: ")) return "proc";
    return "py-spy";
}

/* ---- the rules ---------------------------------------------------------------------------- */

/* The collective a name stands for, as torch.distributed names it (p2p: send or recv). */
static const char *collective_of(const char *name, bool *p2p)
{
    static const struct { const char *key, *name; } table[] = {
        { "allreduce", "all_reduce" }, { "reducescatter", "reduce_scatter" },
        { "allgather", "all_gather" }, { "alltoall", "all_to_all" }, { "broadcast", "broadcast" },
        { "barrier", "barrier" }, { "gather", "gather" }, { "scatter", "scatter" },
        { "reduce", "reduce" }, { "send", "send" }, { "recv", "recv" },
    };
    char buf[256];
    size_t k = 0;
    for (const char *p = name; *p && k < sizeof buf - 1; p++)
        if (*p != '_') buf[k++] = (char)tolower((unsigned char)*p);
    buf[k] = '\0';
    for (size_t i = 0; i < sizeof table / sizeof *table; i++)
        if (strstr(buf, table[i].key)) {
            *p2p = i >= 9;
            return table[i].name;
        }
    return NULL;
}

static bool is_dist_native(const struct frame *f)
{
    return !f->python && !f->kernel &&
           (strstr(f->name, "c10d::") || strstr(f->name, "gloo::") || starts(f->name, "nccl") ||
            strstr(f->name, "torch::distributed"));
}

static bool in_torch(const struct frame *f, const char *dir)
{
    return f->python && f->where && strstr(f->where, dir);
}

/* A Python file of the user's, not of the interpreter or an installed package. */
static bool is_user_python(const struct frame *f)
{
    static const char *const lib[] = { "/site-packages/", "/dist-packages/", "/lib/python",
                                       "<frozen", "<string>", "/torch/", NULL };
    if (!f->python || !f->where || starts(f->where, "torch/")) return false;   /* py-spy may shorten */
    for (size_t i = 0; lib[i]; i++)
        if (strstr(f->where, lib[i])) return false;
    return true;
}

/* The C library, libstdc++, the loader and the kernel's vdso: where every wait ends up. */
static bool is_system(const struct frame *f)
{
    static const char *const libs[] = { "libc.so", "libc-", "libpthread", "ld-linux", "libstdc++",
                                        "libgcc_s", "linux-vdso", "libm.so", "libdl", NULL };
    static const char *const src[] = { "sysdeps/", "nptl/", "posix/", "misc/", "io/", "signal/",
                                       "time/", "socket/", "libio/", "stdlib/", "string/", NULL };
    static const char *const names[] = { "syscall", "clone", "clone3", "start_thread", "epoll_wait",
                                         "poll", "ppoll", "select", "pselect", "nanosleep",
                                         "clock_nanosleep", "usleep", "sleep", "pause", "read",
                                         "write", "recv", "recvmsg", "recvfrom", "send", "sendmsg",
                                         "sendto", "accept", "accept4", "connect", "kill", "raise",
                                         "waitpid", "wait4", "ioctl", "sched_yield", "futex", "_start", NULL };
    const char *n = f->name;
    if (f->python || f->kernel) return false;
    if (!*n || starts(n, "??") || starts(n, "__") || starts(n, "_dl_") || starts(n, "pthread_") ||
        starts(n, "std::") || starts(n, "sem_"))
        return true;
    for (size_t i = 0; names[i]; i++)
        if (strcmp(n, names[i]) == 0) return true;
    if (f->where) {
        for (size_t i = 0; libs[i]; i++)
            if (strstr(f->where, libs[i])) return true;
        if (starts(f->where, "./") || starts(f->where, "../"))
            for (size_t i = 0; src[i]; i++)
                if (strstr(f->where, src[i])) return true;
    }
    return false;
}

static char *clip(const char *s)
{
    size_t n = strlen(s);
    if (n < STACK_WHERE_MAX) return xstrdup(s);
    return xasprintf("%.*s...", STACK_WHERE_MAX - 4, s);
}

/* "train_step (train.py)": the function and the file's last component, without the line. */
static char *python_phrase(const struct frame *f)
{
    const char *file = f->where, *slash = strrchr(file, '/');
    if (slash) file = slash + 1;
    size_t len = strcspn(file, ":");
    char *s = xasprintf("%s (%.*s)", f->name, (int)len, file);
    char *c = clip(s);
    free(s);
    return c;
}

/* Rule 1 on one thread: the innermost frame that says something, or NULL. */
static char *telling_frame(const struct thread *t)
{
    const char *p2p = NULL;
    for (size_t i = 0; i < t->n; i++) {
        const struct frame *f = &t->f[i];
        bool is_p2p = false;
        const char *coll = NULL;
        if (in_torch(f, "torch/distributed/") || is_dist_native(f)) coll = collective_of(f->name, &is_p2p);
        if (coll && !is_p2p) return xstrdup(coll);
        if (coll && !p2p) p2p = coll;
        if (p2p) continue;   /* a send/recv inside a collective's code: look further out */
        if (in_torch(f, "torch/utils/data/")) return xstrdup("the data loader");
        if (in_torch(f, "torch/distributed/") && (strstr(f->name, "init_process_group") ||
                                                  strstr(f->name, "rendezvous") || strstr(f->where, "rendezvous")))
            return xstrdup("init_process_group");
        if (!f->python && strstr(f->name, "TCPStore")) return xstrdup("the rendezvous store");
        if (is_user_python(f)) return python_phrase(f);
    }
    return p2p ? xstrdup(p2p) : NULL;
}

/* Rule 2: a collective (not send/recv) in any frame of the thread. */
static char *thread_collective(const struct thread *t)
{
    for (size_t i = 0; i < t->n; i++) {
        bool p2p = false;
        const struct frame *f = &t->f[i];
        const char *coll = in_torch(f, "torch/distributed/") || is_dist_native(f) ? collective_of(f->name, &p2p) : NULL;
        if (coll && !p2p) return xstrdup(coll);
    }
    return NULL;
}

/* The interpreter's own C functions, as gdb sees a Python process without its debug symbols:
 * exported ones by name, static ones as "??". */
static bool is_interpreter(const struct frame *f)
{
    return starts(f->name, "Py") || starts(f->name, "_Py") || starts(f->name, "??") ||
           starts(f->name, "cfunction_") || starts(f->name, "method_vectorcall");
}

/* "__GI___clock_nanosleep" -> "clock_nanosleep", "clock_nanosleep@GLIBC_2.2.5" too. */
static char *libc_name(const char *name)
{
    if (starts(name, "__GI_")) name += 5;
    while (*name == '_') name++;
    char *s = xstrndup(name, strcspn(name, "@"));
    char *c = clip(s);
    free(s);
    return c;
}

/* Rules 3 and 4 on the main thread. A Python process under gdb shows the interpreter's frames
 * only: then the call it waits in, "clock_nanosleep (python)". */
static char *fallback_frame(const struct thread *t)
{
    bool python = false;
    for (size_t i = 0; i < t->n; i++)
        python = python || starts(t->f[i].name, "_PyEval_") || starts(t->f[i].name, "Py_");
    for (size_t i = 0; i < t->n; i++) {
        const struct frame *f = &t->f[i];
        if (f->kernel && strcmp(f->where, "wchan") == 0) return xasprintf("%s (kernel)", f->name);
        if (f->kernel || f->python || is_system(f) || (python && is_interpreter(f))) continue;
        /* Waiting for a work object whose collective runs elsewhere, unnamed (static code). */
        if (is_dist_native(f) && strstr(f->name, "::wait")) {
            char *w = xasprintf("%s (a collective)", f->name), *c = clip(w);
            free(w);
            return c;
        }
        return clip(f->name);
    }
    for (size_t i = 0; python && i < t->n; i++)
        if (!starts(t->f[i].name, "??") && t->f[i].name[0]) {
            char *call = libc_name(t->f[i].name), *s = xasprintf("%s (python)", call);
            free(call);
            return s;
        }
    for (size_t i = 0; i < t->n; i++)
        if (t->f[i].python) return python_phrase(&t->f[i]);
    for (size_t i = 0; i < t->n; i++)   /* /proc without a wait channel: its state */
        if (t->f[i].kernel) return xasprintf("state %s", t->f[i].name);
    return NULL;
}

char *stack_where(const char *tool, const char *text, int pid)
{
    struct dump d = {0};
    char *copy, *res = NULL;
    char **lines = NULL;
    size_t n = 0;
    if (!text || !*text) return NULL;
    if (!tool) tool = guess_tool(text);
    copy = xstrdup(text);
    for (char *p = copy; p;) {
        char *nl = strchr(p, '\n');
        if (nl) *nl = '\0';
        size_t len = strlen(p);
        if (len && p[len - 1] == '\r') p[len - 1] = '\0';
        lines = xrealloc(lines, (n + 1) * sizeof *lines);
        lines[n++] = p;
        p = nl ? nl + 1 : NULL;
    }
    if (strcmp(tool, "gdb") == 0) read_gdb(&d, lines, n, pid);
    else if (strcmp(tool, "proc") == 0) read_proc(&d, lines, n, pid);
    else read_pyspy(&d, lines, n, pid);
    const struct thread *main = NULL;
    for (size_t i = 0; i < d.n && !main; i++)
        if (d.t[i].main) main = &d.t[i];
    if (!main && d.n) main = &d.t[0];
    if (main) res = telling_frame(main);
    for (size_t i = 0; i < d.n && !res; i++)
        if (&d.t[i] != main) res = thread_collective(&d.t[i]);
    if (!res && main) res = fallback_frame(main);
    dump_free(&d);
    free(lines);
    free(copy);
    return res;
}

/* ---- grouping ----------------------------------------------------------------------------- */

struct group {
    const char *where;   /* NULL: unknown */
    int *ranks;
    size_t n;
};

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static int cmp_group(const void *a, const void *b)
{
    const struct group *x = a, *y = b;
    if (x->n != y->n) return x->n > y->n ? -1 : 1;
    return cmp_int(&x->ranks[0], &y->ranks[0]);
}

/* "0-6,8-15" (sorted ranks). */
static void add_ranges(struct strbuf *sb, const int *r, size_t n)
{
    for (size_t i = 0; i < n;) {
        size_t k = i;
        while (k + 1 < n && r[k + 1] == r[k] + 1) k++;
        if (i) strbuf_adds(sb, ",");
        if (k == i) strbuf_addf(sb, "%d", r[i]);
        else strbuf_addf(sb, "%d-%d", r[i], r[k]);
        i = k + 1;
    }
}

static bool same(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

char *stack_where_summary(const int *ranks, char *const *where, size_t n)
{
    struct group *g = xcalloc(n ? n : 1, sizeof *g);
    size_t ng = 0;
    struct strbuf sb;
    for (size_t i = 0; i < n; i++) {
        size_t k = 0;
        while (k < ng && !same(g[k].where, where[i])) k++;
        if (k == ng) g[ng++].where = where[i];
        g[k].ranks = xrealloc(g[k].ranks, (g[k].n + 1) * sizeof *g[k].ranks);
        g[k].ranks[g[k].n++] = ranks[i];
    }
    for (size_t k = 0; k < ng; k++) qsort(g[k].ranks, g[k].n, sizeof *g[k].ranks, cmp_int);
    qsort(g, ng, sizeof *g, cmp_group);
    strbuf_init(&sb);
    for (size_t k = 0; k < ng; k++) {
        const char *in = g[k].where ? " in " : " ", *what = g[k].where ? g[k].where : "where unknown";
        if (k) strbuf_adds(&sb, ", ");
        if (g[k].n == 1) {
            strbuf_addf(&sb, "rank %d%s%s", g[k].ranks[0], in, what);
        } else if (ng == 1) {
            strbuf_addf(&sb, "all %zu ranks%s%s", g[k].n, in, what);
        } else {
            strbuf_addf(&sb, "%zu ranks%s%s (", g[k].n, in, what);
            add_ranges(&sb, g[k].ranks, g[k].n);
            strbuf_adds(&sb, ")");
        }
        free(g[k].ranks);
    }
    free(g);
    return sb.buf ? sb.buf : xstrdup("");
}
