/*
 * progress.c - Progress: hangs and stalls of a training job, per rank and
 * section, judged on the engine's wall clock (plugin.h, `_wallclock`).
 *
 * Sections (the hook's events, hooks/python/trainwatch/sections.py):
 *  - initialization: a rank that has announced itself (its JOB_START)
 *    and sent no framework event yet; budget `initialization_budget`.
 *  - training step / evaluation: the last event is a step of mode TRAIN /
 *    EVAL (or any other event of the step). The interval is step end to
 *    step end, so the time between steps is part of it.
 *  - a user section `hook.section(NAME)`: the hook sends
 *    "Section:NAME:begin" (zero length) on entry and "Section:NAME"
 *    (its whole span) on exit; while the begin is a rank's last event the
 *    rank is inside NAME. NAME starting with "checkpoint" has the budget
 *    `checkpoint_budget`; any other section its own learned timeout, but
 *    never less than the step's it is part of.
 *
 * Timeout of a (rank, section): max(multiplier x p99 of the section's
 * last RING intervals (step intervals; section durations), floor) once
 * `warmup` of them were seen; `floor` before. Intervals are learned from
 * scans (event time); silence is measured on the wall clock from the
 * arrival of the rank's newest event, so a hung job that sends nothing
 * is still judged.
 *
 * Who is to blame: when some ranks are stalled outside any user section
 * while others sit inside one (a collective wrapped in hook.section), the
 * former fell behind and the latter wait for them; otherwise ranks whose
 * newest event is older than the newest rank's by more than `tolerance`
 * fell behind; otherwise all stopped together (a collective hang).
 *
 * One violation per stall episode (first rank over its timeout until every
 * rank makes progress again); the episode's picture (ranks, sections,
 * roles, kind) is refreshed while it lasts, frozen once it starts to
 * recover (fewer ranks stalled than in the picture: the ranks of a
 * collective hang resume one by one, and the last would look behind the
 * first) and kept after it clears.
 * Offline (`eval`) the scan end is the clock.
 *
 * Memory: O(ranks x (2 + MAX_SECTIONS) x RING) doubles.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "trainwatch/finding.h"
#include "trainwatch/plugin.h"
#include "trainwatch/ser.h"

enum {
    P_FLOOR = 0,
    P_MULTIPLIER,
    P_WARMUP,
    P_INIT_BUDGET,
    P_CKPT_BUDGET,
    P_TOLERANCE,
    P_COUNT
};

static const tw_param_spec pg_params[P_COUNT] = {
    {"floor", TW_PARAM_DOUBLE, "30", 0.001, 86400.0,
     "seconds: the least timeout of any section (and the timeout before "
     "the warm-up is over)"},
    {"multiplier", TW_PARAM_DOUBLE, "5", 1.0, 1000.0,
     "timeout = multiplier x the p99 of the section's observed intervals"},
    {"warmup", TW_PARAM_INT, "5", 1.0, 100000.0,
     "intervals of a section seen before its timeout is learned"},
    {"initialization_budget", TW_PARAM_DOUBLE, "1200", 0.001, 604800.0,
     "seconds from a rank's start to its first event"},
    {"checkpoint_budget", TW_PARAM_DOUBLE, "1800", 0.001, 604800.0,
     "seconds a rank may spend in a section named checkpoint*"},
    {"tolerance", TW_PARAM_DOUBLE, "1", 0.0, 3600.0,
     "seconds: a stalled rank whose newest event is older than the newest "
     "rank's by more than this fell behind; within it, they stopped "
     "together"},
};

#define RING 128
#define MAX_SECTIONS 4
#define NAME_LEN 64
#define MAX_RANKS 4096
#define SECTION_PREFIX "Section:"
#define BEGIN_SUFFIX ":begin"

typedef struct ring {
    double v[RING]; /* seconds */
    uint32_t n, next;
    uint64_t total;
} ring;

typedef struct section {
    char name[NAME_LEN];
    ring r;
} section;

enum { K_TRAIN = 0, K_EVAL = 1 };
enum { ROLE_OK = 0, ROLE_BEHIND, ROLE_WAITING, ROLE_TOGETHER };

typedef struct rank {
    char node[NAME_LEN];
    int64_t first_arrival_us;
    /* the newest event as the host last showed it (kept for restores) */
    char last_event[NAME_LEN];
    int64_t last_end_us, last_step, last_arrival_us;
    int32_t last_mode;
    /* learned from scans */
    int64_t prev_end_us[2];
    ring steps[2];
    section sections[MAX_SECTIONS];
    uint32_t nsections;
    /* at the last call */
    double silent_s, timeout_s;
    char where[NAME_LEN]; /* the section it is in */
    int32_t role;
} rank;

typedef struct pg_state {
    const tw_host *host;
    double floor_s, mult, init_s, ckpt_s, tol_s;
    int64_t warmup;
    rank *ranks;
    size_t nranks, cap;
    int64_t triggered, violations, datapoints;
    int32_t active;
    int64_t episode_us, cleared_us, last_now_us, last_system_us;
    int32_t kind; /* ROLE_BEHIND: some fell behind; ROLE_TOGETHER: all */
} pg_state;

static int pg_create(const tw_host *host, const tw_params *params, void **state,
                     char *err, size_t errlen)
{
    if (params->nvalues != P_COUNT) {
        snprintf(err, errlen, "Progress: expected %d parameters, got %zu",
                 P_COUNT, params->nvalues);
        return TW_ERR;
    }
    pg_state *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        snprintf(err, errlen, "Progress: out of memory");
        return TW_ERR;
    }
    s->host = host;
    s->floor_s = params->values[P_FLOOR].d;
    s->mult = params->values[P_MULTIPLIER].d;
    s->warmup = params->values[P_WARMUP].i;
    s->init_s = params->values[P_INIT_BUDGET].d;
    s->ckpt_s = params->values[P_CKPT_BUDGET].d;
    s->tol_s = params->values[P_TOLERANCE].d;
    *state = s;
    return TW_OK;
}

static void pg_destroy(void *state)
{
    pg_state *s = state;
    if (s == NULL)
        return;
    free(s->ranks);
    free(s);
}

static rank *rank_get(pg_state *s, const char *node)
{
    for (size_t i = 0; i < s->nranks; i++)
        if (strncmp(s->ranks[i].node, node, NAME_LEN - 1) == 0)
            return &s->ranks[i];
    if (s->nranks >= MAX_RANKS)
        return NULL;
    if (s->nranks == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 8;
        rank *grown = realloc(s->ranks, cap * sizeof(rank));
        if (grown == NULL)
            return NULL;
        s->ranks = grown;
        s->cap = cap;
    }
    rank *k = &s->ranks[s->nranks++];
    memset(k, 0, sizeof(*k));
    snprintf(k->node, sizeof(k->node), "%s", node);
    k->last_step = -1;
    return k;
}

static void rank_drop(pg_state *s, const char *node)
{
    for (size_t i = 0; i < s->nranks; i++)
        if (strncmp(s->ranks[i].node, node, NAME_LEN - 1) == 0) {
            memmove(&s->ranks[i], &s->ranks[i + 1],
                    (s->nranks - i - 1) * sizeof(rank));
            s->nranks--;
            return;
        }
}

static void ring_add(ring *r, double v)
{
    r->v[r->next] = v;
    r->next = (r->next + 1) % RING;
    if (r->n < RING)
        r->n++;
    r->total++;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* max(multiplier x p99, floor) once warm; the floor before. */
static double ring_timeout(const pg_state *s, const ring *r, double *p99)
{
    *p99 = 0;
    if (r->total < (uint64_t)s->warmup || r->n == 0)
        return s->floor_s;
    double v[RING];
    memcpy(v, r->v, r->n * sizeof(double));
    qsort(v, r->n, sizeof(double), cmp_double);
    *p99 = s->host->quantile_sorted(v, r->n, 0.99);
    double t = s->mult * *p99;
    return t > s->floor_s ? t : s->floor_s;
}

static int is_step(const char *name)
{
    return strncmp(name, "Step:ModeKeys.", 14) == 0;
}

/* "Section:NAME:begin" -> NAME into out; 0 when name is no begin. */
static int section_begin(const char *name, char *out, size_t n)
{
    size_t pl = strlen(SECTION_PREFIX), sl = strlen(BEGIN_SUFFIX);
    size_t len = strlen(name);
    if (len <= pl + sl || strncmp(name, SECTION_PREFIX, pl) != 0 ||
        strcmp(name + len - sl, BEGIN_SUFFIX) != 0)
        return 0;
    snprintf(out, n, "%.*s", (int)(len - pl - sl), name + pl);
    return 1;
}

static section *section_get(rank *k, const char *name)
{
    for (uint32_t i = 0; i < k->nsections; i++)
        if (strcmp(k->sections[i].name, name) == 0)
            return &k->sections[i];
    if (k->nsections == MAX_SECTIONS)
        return NULL; /* past the first few: timed by the floor */
    section *c = &k->sections[k->nsections++];
    memset(c, 0, sizeof(*c));
    snprintf(c->name, sizeof(c->name), "%s", name);
    return c;
}

static int pg_scan(void *state, const tw_scan *scan, tw_scan_result *out,
                   char *err, size_t errlen)
{
    pg_state *s = state;
    for (size_t i = 0; i < scan->nevents; i++) {
        const tw_fw_event *e = &scan->events[i];
        if (e->name == NULL || e->node == NULL || (e->flags & TW_EVENT_REPEAT))
            continue;
        rank *k = rank_get(s, e->node);
        if (k == NULL) {
            snprintf(err, errlen,
                     "Progress: out of memory (or more than %d "
                     "ranks)",
                     MAX_RANKS);
            return TW_ERR;
        }
        if (is_step(e->name) &&
            (e->mode == TW_MODE_TRAIN || e->mode == TW_MODE_EVAL)) {
            int m = e->mode == TW_MODE_EVAL ? K_EVAL : K_TRAIN;
            int o = 1 - m;
            /* an interval within one mode: a switch (an evaluation pass)
             * is not a step of either */
            if (k->prev_end_us[m] > 0 && e->end_us > k->prev_end_us[m] &&
                k->prev_end_us[o] < k->prev_end_us[m])
                ring_add(&k->steps[m],
                         (double)(e->end_us - k->prev_end_us[m]) / 1e6);
            if (e->end_us > k->prev_end_us[m])
                k->prev_end_us[m] = e->end_us;
            s->datapoints++;
        } else if (strncmp(e->name, SECTION_PREFIX, strlen(SECTION_PREFIX)) ==
                       0 &&
                   e->end_us > e->start_us) {
            section *c = section_get(k, e->name + strlen(SECTION_PREFIX));
            if (c != NULL)
                ring_add(&c->r, (double)(e->end_us - e->start_us) / 1e6);
        }
    }
    out->condition_met = 0;
    out->rule_triggered = s->triggered;
    out->violations = s->violations;
    out->datapoints = s->datapoints;
    return TW_OK;
}

/* The rank's section now, its timeout and how long it has been silent. */
typedef struct judged {
    double silent_s, timeout_s;
    char where[NAME_LEN];
} judged;

static void rank_judge(const pg_state *s, const rank *k, int64_t now_us,
                       judged *o)
{
    double p99;
    char name[NAME_LEN];
    if (k->last_event[0] == '\0') {
        snprintf(o->where, sizeof(o->where), "initialization");
        o->timeout_s = s->init_s;
        o->silent_s = (double)(now_us - k->first_arrival_us) / 1e6;
        return;
    }
    o->silent_s = (double)(now_us - k->last_arrival_us) / 1e6;
    if (section_begin(k->last_event, name, sizeof(name))) {
        snprintf(o->where, sizeof(o->where), "%s", name);
        if (strncmp(name, "checkpoint", 10) == 0) {
            o->timeout_s = s->ckpt_s;
            return;
        }
        const section *c = NULL;
        for (uint32_t i = 0; i < k->nsections && c == NULL; i++)
            if (strcmp(k->sections[i].name, name) == 0)
                c = &k->sections[i];
        /* never tighter than the step it is part of */
        int m = k->last_mode == TW_MODE_EVAL ? K_EVAL : K_TRAIN;
        double step_t = ring_timeout(s, &k->steps[m], &p99);
        double own = c != NULL ? ring_timeout(s, &c->r, &p99) : s->floor_s;
        o->timeout_s = own > step_t ? own : step_t;
        return;
    }
    int m = k->last_mode == TW_MODE_EVAL ? K_EVAL : K_TRAIN;
    snprintf(o->where, sizeof(o->where), "%s",
             m == K_EVAL ? "evaluation" : "training step");
    o->timeout_s = ring_timeout(s, &k->steps[m], &p99);
}

static int in_user_section(const rank *k)
{
    char name[NAME_LEN];
    return section_begin(k->last_event, name, sizeof(name)) &&
           strncmp(name, "checkpoint", 10) != 0;
}

/* Roles of the stalled ranks (see the header). */
static void assign_roles(pg_state *s)
{
    int stalled_out = 0, any_in = 0;
    int64_t newest = 0;
    for (size_t i = 0; i < s->nranks; i++) {
        rank *k = &s->ranks[i];
        int stalled = k->silent_s > k->timeout_s;
        k->role = stalled ? ROLE_TOGETHER : ROLE_OK;
        if (stalled && !in_user_section(k))
            stalled_out = 1;
        if (in_user_section(k))
            any_in = 1;
        if (k->last_end_us > newest)
            newest = k->last_end_us;
    }
    int behind = 0;
    for (size_t i = 0; i < s->nranks; i++) {
        rank *k = &s->ranks[i];
        if (k->role == ROLE_OK)
            continue;
        if (stalled_out && any_in
                ? !in_user_section(k)
                : (double)(newest - k->last_end_us) / 1e6 > s->tol_s) {
            k->role = ROLE_BEHIND;
            behind = 1;
        }
    }
    s->kind = behind ? ROLE_BEHIND : ROLE_TOGETHER;
    if (!behind)
        return;
    /* the others wait for the ones behind, stalled yet or not */
    for (size_t i = 0; i < s->nranks; i++)
        if (s->ranks[i].role != ROLE_BEHIND)
            s->ranks[i].role = ROLE_WAITING;
}

static int pg_wallclock(void *state, const tw_wallclock *wc,
                        tw_scan_result *out, char *err, size_t errlen)
{
    pg_state *s = state;
    for (size_t i = 0; i < wc->nnodes; i++) {
        const tw_wallclock_node *n = &wc->nodes[i];
        if (n->is_system && !n->is_framework) {
            /* an agent: it proves the machine alive, no more (its JOB_START
             * may have come alone and looked like a rank starting up) */
            rank_drop(s, n->node);
            continue;
        }
        rank *k = rank_get(s, n->node);
        if (k == NULL) {
            snprintf(err, errlen,
                     "Progress: out of memory (or more than %d "
                     "ranks)",
                     MAX_RANKS);
            return TW_ERR;
        }
        if (k->first_arrival_us == 0)
            k->first_arrival_us = n->first_arrival_us;
        if (n->last_event != NULL &&
            n->last_event_arrival_us >= k->last_arrival_us) {
            snprintf(k->last_event, sizeof(k->last_event), "%s", n->last_event);
            k->last_end_us = n->last_event_end_us;
            k->last_step = n->last_event_step;
            k->last_mode = (int32_t)n->last_event_mode;
            k->last_arrival_us = n->last_event_arrival_us;
        }
    }
    if (wc->last_system_arrival_us > s->last_system_us)
        s->last_system_us = wc->last_system_arrival_us;
    size_t stalled = 0, pictured = 0;
    judged now;
    for (size_t i = 0; i < s->nranks; i++) {
        const rank *k = &s->ranks[i];
        rank_judge(s, k, wc->now_us, &now);
        stalled += now.silent_s > now.timeout_s;
        pictured += k->silent_s > k->timeout_s;
    }
    s->last_now_us = wc->now_us;
    out->condition_met = 0;
    /* The episode's picture, refreshed while it lasts and kept after; not
     * while it recovers (fewer ranks stalled than pictured): ranks resume
     * one by one, and the last to resume would look behind the first. */
    int refresh = !s->active || stalled >= pictured;
    if (stalled > 0 && refresh) {
        for (size_t i = 0; i < s->nranks; i++) {
            rank *k = &s->ranks[i];
            rank_judge(s, k, wc->now_us, &now);
            k->silent_s = now.silent_s;
            k->timeout_s = now.timeout_s;
            memcpy(k->where, now.where, sizeof(k->where));
        }
        assign_roles(s);
    }
    if (stalled > 0) {
        if (!s->active) {
            s->active = 1;
            s->episode_us = wc->now_us;
            s->cleared_us = 0;
            s->violations++;
            s->triggered++;
            out->condition_met = 1;
        }
    } else if (s->active) {
        s->active = 0;
        s->cleared_us = wc->now_us;
    }
    out->rule_triggered = s->triggered;
    out->violations = s->violations;
    out->datapoints = s->datapoints;
    return TW_OK;
}

static const char *role_name(int32_t role)
{
    switch (role) {
    case ROLE_BEHIND:
        return "behind";
    case ROLE_WAITING:
        return "waiting";
    case ROLE_TOGETHER:
        return "stopped";
    default:
        return "ok";
    }
}

static int pg_details(void *state, tw_json *j)
{
    pg_state *s = state;
    const tw_host *h = s->host;
    h->json_object_begin(j);
    h->json_key(j, "episodes");
    h->json_int(j, s->violations);
    h->json_key(j, "active");
    h->json_bool(j, s->active);
    h->json_key(j, "episode_us");
    h->json_int(j, s->episode_us);
    h->json_key(j, "cleared_us");
    h->json_int(j, s->cleared_us);
    h->json_key(j, "kind");
    h->json_string(j, s->violations == 0       ? "none"
                      : s->kind == ROLE_BEHIND ? "behind"
                                               : "together");
    h->json_key(j, "ranks");
    h->json_array_begin(j);
    for (size_t i = 0; i < s->nranks; i++) {
        const rank *k = &s->ranks[i];
        h->json_object_begin(j);
        h->json_key(j, "node");
        h->json_string(j, k->node);
        h->json_key(j, "role");
        h->json_string(j, role_name(k->role));
        h->json_key(j, "section");
        h->json_string(j, k->where);
        h->json_key(j, "silent_s");
        h->json_double(j, k->silent_s);
        h->json_key(j, "timeout_s");
        h->json_double(j, k->timeout_s);
        h->json_key(j, "last_event");
        h->json_string(j, k->last_event);
        h->json_key(j, "last_step");
        h->json_int(j, k->last_step);
        h->json_key(j, "last_event_end_us");
        h->json_int(j, k->last_end_us);
        h->json_object_end(j);
    }
    h->json_array_end(j);
    /* where a capture action (issue 21 item 3) puts the stacks and traces
     * of the ranks behind: empty until one runs */
    h->json_key(j, "artifacts");
    h->json_array_begin(j);
    h->json_array_end(j);
    h->json_object_end(j);
    return TW_OK;
}

#define PG_MAGIC 0x50524731u /* "PRG1" */

static void ring_save(tw_ser *w, const ring *r)
{
    tw_ser_u32(w, r->n);
    tw_ser_u32(w, r->next);
    tw_ser_u64(w, r->total);
    for (uint32_t i = 0; i < r->n; i++)
        tw_ser_f64(w, r->v[i]);
}

static void ring_load(tw_deser *d, ring *r)
{
    r->n = tw_deser_u32(d);
    r->next = tw_deser_u32(d);
    r->total = tw_deser_u64(d);
    if (r->n > RING || r->next >= RING) {
        tw_deser_fail(d);
        r->n = 0;
        return;
    }
    for (uint32_t i = 0; i < r->n; i++)
        r->v[i] = tw_deser_f64(d);
}

static int pg_save(void *state, tw_buf *out)
{
    pg_state *s = state;
    tw_ser w;
    tw_ser_init(&w, s->host, out);
    tw_ser_u32(&w, PG_MAGIC);
    tw_ser_i64(&w, s->triggered);
    tw_ser_i64(&w, s->violations);
    tw_ser_i64(&w, s->datapoints);
    tw_ser_u32(&w, (uint32_t)s->active);
    tw_ser_u32(&w, (uint32_t)s->kind);
    tw_ser_i64(&w, s->episode_us);
    tw_ser_i64(&w, s->cleared_us);
    tw_ser_i64(&w, s->last_now_us);
    tw_ser_i64(&w, s->last_system_us);
    tw_ser_u64(&w, s->nranks);
    for (size_t i = 0; i < s->nranks; i++) {
        const rank *k = &s->ranks[i];
        tw_ser_str(&w, k->node);
        tw_ser_i64(&w, k->first_arrival_us);
        tw_ser_str(&w, k->last_event);
        tw_ser_i64(&w, k->last_end_us);
        tw_ser_i64(&w, k->last_step);
        tw_ser_i64(&w, k->last_arrival_us);
        tw_ser_u32(&w, (uint32_t)k->last_mode);
        for (int m = 0; m < 2; m++) {
            tw_ser_i64(&w, k->prev_end_us[m]);
            ring_save(&w, &k->steps[m]);
        }
        tw_ser_u32(&w, k->nsections);
        for (uint32_t c = 0; c < k->nsections; c++) {
            tw_ser_str(&w, k->sections[c].name);
            ring_save(&w, &k->sections[c].r);
        }
        tw_ser_f64(&w, k->silent_s);
        tw_ser_f64(&w, k->timeout_s);
        tw_ser_str(&w, k->where);
        tw_ser_u32(&w, (uint32_t)k->role);
    }
    return tw_ser_ok(&w) ? TW_OK : TW_ERR;
}

/* A saved string into a fixed field; NULL or too long fails the reader. */
static void load_name(tw_deser *d, char *out, size_t n)
{
    char *v = tw_deser_str(d);
    if (v == NULL || strlen(v) >= n)
        tw_deser_fail(d);
    else
        memcpy(out, v, strlen(v) + 1);
    free(v);
}

static int pg_restore(void *state, const void *data, size_t len, char *err,
                      size_t errlen)
{
    pg_state *s = state;
    tw_deser d;
    tw_deser_init(&d, data, len);
    if (tw_deser_u32(&d) != PG_MAGIC) {
        snprintf(err, errlen, "Progress: checkpoint is not from this rule");
        return TW_ERR;
    }
    s->triggered = tw_deser_i64(&d);
    s->violations = tw_deser_i64(&d);
    s->datapoints = tw_deser_i64(&d);
    s->active = (int32_t)tw_deser_u32(&d);
    s->kind = (int32_t)tw_deser_u32(&d);
    s->episode_us = tw_deser_i64(&d);
    s->cleared_us = tw_deser_i64(&d);
    s->last_now_us = tw_deser_i64(&d);
    s->last_system_us = tw_deser_i64(&d);
    uint64_t n = tw_deser_count(&d, 64);
    if (n > MAX_RANKS)
        tw_deser_fail(&d);
    for (uint64_t i = 0; i < n && tw_deser_ok(&d); i++) {
        rank tmp;
        memset(&tmp, 0, sizeof(tmp));
        load_name(&d, tmp.node, sizeof(tmp.node));
        tmp.first_arrival_us = tw_deser_i64(&d);
        load_name(&d, tmp.last_event, sizeof(tmp.last_event));
        tmp.last_end_us = tw_deser_i64(&d);
        tmp.last_step = tw_deser_i64(&d);
        tmp.last_arrival_us = tw_deser_i64(&d);
        tmp.last_mode = (int32_t)tw_deser_u32(&d);
        for (int m = 0; m < 2; m++) {
            tmp.prev_end_us[m] = tw_deser_i64(&d);
            ring_load(&d, &tmp.steps[m]);
        }
        tmp.nsections = tw_deser_u32(&d);
        if (tmp.nsections > MAX_SECTIONS)
            tw_deser_fail(&d);
        for (uint32_t c = 0; c < tmp.nsections && tw_deser_ok(&d); c++) {
            load_name(&d, tmp.sections[c].name, sizeof(tmp.sections[c].name));
            ring_load(&d, &tmp.sections[c].r);
        }
        tmp.silent_s = tw_deser_f64(&d);
        tmp.timeout_s = tw_deser_f64(&d);
        load_name(&d, tmp.where, sizeof(tmp.where));
        tmp.role = (int32_t)tw_deser_u32(&d);
        rank *k = tw_deser_ok(&d) ? rank_get(s, tmp.node) : NULL;
        if (k != NULL)
            *k = tmp;
        else
            tw_deser_fail(&d);
    }
    if (!tw_deser_done(&d)) {
        snprintf(err, errlen,
                 "Progress: checkpoint of %zu bytes is "
                 "truncated or corrupt",
                 len);
        return TW_ERR;
    }
    return TW_OK;
}

/* "14:03:05 UTC" of an event time. */
static void clock_text(int64_t us, char *out, size_t n)
{
    time_t t = (time_t)(us / 1000000);
    struct tm tm;
    if (us <= 0 || gmtime_r(&t, &tm) == NULL) {
        snprintf(out, n, "unknown time");
        return;
    }
    snprintf(out, n, "%02d:%02d:%02d UTC", tm.tm_hour, tm.tm_min, tm.tm_sec);
}

static int pg_finding(void *state, const tw_finding_ctx *ctx, tw_finding *f,
                      char *err, size_t errlen)
{
    pg_state *s = state;
    (void)ctx, (void)err, (void)errlen;
    const rank *first = NULL;
    size_t nbehind = 0, nwaiting = 0, nstopped = 0;
    for (int pass = 0; pass < 2; pass++) /* the ranks behind first */
        for (size_t i = 0; i < s->nranks; i++) {
            const rank *k = &s->ranks[i];
            int lead = k->role == ROLE_BEHIND || k->role == ROLE_TOGETHER;
            if (k->role == ROLE_OK || (pass == 0) != lead)
                continue;
            tw_finding_add_name(f, k->node);
            if (first == NULL)
                first = k;
            nbehind += k->role == ROLE_BEHIND;
            nwaiting += k->role == ROLE_WAITING;
            nstopped += k->role == ROLE_TOGETHER;
        }
    if (first == NULL)
        return TW_OK; /* nothing recorded: the host's generic text */
    f->first_us = s->episode_us;
    f->last_us = s->active ? s->last_now_us : s->cleared_us;
    f->value = first->silent_s;
    f->limit = first->timeout_s;
    snprintf(f->unit, sizeof(f->unit), "s");
    char silent[32], limit[32], at[32], step[48], waiting[160];
    tw_finding_duration(first->silent_s, silent, sizeof(silent));
    tw_finding_duration(first->timeout_s, limit, sizeof(limit));
    clock_text(first->last_end_us, at, sizeof(at));
    if (first->last_step >= 0)
        snprintf(step, sizeof(step), " step %" PRId64, first->last_step);
    else
        step[0] = '\0';
    waiting[0] = '\0';
    if (nwaiting > 0) {
        const rank *w = NULL;
        for (size_t i = 0; i < s->nranks && w == NULL; i++)
            if (s->ranks[i].role == ROLE_WAITING)
                w = &s->ranks[i];
        snprintf(waiting, sizeof(waiting),
                 "; %zu other rank(s) wait for it (e.g. %.40s, in %.40s)",
                 nwaiting, w->node, w->where);
    }
    if (first->last_event[0] == '\0')
        tw_finding_text(f->summary,
                        "%.60s sent no event %s after it started (its "
                        "initialization budget is %s)%s.",
                        first->node, silent, limit, waiting);
    else if (s->kind == ROLE_BEHIND)
        tw_finding_text(f->summary,
                        "%zu rank(s) stopped making progress and the others "
                        "wait: %.60s has been silent %s in %.40s (timeout "
                        "%s); its last event was %.60s%s at %s%s.",
                        nbehind, first->node, silent, first->where, limit,
                        first->last_event, step, at, waiting);
    else
        tw_finding_text(f->summary,
                        "All %zu rank(s) stopped together (a collective "
                        "hang): silent %s in %.40s (timeout %s); last event "
                        "%.60s%s at %s.",
                        nstopped, silent, first->where, limit,
                        first->last_event, step, at);
    char alive[96];
    if (s->last_system_us > 0 && s->last_now_us - s->last_system_us < 60000000)
        snprintf(alive, sizeof(alive),
                 "the agents' system metrics still "
                 "arrive: the machines are up");
    else
        snprintf(alive, sizeof(alive),
                 "no system metrics arrive to prove "
                 "the machines up");
    if (s->active)
        tw_finding_text(f->magnitude,
                        "silent %s > timeout %s, still stalled (%zu behind, "
                        "%zu waiting, %zu stopped together); %s",
                        silent, limit, nbehind, nwaiting, nstopped, alive);
    else {
        char cleared[32];
        clock_text(s->cleared_us, cleared, sizeof(cleared));
        tw_finding_text(f->magnitude,
                        "silent %s > timeout %s; progress resumed at %s (%lld "
                        "stall(s) so far); %s",
                        silent, limit, cleared, (long long)s->violations,
                        alive);
    }
    if (s->kind == ROLE_BEHIND)
        tw_finding_text(f->recommendation,
                        "Look at what %.60s does after its last event: dump "
                        "its Python stacks (py-spy dump --pid, or the "
                        "capture action's artifacts in this rule's "
                        "details), look for a data loader, I/O or a lock it "
                        "waits on; the others block in the collective until "
                        "it comes or the backend's timeout kills the job.",
                        first->node);
    else
        tw_finding_text(f->recommendation,
                        "Every rank is blocked: dump their stacks (py-spy, or "
                        "the capture action's artifacts), compare the "
                        "collectives they are in (mismatched order or "
                        "shapes), and check the network between the nodes; "
                        "set the backend timeout so a hang fails fast.");
    tw_finding_text(f->parameters,
                    "timeout max(%g x p99 of the section's intervals after "
                    "%lld, floor %g s); initialization %g s, checkpoint %g s, "
                    "tolerance %g s",
                    s->mult, (long long)s->warmup, s->floor_s, s->init_s,
                    s->ckpt_s, s->tol_s);
    return TW_OK;
}

static const tw_rule_descriptor pg_descriptor = {
    .abi_version = TW_PLUGIN_ABI_VERSION,
    .name = "Progress",
    .description =
        "Flags ranks that stop making progress (hangs and stalls) per "
        "section on the engine's wall clock, with timeouts learned from "
        "the job: max(multiplier x p99 of the section's intervals, floor); "
        "initialization and checkpoint sections have budgets. Tells ranks "
        "that fell behind from ranks that wait for them.",
    .params = pg_params,
    .nparams = P_COUNT,
    .create = pg_create,
    .scan = pg_scan,
    .details = pg_details,
    .save = pg_save,
    .restore = pg_restore,
    .destroy = pg_destroy,
    .finding = pg_finding,
    .finding_help =
        "Some ranks made no progress for longer than their section's "
        "timeout. When a few fell behind and the others wait in a "
        "collective, look at the ones behind first (their stacks, their "
        "data loading, their disk); when all stopped together, look at the "
        "collectives and the network. Wrap collectives in "
        "hook.section(\"allreduce\") so waiting ranks are told apart from "
        "the ranks they wait for.",
};

TW_PLUGIN_EXPORT const tw_rule_descriptor *trainwatch_rule(void)
{
    return &pg_descriptor;
}

TW_PLUGIN_EXPORT uint32_t trainwatch_rule_inputs(void)
{
    return TW_INPUT_FRAMEWORK;
}

TW_PLUGIN_EXPORT int trainwatch_rule_wallclock(void *state,
                                               const tw_wallclock *wc,
                                               tw_scan_result *out, char *err,
                                               size_t errlen)
{
    return pg_wallclock(state, wc, out, err, errlen);
}
