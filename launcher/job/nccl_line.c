/* NCCL's debug lines (nccl_line.h). */
#include "nccl_line.h"

#include <string.h>

/* The first " NCCL " in [p, end), or NULL. memchr for the 'N' and a look around it, not memmem:
 * this runs for every line kept (job_log_keep) and every block, and glibc's memmem sets up a
 * 256-entry shift table per call, which cost more than the scan on a 100-byte line (4% of the
 * controller in the log path's profile). Rank output rarely has a capital N. */
static const char *find_sp_nccl(const char *p, const char *end)
{
    const char *from = p + 1;          /* the 'N' comes after the space */
    while (end - from >= 5) {
        const char *n = memchr(from, 'N', (size_t)(end - from) - 4);
        if (!n) return NULL;
        if (n[-1] == ' ' && memcmp(n, "NCCL ", 5) == 0) return n - 1;
        from = n + 1;
    }
    return NULL;
}

/* NCCL's src/debug.cc writes "%s:%d:%d [%d] NCCL INFO " (host, pid, tid, cuda device; the
 * device is "[%d]" or absent in init's early lines) then the message; WARN lines the same with
 * "NCCL WARN ". Only the first 256 bytes are looked at: the marker is near the start. */
bool nccl_line_is(const char *text, size_t len)
{
    static const char *const levels[] = { "INFO", "WARN", "TRACE" };
    if (len > 256) len = 256;
    /* most lines have no " NCCL " and leave at once (every line kept passes here) */
    for (const char *p = text, *end = text + len; p < end;) {
        const char *hit = find_sp_nccl(p, end);
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

/* " NCCL " or "NCCL version " anywhere: one pass over the block's capital Ns. */
bool nccl_block_may_hold(const char *text, size_t len)
{
    const char *end = text + len, *p = text;
    while (end - p >= 5) {
        const char *n = memchr(p, 'N', (size_t)(end - p) - 4);
        if (!n) return false;
        if (memcmp(n, "NCCL ", 5) == 0 && n > text && n[-1] == ' ') return true;
        if (end - n >= 13 && memcmp(n, "NCCL version ", 13) == 0) return true;
        p = n + 1;
    }
    return false;
}

bool nccl_version_line_is(const char *text, size_t len)
{
    return len > 13 && len < 80 && memcmp(text, "NCCL version ", 13) == 0;
}
