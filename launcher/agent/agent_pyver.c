/* python3 and torch versions from the installed files (agent_pyver.h). Nothing here runs a
 * program: executables are only read (never run from wherever they lie), every read is
 * bounded, and whatever does not fit the layouts below sends the caller to the probe. */
#include "agent_pyver.h"

#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "agent_exec.h"
#include "util/util.h"

#define SCAN_MAX ((off_t)256 << 20) /* a python executable is 5-30 MB; libpython as much */
#define SMALL_MAX 16384             /* shims, pyvenv.cfg, version.py, .pth, patchlevel.h */

static bool need_probe(struct agent_pyver *pv, const char *why)
{
    pv->probe = true;
    pv->why = why;
    return false;
}

/* The stat signature of path, for the key: a replaced or rewritten file changes it. */
static void key_file(struct strbuf *k, const char *what, const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        strbuf_addf(k, "%s %s -\n", what, path);
        return;
    }
    strbuf_addf(k, "%s %s %llu:%llu:%lld:%lld.%09ld:%lld.%09ld\n", what, path, (unsigned long long)st.st_dev,
                (unsigned long long)st.st_ino, (long long)st.st_size, (long long)st.st_mtim.tv_sec,
                st.st_mtim.tv_nsec, (long long)st.st_ctim.tv_sec, st.st_ctim.tv_nsec);
}

/* Up to SMALL_MAX bytes of a regular file, NUL-terminated; NULL when absent or not one. */
static char *read_small(const char *path)
{
    int fd = util_open_read(path);
    struct strbuf sb;
    if (fd < 0) return NULL;
    strbuf_init(&sb);
    if (util_read_fd(fd, &sb, SMALL_MAX) != 0) strbuf_done(&sb);
    close(fd);
    return sb.buf ? sb.buf : (sb.len == 0 ? xstrdup("") : NULL);
}

static bool is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool is_file(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* ---- the version inside the executable ------------------------------------------------- */

char *agent_pyver_scan_file(const char *path, const char *minor)
{
    int fd = util_open_read(path);
    struct stat st;
    char needle[32], *found = NULL;
    bool many = false;
    if (fd < 0) return NULL;
    if (fstat(fd, &st) != 0 || st.st_size < 16) {
        close(fd);
        return NULL;
    }
    size_t len = (size_t)(st.st_size < SCAN_MAX ? st.st_size : SCAN_MAX);
    const char *buf = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (buf == MAP_FAILED) return NULL;
    /* PY_VERSION ("3.11.2", "3.13.0rc1", "3.14.0+") is a string of its own in .rodata: a NUL
     * before it, digits, an optional suffix, a NUL after */
    int nl = snprintf(needle, sizeof needle, "%s.", minor ? minor : "3");
    for (const char *p = buf, *end = buf + len; !many && p < end;) {
        const char *hit = memmem(p, (size_t)(end - p), needle, (size_t)nl);
        if (!hit) break;
        p = hit + 1;
        if (hit == buf || hit[-1] != '\0') continue;
        const char *q = hit + nl, *num_end;
        if (!minor) { /* "3." then the minor's digits and a dot */
            while (q < end && isdigit((unsigned char)*q)) q++;
            if (q == hit + nl || q >= end || *q++ != '.') continue;
        }
        const char *micro = q;
        while (q < end && isdigit((unsigned char)*q) && q - micro < 4) q++;
        if (q == micro) continue;
        num_end = q;
        while (q < end && q - num_end < 8 && (isalnum((unsigned char)*q) || *q == '+')) q++;
        if (q >= end || *q != '\0') continue;
        char *v = xstrndup(hit, (size_t)(num_end - hit));
        if (!found) found = v;
        else {
            if (strcmp(found, v) != 0) many = true;
            free(v);
        }
    }
    munmap((void *)buf, len);
    if (many) {
        free(found);
        return NULL;
    }
    return found;
}

/* "#define PY_VERSION "3.11.2"" of a patchlevel.h, numeric part only. */
static char *patchlevel_version(const char *path)
{
    char *s = read_small(path), *v = NULL, *p;
    if (s && (p = strstr(s, "#define PY_VERSION")) && (p = strchr(p, '"'))) {
        size_t n = strspn(p + 1, "0123456789.");
        if (n >= 5) v = xstrndup(p + 1, n);
    }
    free(s);
    return v;
}

/* ---- torch ------------------------------------------------------------------------------- */

char *agent_pyver_torch_file(const char *path)
{
    char *s = read_small(path), *v = NULL;
    for (char *line = s; line && *line && !v;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = '\0';
        if (strncmp(line, "__version__", 11) == 0 && strchr(line, '=')) {
            char *x = agent_exec_clean(strchr(line, '=') + 1);
            size_t n = strlen(x);
            /* the probe's strip('\'"'): quotes off both ends */
            while (n && (x[n - 1] == '\'' || x[n - 1] == '"')) x[--n] = '\0';
            while (*x == '\'' || *x == '"') x++;
            if (*x) v = xstrdup(x);
        }
        line = nl ? nl + 1 : NULL;
    }
    free(s);
    return v;
}

/* ---- sys.path without python ------------------------------------------------------------- */

struct paths {
    char **v;
    size_t n;
};

static void paths_add(struct paths *p, char *dir) /* takes dir */
{
    p->v = xrealloc(p->v, (p->n + 1) * sizeof *p->v);
    p->v[p->n++] = dir;
}

/* site.addsitedir: the directory, then the directories its .pth files name (lines that are
 * not comments or `import` lines, relative to it, when they exist). */
static void add_site(struct paths *p, struct strbuf *k, const char *dir)
{
    if (!is_dir(dir)) return;
    key_file(k, "site", dir); /* a package or .pth file added or removed changes its mtime */
    paths_add(p, xstrdup(dir));
    DIR *d = opendir(dir);
    struct dirent *e;
    char **pth = NULL;
    size_t npth = 0;
    while (d && (e = readdir(d)) && npth < 256) {
        size_t l = strlen(e->d_name);
        if (l > 4 && strcmp(e->d_name + l - 4, ".pth") == 0 && e->d_name[0] != '.') {
            pth = xrealloc(pth, (npth + 1) * sizeof *pth);
            pth[npth++] = xstrdup(e->d_name);
        }
    }
    if (d) closedir(d);
    /* site.py reads them in name order */
    for (size_t i = 1; i < npth; i++)
        for (size_t j = i; j > 0 && strcmp(pth[j - 1], pth[j]) > 0; j--) {
            char *t = pth[j];
            pth[j] = pth[j - 1];
            pth[j - 1] = t;
        }
    for (size_t i = 0; i < npth; i++) {
        char *f = xasprintf("%s/%s", dir, pth[i]), *s = read_small(f);
        key_file(k, "pth", f);
        for (char *line = s; line && *line;) {
            char *nl = strchr(line, '\n');
            if (nl) *nl = '\0';
            char *x = agent_exec_clean(line);
            if (*x && *x != '#' && strncmp(x, "import ", 7) != 0 && strncmp(x, "import\t", 7) != 0) {
                char *sub = x[0] == '/' ? xstrdup(x) : xasprintf("%s/%s", dir, x);
                if (is_dir(sub)) paths_add(p, sub);
                else free(sub);
            }
            line = nl ? nl + 1 : NULL;
        }
        free(s);
        free(f);
        free(pth[i]);
    }
    free(pth);
}

/* The site-packages directories of one prefix, in the order the layouts we know search them:
 * Debian's dist-packages, then the upstream (and Fedora's lib64) site-packages. */
static void add_prefix_sites(struct paths *p, struct strbuf *k, const char *prefix, const char *xy)
{
    char *c[5];
    int n = 0;
    if (strcmp(prefix, "/usr") == 0) c[n++] = xasprintf("/usr/local/lib/python%s/dist-packages", xy);
    c[n++] = xasprintf("%s/lib/python3/dist-packages", prefix);
    c[n++] = xasprintf("%s/lib/python%s/dist-packages", prefix, xy);
    c[n++] = xasprintf("%s/lib64/python%s/site-packages", prefix, xy);
    c[n++] = xasprintf("%s/lib/python%s/site-packages", prefix, xy);
    for (int i = 0; i < n; i++) {
        add_site(p, k, c[i]);
        free(c[i]);
    }
}

/* Where python -c would look for torch, in order: its working directory, PYTHONPATH, the user's
 * site-packages, the venv's, the installation's. */
static void search_path(struct paths *p, struct strbuf *k, const char *exe, const char *prefix, const char *xy)
{
    char cwd[PATH_MAX];
    const char *pp = getenv("PYTHONPATH"), *home = getenv("HOME");
    char *dir = xstrdup(exe), *slash, *cfg = NULL, *text = NULL;
    bool venv = false, system_site = true;
    if (getcwd(cwd, sizeof cwd)) {
        strbuf_addf(k, "cwd %s\n", cwd);
        paths_add(p, xstrdup(cwd));
    }
    strbuf_addf(k, "PYTHONPATH %s\nPYTHONNOUSERSITE %s\nHOME %s\n", pp ? pp : "-",
                getenv("PYTHONNOUSERSITE") ? getenv("PYTHONNOUSERSITE") : "-", home ? home : "-");
    for (const char *s = pp; s && *s;) {
        const char *e = strchr(s, ':');
        size_t l = e ? (size_t)(e - s) : strlen(s);
        if (l) paths_add(p, xstrndup(s, l));
        s = e ? e + 1 : NULL;
    }
    /* a venv: pyvenv.cfg beside the executable or one directory up (not following links) */
    for (int up = 0; up < 2 && !venv && (slash = strrchr(dir, '/')); up++) {
        *slash = '\0';
        free(cfg);
        cfg = xasprintf("%s/pyvenv.cfg", dir);
        key_file(k, "pyvenv", cfg);
        if ((text = read_small(cfg))) venv = true;
        else free(text);
    }
    if (venv) {
        system_site = strstr(text, "include-system-site-packages = true") != NULL;
    }
    if (home && system_site && !getenv("PYTHONNOUSERSITE")) {
        char *u = xasprintf("%s/.local/lib/python%s/site-packages", home, xy);
        add_site(p, k, u);
        free(u);
    }
    if (venv) add_prefix_sites(p, k, dir, xy);
    if (system_site) add_prefix_sites(p, k, prefix, xy);
    free(text);
    free(cfg);
    free(dir);
}

/* ---- the interpreter python3 names ------------------------------------------------------ */

/* A pyenv shim's PYENV_ROOT ("export PYENV_ROOT=\"/home/u/.pyenv\""), or NULL: not a shim. */
static char *pyenv_root(const char *text)
{
    const char *p = strstr(text, "export PYENV_ROOT=\"");
    if (!p || !strstr(text, "/libexec/pyenv\" exec")) return NULL;
    p += 19;
    const char *e = strchr(p, '"');
    return e && e > p && p[0] == '/' ? xstrndup(p, (size_t)(e - p)) : NULL;
}

/* pyenv's version names: PYENV_VERSION, else the nearest .python-version from the working
 * directory (PYENV_DIR) up, else PYENV_ROOT/version, else "system". Blank-separated. */
static char *pyenv_names(const char *root, struct strbuf *k)
{
    const char *env = getenv("PYENV_VERSION"), *start = getenv("PYENV_DIR");
    char cwd[PATH_MAX], *v = NULL;
    strbuf_addf(k, "PYENV_VERSION %s\nPYENV_DIR %s\n", env ? env : "-", start ? start : "-");
    if (env && env[0]) return xstrdup(env);
    if (!start && getcwd(cwd, sizeof cwd)) start = cwd;
    char *dir = start ? xstrdup(start) : NULL;
    while (dir && !v) {
        char *f = xasprintf("%s/.python-version", dir[0] ? dir : "");
        key_file(k, "pyenv-local", f);
        v = read_small(f);
        free(f);
        char *slash = strrchr(dir, '/');
        if (!slash || !dir[0]) break;
        *slash = '\0';
    }
    free(dir);
    if (!v) {
        char *f = xasprintf("%s/version", root);
        key_file(k, "pyenv-global", f);
        v = read_small(f);
        free(f);
    }
    return v ? v : xstrdup("system");
}

static bool elf_file(const char *path)
{
    char head[4] = {0};
    int fd = util_open_read(path);
    bool elf = fd >= 0 && read(fd, head, 4) == 4 && memcmp(head, "\177ELF", 4) == 0;
    if (fd >= 0) close(fd);
    return elf;
}

/* The newest installed PYENV_ROOT/versions/NAME.* for a prefix name ("3.11" -> 3.11.7). */
static char *pyenv_latest(const char *versions, const char *name)
{
    DIR *d = opendir(versions);
    struct dirent *e;
    char *best = NULL;
    size_t nl = strlen(name);
    while (d && (e = readdir(d))) {
        if (strncmp(e->d_name, name, nl) != 0 || e->d_name[nl] != '.' || !isdigit((unsigned char)e->d_name[nl + 1]) ||
            e->d_name[nl + 1 + strspn(e->d_name + nl + 1, "0123456789.")] != '\0')
            continue;
        if (!best || strverscmp(e->d_name, best) > 0) {
            free(best);
            best = xstrdup(e->d_name);
        }
    }
    if (d) closedir(d);
    return best;
}

/* PATH without the shims' directory, as pyenv gives the "system" version. */
static char *path_without(const char *path, const char *drop)
{
    struct strbuf sb;
    strbuf_init(&sb);
    for (const char *s = path; s;) {
        const char *e = strchr(s, ':');
        size_t l = e ? (size_t)(e - s) : strlen(s);
        if (!(l == strlen(drop) && strncmp(s, drop, l) == 0)) {
            if (sb.len) strbuf_adds(&sb, ":");
            strbuf_add(&sb, s, l);
        }
        s = e ? e + 1 : NULL;
    }
    return sb.buf ? sb.buf : xstrdup("");
}

/* The executable a pyenv shim would exec for python3, or NULL (then the probe runs). */
static char *pyenv_follow(const char *root, struct strbuf *k)
{
    char *names = pyenv_names(root, k), *exe = NULL, *save = NULL;
    char *versions = xasprintf("%s/versions", root), *shims = xasprintf("%s/shims", root);
    for (char *n = strtok_r(names, " \t\r\n:", &save); n && !exe; n = strtok_r(NULL, " \t\r\n:", &save)) {
        if (n[0] == '#' || strchr(n, '/') || strcmp(n, "..") == 0) break; /* a comment, or odd */
        if (strcmp(n, "system") == 0) {
            const char *path = getenv("PATH");
            char *rest = path_without(path ? path : "", shims);
            exe = agent_exec_resolve("python3", rest);
            free(rest);
        } else {
            char *c = xasprintf("%s/%s/bin/python3", versions, n), *latest;
            if (access(c, X_OK) != 0 && (latest = pyenv_latest(versions, n))) {
                free(c);
                c = xasprintf("%s/%s/bin/python3", versions, latest);
                free(latest);
            }
            if (access(c, X_OK) == 0) exe = c;
            else free(c);
        }
    }
    free(names);
    free(versions);
    free(shims);
    return exe;
}

void agent_pyver_locate(struct agent_pyver *pv)
{
    struct strbuf k;
    struct paths sp = {0};
    char *found = agent_exec_resolve("python3", NULL), *text = NULL;
    *pv = (struct agent_pyver){0};
    strbuf_init(&k);
    if (!found) goto out; /* no python3: null, as the probe found */
    /* not PATH itself: the file it led to is the key's (a new directory in it that changes
     * nothing must not cost a probe) */
    struct utsname u;
    strbuf_addf(&k, "pyver 1\nhost %s\n", uname(&u) == 0 ? u.nodename : "-");
    key_file(&k, "found", found);
    if (getenv("PYTHONHOME")) {
        need_probe(pv, "PYTHONHOME is set");
        goto out;
    }
    if (elf_file(found)) {
        pv->exe = found;
        found = NULL;
    } else {
        char *root = (text = read_small(found)) ? pyenv_root(text) : NULL;
        bool shim = root != NULL;
        if (shim) pv->exe = pyenv_follow(root, &k);
        free(root);
        if (!pv->exe || !elf_file(pv->exe)) {
            free(pv->exe);
            pv->exe = NULL;
            need_probe(pv, shim ? "a pyenv shim whose version could not be followed" : "python3 is a script");
            goto out;
        }
    }
    pv->real = realpath(pv->exe, NULL);
    if (!pv->real) {
        need_probe(pv, "python3 cannot be resolved");
        goto out;
    }
    key_file(&k, "exe", pv->exe);
    key_file(&k, "real", pv->real);
    /* X.Y from the name (python3.11), else from the version string */
    const char *base = strrchr(pv->real, '/') + 1;
    if (sscanf(base, "python%15[0-9.]", pv->xy) != 1 || !strchr(pv->xy, '.')) pv->xy[0] = '\0';
    size_t xl = strlen(pv->xy);
    if (xl && pv->xy[xl - 1] == '.') pv->xy[xl - 1] = '\0';
    if (!pv->xy[0]) {
        /* python3 -> python3 (no minor in any name): the version string says it, once */
        char *v = agent_pyver_scan_file(pv->real, NULL);
        if (v) snprintf(pv->xy, sizeof pv->xy, "%.*s", (int)strcspn(v + 2, ".") + 2, v);
        free(v);
    }
    if (!pv->xy[0]) {
        need_probe(pv, "no version string in the executable");
        goto out;
    }
    /* the installation's prefix: two levels up, where lib/pythonX.Y/os.py is (python's landmark) */
    pv->prefix = xstrdup(pv->real);
    for (int up = 0; up < 2; up++) {
        char *slash = strrchr(pv->prefix, '/');
        if (slash) *slash = '\0';
    }
    char *landmark = xasprintf("%s/lib/python%s/os.py", pv->prefix, pv->xy);
    bool std = is_file(landmark);
    free(landmark);
    if (!std) {
        need_probe(pv, "no standard library beside the executable");
        goto out;
    }
    for (int i = 0; i < 3; i++) {
        char *f = i == 0 ? xasprintf("%s/lib/libpython%s.so.1.0", pv->prefix, pv->xy)
                  : i == 1 ? xasprintf("%s/lib64/libpython%s.so.1.0", pv->prefix, pv->xy)
                           : xasprintf("%s/include/python%s/patchlevel.h", pv->prefix, pv->xy);
        key_file(&k, i < 2 ? "libpython" : "patchlevel", f);
        free(f);
    }
    search_path(&sp, &k, pv->exe, pv->prefix, pv->xy);
    for (size_t i = 0; i < sp.n && !pv->torch_file; i++) {
        char *init = xasprintf("%s/torch/__init__.py", sp.v[i]);
        if (is_file(init)) {
            pv->torch_file = xasprintf("%s/torch/version.py", sp.v[i]);
            key_file(&k, "torch", pv->torch_file);
        }
        free(init);
    }
    if (!pv->torch_file) need_probe(pv, "no torch in the standard places");
out:
    /* cached only when the key names everything the answer came from */
    if (k.len && pv->exe) pv->key = xstrdup(k.buf);
    strbuf_done(&k);
    for (size_t i = 0; i < sp.n; i++) free(sp.v[i]);
    free(sp.v);
    free(found);
    free(text);
}

void agent_pyver_read(struct agent_pyver *pv)
{
    if (pv->probe || !pv->exe) return;
    pv->python3 = agent_pyver_scan_file(pv->real, pv->xy);
    if (!pv->python3) { /* a shared build: the string is in libpython (lib64 on Fedora), or the
                          * headers say it */
        char *lib = xasprintf("%s/lib/libpython%s.so.1.0", pv->prefix, pv->xy);
        char *lib64 = xasprintf("%s/lib64/libpython%s.so.1.0", pv->prefix, pv->xy);
        char *ph = xasprintf("%s/include/python%s/patchlevel.h", pv->prefix, pv->xy);
        pv->python3 = agent_pyver_scan_file(lib, pv->xy);
        if (!pv->python3) pv->python3 = agent_pyver_scan_file(lib64, pv->xy);
        if (!pv->python3) pv->python3 = patchlevel_version(ph);
        free(lib);
        free(lib64);
        free(ph);
    }
    /* the probe prints major.minor.micro only */
    if (pv->python3) pv->python3[strspn(pv->python3, "0123456789.")] = '\0';
    pv->torch = agent_pyver_torch_file(pv->torch_file);
    if (!pv->python3) need_probe(pv, "no version string in the executable or libpython");
    else if (!pv->torch) need_probe(pv, "torch without a readable version.py");
    if (pv->probe) {
        free(pv->python3);
        free(pv->torch);
        pv->python3 = pv->torch = NULL;
    }
}

void agent_pyver_done(struct agent_pyver *pv)
{
    free(pv->python3);
    free(pv->torch);
    free(pv->exe);
    free(pv->real);
    free(pv->prefix);
    free(pv->torch_file);
    free(pv->key);
    *pv = (struct agent_pyver){0};
}
