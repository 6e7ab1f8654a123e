/* The rule for bench_nccl's NCCL_* variables (nccl_env.h). */
#include "nccl_env.h"

#include <string.h>

bool wire_nccl_env_is_nccl(const char *key)
{
    return strncmp(key, "NCCL_", 5) == 0;
}

const char *wire_nccl_env_bad(const char *key, const char *value)
{
    if (!wire_nccl_env_is_nccl(key) || !key[5] ||
        strspn(key + 5, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") != strlen(key + 5))
        return "an NCCL variable's name is NCCL_ then capital letters, digits and '_'";
    if (strlen(value) > WIRE_NCCL_ENV_VALUE_MAX) return "an NCCL variable's value is at most 256 bytes";
    for (const char *q = value; *q; q++)
        if ((unsigned char)*q < 0x20 || *q == 0x7f) return "an NCCL variable's value has no control characters";
    return NULL;
}
