/* A spawn request's "env_default" (agent_envdefault.h). */
#include "agent_envdefault.h"

#include <fcntl.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/util.h"

#define CONF_CAP (64 * 1024)   /* NCCL's files are a few lines */

/* NCCL's setEnvFile (src/misc/param.cc): each line up to its first '=' is a name, as it is
 * (no blanks trimmed, no comments); lines without '=' are skipped. */
int envdefault_conf_sets(const char *text, size_t len, const char *name)
{
    size_t nl = strlen(name), i = 0;
    while (i < len) {
        size_t e = i;
        while (e < len && text[e] != '\n') e++;
        if (e - i > nl && memcmp(text + i, name, nl) == 0 && text[i + nl] == '=') return 1;
        i = e + 1;
    }
    return 0;
}

/* A regular file only (a FIFO would block the loop), at most CONF_CAP bytes of it. */
static int file_sets(const char *path, const char *name)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return 0;
    struct stat st;
    struct strbuf sb;
    strbuf_init(&sb);
    int set = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && util_read_fd(fd, &sb, CONF_CAP) == 0 &&
              sb.buf && envdefault_conf_sets(sb.buf, sb.len, name);
    close(fd);
    strbuf_done(&sb);
    return set;
}

/* The value the rank would see for name from the request or the agent's environment. */
static const char *effective(const cJSON *env, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(env, name);
    if (v) return cJSON_IsString(v) ? v->valuestring : NULL;   /* null: removed */
    return getenv(name);
}

static int node_sets(const cJSON *env, const char *name)
{
    if (effective(env, name)) return 1;
    if (file_sets("/etc/nccl.conf", name)) return 1;
    const char *conf = effective(env, "NCCL_CONF_FILE");
    if (conf && conf[0]) return file_sets(conf, name);
    const char *home = effective(env, "HOME");
    if (!home || !home[0]) {
        struct passwd *pw = getpwuid(getuid());
        home = pw ? pw->pw_dir : NULL;
    }
    if (!home) return 0;
    char *user = xasprintf("%s/.nccl.conf", home);
    int set = file_sets(user, name);
    free(user);
    return set;
}

cJSON *envdefault_apply(const cJSON *env, const cJSON *defaults)
{
    const cJSON *d;
    if (!cJSON_IsObject(defaults) || !defaults->child) return NULL;
    cJSON_ArrayForEach(d, defaults)
        if (node_sets(env, d->string)) return NULL;
    cJSON *out = env ? cJSON_Duplicate(env, 1) : cJSON_CreateObject();
    if (!out) util_fatal("out of memory copying a rank's environment");
    cJSON_ArrayForEach(d, defaults)
        if (cJSON_IsString(d)) cJSON_AddStringToObject(out, d->string, d->valuestring);
    return out;
}
