/* ptr_memo.c - per-scan memo keyed by string pointers (ptr_memo.h). */
#include "ptr_memo.h"

#include <stdint.h>
#include <string.h>

/* Interned strings sit a few bytes apart: mix the address bits so that
 * neighbours spread over the slots. */
static size_t slot_of(const void *p)
{
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 29;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 32;
    return (size_t)x & (TW_PTR_MEMO_SLOTS - 1);
}

void tw_ptr_memo_clear(tw_ptr_memo *m)
{
    if (m->n > 0)
        memset(m->key, 0, sizeof(m->key));
    m->n = 0;
}

int tw_ptr_memo_get(const tw_ptr_memo *m, const void *p, int *val)
{
    for (size_t i = slot_of(p);; i = (i + 1) & (TW_PTR_MEMO_SLOTS - 1)) {
        if (m->key[i] == NULL)
            return 0;
        if (m->key[i] == p) {
            *val = m->val[i];
            return 1;
        }
    }
}

void tw_ptr_memo_put(tw_ptr_memo *m, const void *p, int val)
{
    if (m->n >= TW_PTR_MEMO_MAX)
        return;
    size_t i = slot_of(p);
    while (m->key[i] != NULL && m->key[i] != p)
        i = (i + 1) & (TW_PTR_MEMO_SLOTS - 1);
    if (m->key[i] == NULL)
        m->n++;
    m->key[i] = p;
    m->val[i] = val;
}
