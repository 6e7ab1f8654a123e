/* NCCL's debug lines (nccl.h). */
#include "nccl.h"

#include <string.h>

/* NCCL's src/debug.cc writes "%s:%d:%d [%d] NCCL INFO " (host, pid, tid, cuda device; the
 * device is "[%d]" or absent in init's early lines) then the message; WARN lines the same with
 * "NCCL WARN ". Only the first 256 bytes are looked at: the marker is near the start. */
bool nccl_line_is(const char *text, size_t len)
{
    static const char *const marks[] = { " NCCL INFO ", " NCCL WARN ", " NCCL TRACE ", " NCCL INFO\n" };
    if (len > 256) len = 256;
    for (size_t m = 0; m < sizeof marks / sizeof *marks; m++) {
        size_t ml = strlen(marks[m]);
        for (size_t i = 0; i + ml <= len; i++)
            if (text[i] == ' ' && memcmp(text + i, marks[m], ml) == 0) return true;
    }
    /* "NCCL INFO" at the end of a line (nothing after) */
    return len >= 10 && memcmp(text + len - 10, " NCCL INFO", 10) == 0;
}
