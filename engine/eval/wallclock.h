/*
 * wallclock.h - what a job's producers were last seen doing, for rules
 * that judge on the wall clock (plugin.h, `<entry>_wallclock`): per
 * producer its first and newest arrival and its newest framework event.
 *
 * Online (`run`) it is fed each batch as it arrives, stamped with the
 * engine's wall clock; offline (`eval`) it is fed each scan's samples and
 * events, with event time standing in for arrival. It is not
 * checkpointed: a restored job relearns it from the next batches, and the
 * rules keep what they must not forget in their own state.
 *
 * Ownership: the tracker owns its copies of node ids and event names;
 * the view it returns borrows them until the next note or free.
 */
#ifndef TW_WALLCLOCK_H
#define TW_WALLCLOCK_H

#include <stdint.h>

#include "batch.h"
#include "trainwatch/plugin.h"

typedef struct tw_wallclock_tracker tw_wallclock_tracker;

tw_wallclock_tracker *tw_wallclock_tracker_new(void);
void tw_wallclock_tracker_free(tw_wallclock_tracker *t);

/* One arrived batch at engine wall time arrival_us. TW_ERR: out of memory. */
int tw_wallclock_note_batch(tw_wallclock_tracker *t, const tw_batch *b,
                            int64_t arrival_us);

/* One scan's input, offline: a sample arrives at its own time, an event
 * at its end. TW_ERR: out of memory. */
int tw_wallclock_note_scan(tw_wallclock_tracker *t, const tw_scan *scan);

/* The view handed to the rules; valid until the next note or free. */
const tw_wallclock *tw_wallclock_view(tw_wallclock_tracker *t, int64_t now_us,
                                      int offline);

#endif /* TW_WALLCLOCK_H */
