/* batch.c - lifetime of a tw_batch (see batch.h). */
#include "batch.h"

#include <stdlib.h>

tw_batch *tw_batch_new(void)
{
    tw_batch *b = calloc(1, sizeof(*b));
    if (b == NULL)
        return NULL;
    tw_arena_init(&b->arena);
    return b;
}

void tw_batch_free(tw_batch *b)
{
    if (b == NULL)
        return;
    tw_arena_free(&b->arena);
    free(b);
}
