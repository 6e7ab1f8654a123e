/* Makes bytes that came from a rank (or any remote side) safe to show on a terminal. Nothing
 * the rank wrote can move the cursor, set the window title, write the clipboard (OSC 52), ask
 * the terminal to answer (ESC[21t, DECRQSS), or switch character sets: every control is shown
 * as visible text instead. The output is always valid UTF-8.
 *
 * Rendering (caret notation, as `cat -v` writes it):
 *   C0 controls U+0000..U+001F  ->  "^@" .. "^_"   (ESC is "^[", so ESC[31m shows as "^[[31m")
 *   DEL U+007F                  ->  "^?"
 *   C1 controls U+0080..U+009F  ->  "M-^@" .. "M-^_" (when they arrive UTF-8 encoded)
 *   bidi overrides/isolates (U+202A..U+202E, U+2066..U+2069), line/paragraph separators
 *   (U+2028, U+2029)            ->  "<U+202E>"
 *   invalid UTF-8 (stray bytes 0x80..0xFF, overlong forms, surrogates, > U+10FFFF, truncated
 *   sequences)                  ->  U+FFFD, one per maximal invalid piece
 *   TAB                         ->  spaces to the next multiple of 8 columns (one code point
 *                                   counts as one column), unless SANITIZE_KEEP_TAB
 * Printable ASCII and valid UTF-8 pass through unchanged. */
#ifndef DDPTOP_SANITIZE_H
#define DDPTOP_SANITIZE_H

#include <stddef.h>

#include "util.h"

#define SANITIZE_KEEP_TAB 0x1   /* keep '\t' as is (the caller expands it) */

/* Appends the safe rendering of in[0..len) to sb. */
void sanitize_append(struct strbuf *sb, const char *in, size_t len, unsigned flags);
/* The safe rendering as a new NUL-terminated string (malloc'd; never NULL). */
char *sanitize_str(const char *in, size_t len, unsigned flags);

#endif
