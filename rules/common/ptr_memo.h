/*
 * ptr_memo.h - a bounded table from string pointers to an int, kept for
 * one scan. The host interns the strings of each batch, so a scan's
 * thousands of events share a few distinct name and phase pointers, and
 * every one of them stays valid (so no two distinct strings share a
 * pointer) until scan() returns. A rule that derives something from such a
 * string (a substring test, a class) computes it once per pointer and scan
 * instead of once per event: clear the memo at the start of each scan.
 *
 * Bounded: past TW_PTR_MEMO_MAX pointers nothing more is kept and lookups
 * of new pointers miss; the caller then computes as without the memo.
 * Memory: ~12 KB per memo, no allocation.
 */
#ifndef TW_RULES_PTR_MEMO_H
#define TW_RULES_PTR_MEMO_H

#include <stddef.h>

#define TW_PTR_MEMO_SLOTS 1024u /* power of two */
#define TW_PTR_MEMO_MAX (TW_PTR_MEMO_SLOTS / 2)

typedef struct tw_ptr_memo {
    const void *key[TW_PTR_MEMO_SLOTS]; /* NULL: empty */
    int val[TW_PTR_MEMO_SLOTS];
    size_t n;
} tw_ptr_memo;

/* Forgets every pointer (the start of a scan). */
void tw_ptr_memo_clear(tw_ptr_memo *m);
/* 1 and *val when p (not NULL) is known, else 0. */
int tw_ptr_memo_get(const tw_ptr_memo *m, const void *p, int *val);
/* Remembers p (not NULL) -> val, unless the memo is full. */
void tw_ptr_memo_put(tw_ptr_memo *m, const void *p, int val);

#endif /* TW_RULES_PTR_MEMO_H */
