/* A spawn request's "env_old_torch" (agent_torchenv.h). */
#include "agent_torchenv.h"

#include <ctype.h>
#include <stdlib.h>

#include "agent_pycache.h"
#include "agent_pyver.h"
#include "util/util.h"

bool torchenv_before_2_2(const char *v)
{
    if (!v || !isdigit((unsigned char)v[0])) return true;
    char *end;
    long major = strtol(v, &end, 10);
    if (*end != '.' || !isdigit((unsigned char)end[1])) return true;
    long minor = strtol(end + 1, NULL, 10);
    return major < 2 || (major == 2 && minor < 2);
}

char *torchenv_node_torch(void)
{
    struct agent_pyver pv;
    char *python3 = NULL, *torch = NULL;
    agent_pyver_locate(&pv);
    if (pv.key && agent_pycache_get(pv.exe, pv.key, &python3, &torch) == 1) {
        free(python3);
    } else if (pv.torch_file) {
        torch = agent_pyver_torch_file(pv.torch_file);
    }
    agent_pyver_done(&pv);
    return torch;
}

cJSON *torchenv_apply(const cJSON *env, const cJSON *old_torch, const char *torch_version)
{
    const cJSON *d;
    if (!cJSON_IsObject(old_torch) || !old_torch->child || !torchenv_before_2_2(torch_version)) return NULL;
    cJSON *out = env ? cJSON_Duplicate(env, 1) : cJSON_CreateObject();
    if (!out) util_fatal("out of memory copying a rank's environment");
    cJSON_ArrayForEach(d, old_torch)
        if (cJSON_IsString(d) && !cJSON_GetObjectItemCaseSensitive(out, d->string) && !getenv(d->string))
            cJSON_AddStringToObject(out, d->string, d->valuestring);
    return out;
}
