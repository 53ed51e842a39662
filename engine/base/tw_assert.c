/* tw_assert.c - a failed internal invariant (tw_assert.h). */
#include "tw_assert.h"

#include <stdio.h>
#include <stdlib.h>

void tw_assert_fail(const char *cond, const char *file, int line,
                    const char *func)
{
    /* straight to stderr: the logger may be what is broken */
    fprintf(stderr,
            "trainwatch: internal error: assertion '%s' failed at %s:%d "
            "in %s(); this is a bug, please report it\n",
            cond, file, line, func);
    fflush(stderr);
    abort();
}
