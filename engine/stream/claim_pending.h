/*
 * claim_pending.h - the claims of sent alert and action ids whose delivery
 * is not confirmed yet (checkpoint.h: v1:pending), on the engine's side:
 * the list of ids to confirm once delivered, and the sweep that reports
 * claims never confirmed.
 *
 * Why: an id is claimed (SET NX) before it is sent, so a crash between
 * the claim and the delivery loses that send for good (at most once). The
 * claim also records it as pending; a confirmed delivery clears it; the
 * sweep finds the ones a stopped process left behind and turns each into
 * a WARN and a count, never a silent loss.
 *
 * Threads: a list and a store are used by one thread at a time.
 * Ownership: the list owns copies of its ids.
 */
#ifndef TW_CLAIM_PENDING_H
#define TW_CLAIM_PENDING_H

#include <stddef.h>
#include <stdint.h>

#include "state_store.h"

typedef struct tw_claim_list {
    char **ids;
    size_t n, cap;
} tw_claim_list;

/* Remembers a claimed id until tw_claim_list_confirm (TW_ERR: out of
 * memory; the claim is then reported by a later sweep). */
int tw_claim_list_add(tw_claim_list *l, const char *id);
/* Every id in the list was delivered: clears them from v1:pending in one
 * transaction (one round trip); on TW_OK the list is emptied, otherwise
 * kept for the next call. */
int tw_claim_list_confirm(tw_claim_list *l, tw_store *s, char *err,
                          size_t errlen);
void tw_claim_list_free(tw_claim_list *l);

/* Takes the claims older than state.pending_after from v1:pending and
 * logs a WARN for each (its id and what it is, when it was claimed).
 * Returns how many (several engines on one store: each claim is reported
 * by exactly one), TW_ERR or TW_UNAVAILABLE. */
int tw_claims_sweep(tw_store *s, char *err, size_t errlen);

#endif /* TW_CLAIM_PENDING_H */
