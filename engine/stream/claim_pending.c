/* claim_pending.c - confirming claims and reporting unconfirmed ones
 * (claim_pending.h). */
#include "claim_pending.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "checkpoint.h"
#include "clock.h"
#include "grow.h"
#include "log.h"

int tw_claim_list_add(tw_claim_list *l, const char *id)
{
    if (tw_grow((void **)&l->ids, &l->cap, l->n + 1, sizeof(*l->ids), 16) !=
        TW_OK)
        return TW_ERR;
    if ((l->ids[l->n] = strdup(id)) == NULL)
        return TW_ERR;
    l->n++;
    return TW_OK;
}

static void clear(tw_claim_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->ids[i]);
    l->n = 0;
}

int tw_claim_list_confirm(tw_claim_list *l, tw_store *s, char *err,
                          size_t errlen)
{
    if (l->n == 0)
        return TW_OK;
    int rc = tw_checkpoint_confirm(s, (const char *const *)l->ids, l->n, err,
                                   errlen);
    if (rc == TW_OK)
        clear(l);
    return rc;
}

void tw_claim_list_free(tw_claim_list *l)
{
    clear(l);
    free(l->ids);
    l->ids = NULL;
    l->cap = 0;
}

static void report(void *ud, const char *id, const char *label,
                   int64_t claimed_ms)
{
    (void)ud;
    time_t t = (time_t)(claimed_ms / 1000);
    struct tm tm;
    char when[32] = "?";
    if (gmtime_r(&t, &tm) != NULL)
        strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
    if (label != NULL)
        tw_log(TW_LOG_WARN,
               "%s, claimed at %s.%03dZ: claimed but its delivery was "
               "never confirmed (the process stopped in between?): it may "
               "not have been sent",
               label, when, (int)(claimed_ms % 1000));
    else
        tw_log(TW_LOG_WARN,
               "claim %s, claimed at %s.%03dZ: claimed but its delivery was "
               "never confirmed (the process stopped in between?): it may "
               "not have been sent",
               id, when, (int)(claimed_ms % 1000));
}

int tw_claims_sweep(tw_store *s, char *err, size_t errlen)
{
    int64_t before = (tw_wall_us() - tw_store_pending_after_us(s)) / 1000;
    return tw_checkpoint_unconfirmed(s, before, report, NULL, err, errlen);
}
