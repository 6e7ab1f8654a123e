/* The agent's "env_old_torch" (agent_torchenv.h): NCCL_ASYNC_ERROR_HANDLING reaches a rank only
 * where the node's torch is older than 2.2 (or not known), never over a value the rank's env or
 * the agent's own environment has; from 2.2 on, where torch warns about the old name, not at
 * all. The node's torch as the facts read it: a python3 on PATH with torch/version.py. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/agent_torchenv.h"
#include "tap.h"
#include "tmptree.h"
#include "util/util.h"

static void test_before_2_2(void)
{
    static const char *const old[] = { "1.13.0a0", "2.0.1", "2.1.2", "2.1.2+cu121", "1.9", NULL, "", "nightly", "2" };
    static const char *const newer[] = { "2.2.0", "2.2", "2.3.1+cu121", "2.11.0+cu130", "2.10.0.dev20260101", "3.0.0" };
    for (size_t i = 0; i < sizeof old / sizeof *old; i++) CHECK(torchenv_before_2_2(old[i]));
    for (size_t i = 0; i < sizeof newer / sizeof *newer; i++) CHECK(!torchenv_before_2_2(newer[i]));
}

static void test_apply(void)
{
    cJSON *old = cJSON_Parse("{\"DDPT_TEST_OLD\":\"1\"}");
    cJSON *env = cJSON_Parse("{\"X\":\"1\"}");
    unsetenv("DDPT_TEST_OLD");
    CHECK(torchenv_apply(env, old, "2.11.0+cu130") == NULL);     /* new torch: not set */
    cJSON *out = torchenv_apply(env, old, "2.1.2");
    CHECK(out && cJSON_GetObjectItemCaseSensitive(out, "DDPT_TEST_OLD") &&
          strcmp(cJSON_GetObjectItemCaseSensitive(out, "DDPT_TEST_OLD")->valuestring, "1") == 0);
    CHECK(out && cJSON_GetObjectItemCaseSensitive(out, "X") != NULL);
    cJSON_Delete(out);
    out = torchenv_apply(NULL, old, NULL);                      /* unknown: set */
    CHECK(out && cJSON_GetObjectItemCaseSensitive(out, "DDPT_TEST_OLD") != NULL);
    cJSON_Delete(out);
    cJSON *mine = cJSON_Parse("{\"DDPT_TEST_OLD\":\"0\"}");     /* the rank's own value stays */
    out = torchenv_apply(mine, old, "1.13.0");
    CHECK(out && strcmp(cJSON_GetObjectItemCaseSensitive(out, "DDPT_TEST_OLD")->valuestring, "0") == 0);
    cJSON_Delete(out);
    setenv("DDPT_TEST_OLD", "0", 1);                            /* so does the node's */
    out = torchenv_apply(env, old, "1.13.0");
    CHECK(out && cJSON_GetObjectItemCaseSensitive(out, "DDPT_TEST_OLD") == NULL);
    cJSON_Delete(out);
    unsetenv("DDPT_TEST_OLD");
    CHECK(torchenv_apply(env, NULL, "1.13.0") == NULL);
    cJSON_Delete(mine);
    cJSON_Delete(env);
    cJSON_Delete(old);
}

/* A Debian-like python3 on PATH with torch in dist-packages: the version the agent reads. */
static char T[] = "/tmp/test_torchenv.XXXXXX";

static void put(const char *rel, const void *data, size_t len, mode_t mode)
{
    char *p = xasprintf("%s/%s", T, rel), *d = xstrdup(p);
    *strrchr(d, '/') = '\0';
    util_mkdir_p(d);
    FILE *f = fopen(p, "w");
    if (!f || fwrite(data, 1, len, f) != len) printf("# cannot write %s\n", p);
    if (f) fclose(f);
    chmod(p, mode);
    free(p);
    free(d);
}

static void test_node_torch(void)
{
    if (!mkdtemp(T)) { CHECK(0); return; }
    char exe[4096];
    memset(exe, 'x', sizeof exe);
    memcpy(exe, "\177ELF", 4);
    memcpy(exe + 100, "\0" "3.11.9" "\0", 8);   /* the version string, as in .rodata */
    put("usr/bin/python3.11", exe, sizeof exe, 0755);
    char *link = xasprintf("%s/usr/bin/python3", T);
    CHECK(symlink("python3.11", link) == 0);
    free(link);
    put("usr/lib/python3.11/os.py", "", 0, 0644);
    put("usr/lib/python3/dist-packages/torch/__init__.py", "", 0, 0644);
    const char *v211 = "__version__ = '2.11.0+cu130'\n";
    put("usr/lib/python3/dist-packages/torch/version.py", v211, strlen(v211), 0644);
    char *old_path = getenv("PATH") ? xstrdup(getenv("PATH")) : NULL;
    char *old_home = getenv("HOME") ? xstrdup(getenv("HOME")) : NULL;
    char *path = xasprintf("%s/usr/bin:/nonexistent", T), *home = xasprintf("%s/home", T);
    setenv("PATH", path, 1);
    setenv("HOME", home, 1);
    char *v = torchenv_node_torch();
    printf("# node torch: %s\n", v ? v : "(none)");
    CHECK(v && strcmp(v, "2.11.0+cu130") == 0);
    CHECK(v && !torchenv_before_2_2(v));
    free(v);
    const char *v113 = "__version__ = '1.13.0a0'\n";
    put("usr/lib/python3/dist-packages/torch/version.py", v113, strlen(v113), 0644);
    v = torchenv_node_torch();
    CHECK(v && strcmp(v, "1.13.0a0") == 0);
    free(v);
    if (old_path) setenv("PATH", old_path, 1);
    if (old_home) setenv("HOME", old_home, 1);
    free(old_path);
    free(old_home);
    free(path);
    free(home);
    tmptree_remove(T);
}

int main(void)
{
    RUN(test_before_2_2);
    RUN(test_apply);
    RUN(test_node_torch);
    return tap_done();
}
