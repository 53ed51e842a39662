/*
 * fw_hist.h - RULES.md's H100 histogram (numpy.histogram(v, bins=100))
 * over the values held in a tw_countmap, optionally only those strictly
 * below a limit, without expanding the multiset: the edges come from the
 * host's hist100 on the selected minimum and maximum (numpy's edges depend
 * on nothing else) and each distinct value is binned by numpy's rule and
 * counted with its multiplicity, so the result equals host->hist100 over
 * the expanded list.
 *
 * Ownership: borrows everything; allocates nothing.
 */
#ifndef TW_RULES_FW_HIST_H
#define TW_RULES_FW_HIST_H

#include <stdint.h>

#include "trainwatch/countmap.h"
#include "trainwatch/plugin.h"

/* With `below` non-zero only values v < limit are counted. */
void fw_hist100_countmap(const tw_countmap *m, const tw_host *h, int below,
                         double limit, int64_t probs[100], double edges[101]);

/* Number of values strictly above `limit`. */
uint64_t fw_countmap_above(const tw_countmap *m, double limit);

#endif /* TW_RULES_FW_HIST_H */
