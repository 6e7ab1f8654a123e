/* Unit tests for the facts' python3 and torch versions read from files (agent_pyver.c) and
 * their cache on the node (agent_pycache.c), on fake installations in a temporary directory:
 * a python3.11 whose "executable" holds its version string, a Debian-like torch, a venv, a
 * PYTHONPATH, a pyenv shim; the cache's hit, its invalidation by a changed version.py, and its
 * refusal of a file that is not ours alone. Runs as root (the chown to another uid). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/agent_pycache.h"
#include "agent/agent_pyver.h"
#include "tap.h"
#include "util/util.h"

static char T[64];

static void put(const char *rel, const void *data, size_t len, mode_t mode)
{
    char *p = xasprintf("%s/%s", T, rel), *d = xstrdup(p);
    *strrchr(d, '/') = '\0';
    util_mkdir_p(d);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, mode);
    if (fd < 0 || write(fd, data, len) != (ssize_t)len) printf("# cannot write %s: %s\n", p, strerror(errno));
    if (fd >= 0) close(fd);
    chmod(p, mode);
    free(p);
    free(d);
}

static void puts_(const char *rel, const char *text)
{
    put(rel, text, strlen(text), 0644);
}

/* An "executable": the ELF magic, then the version string among others, as in .rodata. */
static void fake_python(const char *rel, const char *version)
{
    char buf[4096];
    memset(buf, 'x', sizeof buf);
    memcpy(buf, "\177ELF", 4);
    const char *noise[] = {"3.11", "libpython3.11.so", "3.11.", "Python 3.11.0 not this", "2.7.18"};
    size_t at = 100;
    for (size_t i = 0; i < sizeof noise / sizeof noise[0]; i++) {
        buf[at++] = '\0';
        memcpy(buf + at, noise[i], strlen(noise[i]));
        at += strlen(noise[i]);
    }
    buf[at++] = '\0';
    memcpy(buf + at, version, strlen(version));
    at += strlen(version);
    buf[at++] = '\0';
    put(rel, buf, sizeof buf, 0755);
}

static void link_(const char *target, const char *rel)
{
    char *p = xasprintf("%s/%s", T, rel);
    unlink(p);
    if (symlink(target, p) != 0) printf("# symlink %s: %s\n", p, strerror(errno));
    free(p);
}

static void env_for(const char *path_rel)
{
    char *path = xasprintf("%s/%s:/nonexistent", T, path_rel), *home = xasprintf("%s/home", T);
    setenv("PATH", path, 1);
    setenv("HOME", home, 1);
    free(path);
    free(home);
}

static void read_all(struct agent_pyver *pv)
{
    agent_pyver_locate(pv);
    agent_pyver_read(pv);
}

static void test_debian_layout(void)
{
    struct agent_pyver pv;
    fake_python("usr/bin/python3.11", "3.11.9");
    link_("python3.11", "usr/bin/python3");
    puts_("usr/lib/python3.11/os.py", "# landmark\n");
    puts_("usr/lib/python3/dist-packages/torch/__init__.py", "");
    puts_("usr/lib/python3/dist-packages/torch/version.py", "__version__ = '2.1.2+cu121'\ndebug = False\n");
    env_for("usr/bin");
    read_all(&pv);
    CHECK(!pv.probe);
    CHECK_STR(pv.python3, "3.11.9");
    CHECK_STR(pv.torch, "2.1.2+cu121");
    CHECK(pv.key != NULL);
    char *key = pv.key ? xstrdup(pv.key) : NULL;
    agent_pyver_done(&pv);

    /* a new torch: the key changes (version.py's signature), and the version read is the new one */
    puts_("usr/lib/python3/dist-packages/torch/version.py", "__version__ = \"2.4.0\"\n");
    read_all(&pv);
    CHECK_STR(pv.torch, "2.4.0");
    CHECK(key && pv.key && strcmp(key, pv.key) != 0);
    agent_pyver_done(&pv);
    free(key);
}

static void test_pythonpath_and_venv(void)
{
    struct agent_pyver pv;
    /* PYTHONPATH comes before the site directories */
    char *pp = xasprintf("%s/pp", T);
    puts_("pp/torch/__init__.py", "");
    puts_("pp/torch/version.py", "__version__ = '9.0.0'\n");
    setenv("PYTHONPATH", pp, 1);
    env_for("usr/bin");
    read_all(&pv);
    CHECK_STR(pv.torch, "9.0.0");
    agent_pyver_done(&pv);
    unsetenv("PYTHONPATH");
    free(pp);

    /* a venv without the system's packages: its own torch, or none (then the probe decides) */
    char *base = xasprintf("%s/usr/bin/python3.11", T);
    util_mkdir_p(xasprintf("%s/venv/bin", T));
    link_(base, "venv/bin/python3");
    puts_("venv/pyvenv.cfg", "home = /usr/bin\ninclude-system-site-packages = false\nversion = 3.11.9\n");
    env_for("venv/bin");
    read_all(&pv);
    CHECK(pv.probe); /* no torch in the venv: not the system's */
    CHECK_STR(pv.why, "no torch in the standard places");
    agent_pyver_done(&pv);
    puts_("venv/lib/python3.11/site-packages/torch/__init__.py", "");
    puts_("venv/lib/python3.11/site-packages/torch/version.py", "__version__ = '1.0.0'\n");
    read_all(&pv);
    CHECK(!pv.probe);
    CHECK_STR(pv.python3, "3.11.9");
    CHECK_STR(pv.torch, "1.0.0");
    agent_pyver_done(&pv);
    /* with the system's packages, the venv's own still come first */
    puts_("venv/pyvenv.cfg", "home = /usr/bin\ninclude-system-site-packages = true\n");
    read_all(&pv);
    CHECK_STR(pv.torch, "1.0.0");
    agent_pyver_done(&pv);
    free(base);
}

static void test_pyenv_shim(void)
{
    struct agent_pyver pv;
    char *shim = xasprintf("#!/usr/bin/env bash\nset -e\nexport PYENV_ROOT=\"%s/pyenv\"\n"
                           "exec \"%s/pyenv/libexec/pyenv\" exec \"$program\" \"$@\"\n", T, T);
    put("pyenv/shims/python3", shim, strlen(shim), 0755);
    free(shim);
    fake_python("pyenv/versions/3.12.4/bin/python3.12", "3.12.4");
    link_("python3.12", "pyenv/versions/3.12.4/bin/python3");
    puts_("pyenv/versions/3.12.4/lib/python3.12/os.py", "");
    puts_("pyenv/versions/3.12.4/lib/python3.12/site-packages/torch/__init__.py", "");
    puts_("pyenv/versions/3.12.4/lib/python3.12/site-packages/torch/version.py", "__version__ = '2.5.1'\n");
    puts_("pyenv/version", "3.12\n"); /* a prefix: the newest 3.12.x installed */
    unsetenv("PYENV_VERSION");
    setenv("PYENV_DIR", "/", 1);
    env_for("pyenv/shims");
    read_all(&pv);
    CHECK(!pv.probe);
    CHECK_STR(pv.python3, "3.12.4");
    CHECK_STR(pv.torch, "2.5.1");
    agent_pyver_done(&pv);
    /* PYENV_VERSION=system: the next python3 on PATH, past the shims */
    setenv("PYENV_VERSION", "system", 1);
    char *path = xasprintf("%s/pyenv/shims:%s/usr/bin", T, T);
    setenv("PATH", path, 1);
    free(path);
    read_all(&pv);
    CHECK_STR(pv.python3, "3.11.9");
    agent_pyver_done(&pv);
    unsetenv("PYENV_VERSION");
    unsetenv("PYENV_DIR");
    /* a script that is no shim of ours: the probe */
    const char *script = "#!/bin/sh\nexec /usr/bin/python3 \"$@\"\n";
    put("script/python3", script, strlen(script), 0755);
    env_for("script");
    read_all(&pv);
    CHECK(pv.probe);
    CHECK(pv.key == NULL); /* its answer depends on what we cannot see: never cached */
    agent_pyver_done(&pv);
}

/* A shared build (pyenv's --enable-shared, Fedora): the version string is in libpython. */
static void test_shared_libpython(void)
{
    struct agent_pyver pv;
    char exe[64] = "\177ELF no version here";
    put("shared/bin/python3.10", exe, sizeof exe, 0755);
    link_("python3.10", "shared/bin/python3");
    puts_("shared/lib/python3.10/os.py", "");
    fake_python("shared/lib64/libpython3.10.so.1.0", "3.10.14");
    puts_("shared/lib/python3.10/site-packages/torch/__init__.py", "");
    puts_("shared/lib/python3.10/site-packages/torch/version.py", "__version__ = '2.0.1'\n");
    env_for("shared/bin");
    read_all(&pv);
    CHECK(!pv.probe);
    CHECK_STR(pv.python3, "3.10.14");
    CHECK_STR(pv.torch, "2.0.1");
    agent_pyver_done(&pv);
}

static void test_scan(void)
{
    char *p = xasprintf("%s/scan", T), *v;
    fake_python("scan", "3.13.0rc1");
    v = agent_pyver_scan_file(p, "3.13"); /* the numeric part, as sys.version_info[:3] */
    CHECK_STR(v, "3.13.0");
    free(v);
    v = agent_pyver_scan_file(p, NULL);
    CHECK_STR(v, "3.13.0");
    free(v);
    v = agent_pyver_scan_file(p, "3.11"); /* "3.11." alone, and "3.11.0 not this": no version */
    CHECK(v == NULL);
    free(v);
    /* two different versions: none */
    char two[64] = "\177ELF\0" "3.10.1\0" "3.10.2\0";
    put("scan", two, sizeof two, 0755);
    CHECK(agent_pyver_scan_file(p, "3.10") == NULL);
    free(p);
}

static void test_cache(void)
{
    char *tmp = xasprintf("%s/tmp", T), *v1 = NULL, *v2 = NULL;
    util_mkdir_p(tmp);
    setenv("TMPDIR", tmp, 1);
    setenv("PATH", "/usr/bin:/bin", 1);
    char *exe = xasprintf("%s/fake/bin/python3", T); /* unique: no file of an earlier run */
    CHECK_INT(agent_pycache_get(exe, "k1", &v1, &v2), 0);
    agent_pycache_put(exe, "k1", "3.11.2", NULL);
    CHECK_INT(agent_pycache_get(exe, "k1", &v1, &v2), 1);
    CHECK_STR(v1, "3.11.2");
    CHECK(v2 == NULL);
    free(v1);
    CHECK_INT(agent_pycache_get(exe, "k2", &v1, &v2), 0); /* another key: a changed install */
    /* the one file in the cache directory, 0600 in a 0700 directory */
    char *dir = xasprintf("%s/ddptop-%u/cache", tmp, (unsigned)geteuid()), *file = NULL;
    struct stat st;
    CHECK(stat(dir, &st) == 0 && (st.st_mode & 0777) == 0700);
    char *cmd = xasprintf("ls %s | grep -v '\\.lock$'", dir);
    FILE *ls = popen(cmd, "r");
    char name[256] = "";
    if (ls && fgets(name, sizeof name, ls)) name[strcspn(name, "\n")] = '\0';
    if (ls) pclose(ls);
    file = xasprintf("%s/%s", dir, name);
    CHECK(stat(file, &st) == 0 && (st.st_mode & 0777) == 0600);
    /* readable by others: ignored */
    chmod(file, 0644);
    CHECK_INT(agent_pycache_get(exe, "k1", &v1, &v2), 0);
    chmod(file, 0600);
    CHECK_INT(agent_pycache_get(exe, "k1", &v1, &v2), 1);
    free(v1);
    /* another user's file (planted): ignored */
    CHECK(chown(file, 65534, 65534) == 0);
    CHECK_INT(agent_pycache_get(exe, "k1", &v1, &v2), 0);
    /* a link to a file of ours: ignored */
    unlink(file);
    char *real = xasprintf("%s/real", T);
    const char *planted = "{\"key\":\"k1\",\"python3\":\"6.6.6\",\"torch\":null}";
    put("real", planted, strlen(planted), 0600);
    CHECK(symlink(real, file) == 0);
    CHECK_INT(agent_pycache_get(exe, "k1", &v1, &v2), 0);
    unlink(file);
    /* a cache directory of another user: not used (and no answer from it; the next base,
     * /tmp/ddptop-UID, has no file for this interpreter) */
    agent_pycache_put(exe, "k1", "3.11.2", NULL);
    CHECK(chown(dir, 65534, 65534) == 0);
    CHECK_INT(agent_pycache_get(exe, "k1", &v1, &v2), 0);
    CHECK(chown(dir, 0, 0) == 0);
    CHECK_INT(agent_pycache_get(exe, "k1", &v1, &v2), 1);
    free(v1);
    /* the lock: taken, then free again */
    bool waited = true;
    int fd = agent_pycache_lock(exe, 100, &waited);
    CHECK(fd >= 0 && !waited);
    /* held (by this process's other descriptor): a second lock waits, then gives up */
    bool waited2 = false;
    int64_t t0 = mono_ms();
    int fd2 = agent_pycache_lock(exe, 100, &waited2);
    CHECK(fd2 < 0 && waited2 && mono_ms() - t0 >= 100);
    agent_pycache_unlock(fd);
    fd2 = agent_pycache_lock(exe, 100, &waited2);
    CHECK(fd2 >= 0 && !waited2);
    agent_pycache_unlock(fd2);
    unsetenv("TMPDIR");
    free(exe);
    free(real);
    free(cmd);
    free(file);
    free(dir);
    free(tmp);
}

int main(void)
{
    snprintf(T, sizeof T, "/tmp/ddptop-test-pyver.XXXXXX");
    if (!mkdtemp(T)) return 1;
    char *work = xasprintf("%s/work", T);
    util_mkdir_p(work);
    if (chdir(work) != 0) return 1;
    free(work);
    unsetenv("PYTHONPATH");
    unsetenv("PYTHONHOME");
    unsetenv("PYENV_VERSION");
    RUN(test_debian_layout);
    RUN(test_pythonpath_and_venv);
    RUN(test_pyenv_shim);
    RUN(test_shared_libpython);
    RUN(test_scan);
    RUN(test_cache);
    setenv("PATH", "/usr/bin:/bin", 1);
    char *rm = xasprintf("rm -rf '%s'", T);
    if (system(rm) != 0) printf("# could not remove %s\n", T);
    free(rm);
    return tap_done();
}
