/*
 * fw_hist.c - H100 over a count map (see fw_hist.h).
 */
#include "fw_hist.h"

#include <math.h>
#include <string.h>

void fw_hist100_countmap(const tw_countmap *m, const tw_host *h, int below,
                         double limit, int64_t probs[100], double edges[101])
{
    double ends[2] = {0.0, 0.0};
    size_t nends = 0;
    for (size_t i = 0; i < m->map.n; i++) {
        double x = m->map.ent[i].key;
        if (isnan(x) || (below && !(x < limit)))
            continue;
        if (nends == 0) {
            ends[0] = ends[1] = x;
            nends = 2;
        } else {
            if (x < ends[0])
                ends[0] = x;
            if (x > ends[1])
                ends[1] = x;
        }
    }
    /* Same edges as numpy over the full list: they depend only on the
     * extremes (and on emptiness). */
    h->hist100(ends, nends, probs, edges);
    memset(probs, 0, 100 * sizeof(int64_t));
    if (nends == 0)
        return;
    const int nb = 100;
    double lo = edges[0], hi = edges[nb];
    double norm = nb / (hi - lo);
    for (size_t i = 0; i < m->map.n; i++) {
        double x = m->map.ent[i].key;
        if (isnan(x) || (below && !(x < limit)) || x < lo || x > hi)
            continue;
        long idx = (long)((x - lo) * norm);
        if (idx == nb)
            idx--;
        if (x < edges[idx])
            idx--;
        else if (idx != nb - 1 && x >= edges[idx + 1])
            idx++;
        probs[idx] += (int64_t)m->map.ent[i].val;
    }
}

uint64_t fw_countmap_above(const tw_countmap *m, double limit)
{
    uint64_t n = 0;
    for (size_t i = 0; i < m->map.n; i++)
        if (m->map.ent[i].key > limit)
            n += m->map.ent[i].val;
    return n;
}
