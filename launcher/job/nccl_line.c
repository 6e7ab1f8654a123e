/* NCCL's debug lines (nccl_line.h). */
#include "nccl_line.h"

#include <string.h>

/* NCCL's src/debug.cc writes "%s:%d:%d [%d] NCCL INFO " (host, pid, tid, cuda device; the
 * device is "[%d]" or absent in init's early lines) then the message; WARN lines the same with
 * "NCCL WARN ". Only the first 256 bytes are looked at: the marker is near the start. */
bool nccl_line_is(const char *text, size_t len)
{
    static const char *const levels[] = { "INFO", "WARN", "TRACE" };
    if (len > 256) len = 256;
    /* one memmem per line: most lines have no " NCCL " and leave at once (every line kept
     * passes here) */
    for (const char *p = text, *end = text + len; p < end;) {
        const char *hit = memmem(p, (size_t)(end - p), " NCCL ", 6);
        if (!hit) return false;
        const char *lv = hit + 6;
        for (size_t i = 0; i < sizeof levels / sizeof *levels; i++) {
            size_t n = strlen(levels[i]);
            if ((size_t)(end - lv) >= n && memcmp(lv, levels[i], n) == 0 &&
                (lv + n == end || lv[n] == ' ' || lv[n] == '\n'))
                return true;
        }
        p = hit + 1;
    }
    return false;
}

bool nccl_block_may_hold(const char *text, size_t len)
{
    return memmem(text, len, " NCCL ", 6) != NULL || memmem(text, len, "NCCL version ", 13) != NULL;
}

bool nccl_version_line_is(const char *text, size_t len)
{
    return len > 13 && len < 80 && memcmp(text, "NCCL version ", 13) == 0;
}
