/* For the unit tests: remove a directory a test made and everything in it (links removed, never
 * followed), so that no test leaves anything in /tmp, whatever the code under test wrote there. */
#ifndef DDPTOP_TEST_TMPTREE_H
#define DDPTOP_TEST_TMPTREE_H

#include <ftw.h>
#include <stdio.h>

static inline int tmptree_rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb; (void)flag; (void)ftw;
    return remove(p);
}

static inline void tmptree_remove(const char *dir)
{
    nftw(dir, tmptree_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

#endif
