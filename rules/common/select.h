/*
 * select.h - numpy's quantile Q(v, q) (RULES.md §3.0) by selection instead
 * of a full sort: the two order statistics Q needs are found with
 * quickselect in O(n). The result is bit-identical to sorting and calling
 * host->quantile_sorted, because the same two values enter the same
 * interpolation. Reorders v in place. n must be > 0; no NaN in v.
 */
#ifndef TW_RULES_SELECT_H
#define TW_RULES_SELECT_H

#include <stddef.h>

double tw_select_quantile(double *v, size_t n, double q);

#endif /* TW_RULES_SELECT_H */
