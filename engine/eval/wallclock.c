/*
 * wallclock.c - the producers' last-seen record for wall-clock rules
 * (wallclock.h).
 */
#include "wallclock.h"

#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "strmap.h"
#include "tw_assert.h"

typedef struct node_rec {
    char *event; /* owned copy of the newest event's name, NULL = none */
    size_t event_cap;
} node_rec;

struct tw_wallclock_tracker {
    tw_strmap ids; /* node -> index */
    node_rec *recs;
    tw_wallclock_node *nodes; /* parallel to recs: the public view */
    size_t n, cap, view_cap;
    int64_t last_system_arrival_us;
    tw_wallclock view;
};

tw_wallclock_tracker *tw_wallclock_tracker_new(void)
{
    tw_wallclock_tracker *t = calloc(1, sizeof(*t));
    if (t != NULL)
        tw_strmap_init(&t->ids);
    return t;
}

void tw_wallclock_tracker_free(tw_wallclock_tracker *t)
{
    if (t == NULL)
        return;
    for (size_t i = 0; i < t->n; i++)
        free(t->recs[i].event);
    free(t->recs);
    free(t->nodes);
    tw_strmap_free(&t->ids);
    free(t);
}

static tw_wallclock_node *node_get(tw_wallclock_tracker *t, const char *name,
                                   int64_t arrival_us)
{
    size_t len = strlen(name);
    uint32_t idx;
    if (tw_strmap_get(&t->ids, name, len, &idx))
        return &t->nodes[idx];
    if (tw_grow((void **)&t->recs, &t->cap, t->n + 1, sizeof(node_rec), 8) !=
            TW_OK ||
        tw_grow((void **)&t->nodes, &t->view_cap, t->n + 1,
                sizeof(tw_wallclock_node), 8) != TW_OK)
        return NULL;
    if (tw_strmap_put(&t->ids, name, len, (uint32_t)t->n) != TW_OK)
        return NULL;
    memset(&t->recs[t->n], 0, sizeof(node_rec));
    tw_wallclock_node *v = &t->nodes[t->n];
    memset(v, 0, sizeof(*v));
    v->node = tw_strmap_key(&t->ids, name, len); /* the map's copy */
    v->first_arrival_us = arrival_us;
    v->last_event_step = -1;
    t->n++;
    return v;
}

static int64_t step_of(const tw_fw_event *e)
{
    for (uint32_t i = 0; i < e->nargs; i++)
        if (strcmp(e->args[i].key, "step_num") == 0 &&
            e->args[i].value != NULL) {
            char *end;
            long long v = strtoll(e->args[i].value, &end, 10);
            return end != e->args[i].value ? (int64_t)v : -1;
        }
    return -1;
}

/* Takes e as the node's newest event when it ends later than the one
 * kept (an equal end keeps the later arrival: begin markers). */
static int note_event(tw_wallclock_tracker *t, tw_wallclock_node *v,
                      const tw_fw_event *e, int64_t arrival_us)
{
    if (v->last_event != NULL && e->end_us < v->last_event_end_us)
        return TW_OK;
    node_rec *r = &t->recs[v - t->nodes];
    size_t len = strlen(e->name) + 1;
    if (len > r->event_cap) {
        char *grown = realloc(r->event, len);
        if (grown == NULL)
            return TW_ERR;
        r->event = grown;
        r->event_cap = len;
    }
    memcpy(r->event, e->name, len);
    v->last_event = r->event;
    v->last_event_start_us = e->start_us;
    v->last_event_end_us = e->end_us;
    v->last_event_step = step_of(e);
    v->last_event_mode = e->mode;
    v->last_event_arrival_us = arrival_us;
    return TW_OK;
}

int tw_wallclock_note_batch(tw_wallclock_tracker *t, const tw_batch *b,
                            int64_t arrival_us)
{
    const char *node = b->node != NULL ? b->node : "";
    tw_wallclock_node *v = node_get(t, node, arrival_us);
    if (v == NULL)
        return TW_ERR;
    v->last_arrival_us = arrival_us;
    if (b->nsamples > 0) {
        v->is_system = 1;
        t->last_system_arrival_us = arrival_us;
    }
    for (size_t i = 0; i < b->nevents; i++) {
        const tw_fw_event *e = &b->events[i];
        tw_wallclock_node *ev =
            node_get(t, e->node != NULL ? e->node : node, arrival_us);
        if (ev == NULL)
            return TW_ERR;
        ev->is_framework = 1;
        ev->last_arrival_us = arrival_us;
        if (note_event(t, ev, e, arrival_us) != TW_OK)
            return TW_ERR;
    }
    return TW_OK;
}

int tw_wallclock_note_scan(tw_wallclock_tracker *t, const tw_scan *scan)
{
    for (size_t i = 0; i < scan->nsamples; i++) {
        const tw_sample *s = &scan->samples[i];
        TW_ASSERT(s->series < scan->nseries);
        uint32_t ni = scan->series[s->series].node;
        TW_ASSERT(ni < scan->nnodes);
        int64_t at = (int64_t)(s->ts * 1e6);
        tw_wallclock_node *v = node_get(t, scan->nodes[ni], at);
        if (v == NULL)
            return TW_ERR;
        v->is_system = 1;
        if (at > v->last_arrival_us)
            v->last_arrival_us = at;
        if (at > t->last_system_arrival_us)
            t->last_system_arrival_us = at;
    }
    for (size_t i = 0; i < scan->nevents; i++) {
        const tw_fw_event *e = &scan->events[i];
        tw_wallclock_node *v =
            node_get(t, e->node != NULL ? e->node : "", e->end_us);
        if (v == NULL)
            return TW_ERR;
        v->is_framework = 1;
        if (e->end_us > v->last_arrival_us)
            v->last_arrival_us = e->end_us;
        if (note_event(t, v, e, e->end_us) != TW_OK)
            return TW_ERR;
    }
    return TW_OK;
}

const tw_wallclock *tw_wallclock_view(tw_wallclock_tracker *t, int64_t now_us,
                                      int offline)
{
    t->view.now_us = now_us;
    t->view.offline = offline;
    t->view.last_system_arrival_us = t->last_system_arrival_us;
    t->view.nodes = t->nodes;
    t->view.nnodes = t->n;
    return &t->view;
}
