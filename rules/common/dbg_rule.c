/* dbg_rule.c - the shared driver of the debugging rules (dbg_rule.h). */
#include "dbg_rule.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DBG_MAGIC 0x31474244u /* "DBG1" */

/* Where and when the condition held. */
typedef struct dbg_fire {
    int set;
    char node[TW_FINDING_NAME_LEN];
    int64_t step;
    dbg_hit hit;
} dbg_fire;

struct dbg_rule {
    const dbg_rule_ops *ops;
    const tw_host *host;
    tw_tensor_select sel;
    int all_if_empty;
    tw_tensor_steps steps;
    int stop_first;
    void *impl;
    int64_t triggered, violations, datapoints;
    int stopped;
    dbg_fire first, last;
    const tw_tensor **buf; /* scratch: one group's selected tensors */
    size_t cap;
};

static const char *mode_name(tw_mode m)
{
    switch (m) {
    case TW_MODE_TRAIN:
        return "TRAIN";
    case TW_MODE_EVAL:
        return "EVAL";
    case TW_MODE_PREDICT:
        return "PREDICT";
    case TW_MODE_GLOBAL:
        return "GLOBAL";
    default:
        return "NONE";
    }
}

double dbg_get(const tw_tensor *t, const char *op, int *found)
{
    double v;
    *found = tw_tensor_get(t, op, &v);
    return *found ? v : NAN;
}

int dbg_scalar(const tw_tensor *t, double *out)
{
    if (tw_tensor_get(t, "value", out))
        return 1;
    if (t->nraw == 1) {
        *out = t->raw[0];
        return 1;
    }
    return 0;
}

void dbg_hit_set(dbg_hit *hit, const tw_tensor *t, double value, double limit,
                 const char *fmt, ...)
{
    snprintf(hit->tensor, sizeof(hit->tensor), "%s", t->name);
    hit->mode = t->mode;
    hit->mode_step = t->mode_step;
    hit->wall_us = t->wall_us;
    hit->value = value;
    hit->limit = limit;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(hit->what, sizeof(hit->what), fmt, ap);
    va_end(ap);
}

int dbg_rule_create(const dbg_rule_ops *ops, const tw_host *host,
                    const tw_params *params, void **state, char *err,
                    size_t errlen)
{
    size_t want = ops->nown + (ops->select ? DBG_NSELECT : 0) + DBG_NCOMMON;
    if (params->nvalues != want) {
        snprintf(err, errlen, "%s: expected %zu parameter(s), got %zu",
                 ops->name, want, params->nvalues);
        return TW_ERR;
    }
    const tw_param_value *v = params->values;
    const tw_param_value *start = &v[dbg_common_index(ops, 0)];
    const tw_param_value *end = &v[dbg_common_index(ops, 1)];
    const tw_param_value *mode = &v[dbg_common_index(ops, 2)];
    const tw_param_value *stop = &v[dbg_common_index(ops, 3)];
    dbg_rule *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        snprintf(err, errlen, "%s: out of memory", ops->name);
        return TW_ERR;
    }
    r->ops = ops;
    r->host = host;
    r->steps.start_step = start->is_none ? 0 : start->i;
    r->steps.end_step = end->is_none ? -1 : end->i;
    r->stop_first = stop->is_none ? 1 : stop->i != 0;
    r->steps.mode = TW_MODE_NONE;
    if (!mode->is_none &&
        tw_tensor_mode_parse(mode->s, &r->steps.mode) != TW_OK) {
        snprintf(err, errlen,
                 "%s: mode '%s' is none of TRAIN, EVAL, PREDICT, GLOBAL",
                 ops->name, mode->s);
        free(r);
        return TW_ERR;
    }
    if (ops->mode_is_own)
        r->steps.mode = TW_MODE_NONE;
    if (r->steps.end_step >= 0 && r->steps.end_step <= r->steps.start_step) {
        snprintf(err, errlen,
                 "%s: end_step %lld is not after start_step %lld (end_step "
                 "is exclusive)",
                 ops->name, (long long)r->steps.end_step,
                 (long long)r->steps.start_step);
        free(r);
        return TW_ERR;
    }
    const char *colls = NULL, *regex = NULL;
    if (ops->select) {
        const tw_param_value *c = &v[ops->nown], *x = &v[ops->nown + 1];
        colls = c->is_none ? NULL : c->s;
        regex = x->is_none ? NULL : x->s;
    }
    char why[256];
    if (tw_tensor_select_init(&r->sel, colls, regex, why, sizeof(why)) !=
        TW_OK) {
        snprintf(err, errlen, "%s: tensor_regex: %s", ops->name, why);
        free(r);
        return TW_ERR;
    }
    if (tw_tensor_select_empty(&r->sel)) {
        if (ops->require_selection) {
            snprintf(err, errlen,
                     "%s: needs collection_names or tensor_regex (or both)",
                     ops->name);
            dbg_rule_destroy(r);
            return TW_ERR;
        }
        if (ops->default_collections != NULL &&
            tw_tensor_select_init(&r->sel, ops->default_collections, NULL, why,
                                  sizeof(why)) != TW_OK) {
            snprintf(err, errlen, "%s: %s", ops->name, why);
            free(r);
            return TW_ERR;
        }
    }
    r->all_if_empty = ops->all_if_empty;
    if (ops->create != NULL && ops->create(v, &r->impl, err, errlen) != TW_OK) {
        tw_tensor_select_free(&r->sel);
        free(r);
        return TW_ERR;
    }
    *state = r;
    return TW_OK;
}

void dbg_rule_destroy(void *state)
{
    dbg_rule *r = state;
    if (r == NULL)
        return;
    if (r->ops->destroy != NULL)
        r->ops->destroy(r->impl);
    tw_tensor_select_free(&r->sel);
    free(r->buf);
    free(r);
}

static void record_fire(dbg_fire *f, const char *node, int64_t step,
                        const dbg_hit *hit)
{
    f->set = 1;
    snprintf(f->node, sizeof(f->node), "%s", node);
    f->step = step;
    f->hit = *hit;
}

/* Evaluates one (node, step) group [from, to) of the scan. 1: fired. */
static int eval_group(dbg_rule *r, const tw_tensor *t, size_t n, char *err,
                      size_t errlen)
{
    if (n > r->cap) {
        const tw_tensor **b = realloc(r->buf, n * sizeof(*b));
        if (b == NULL) {
            snprintf(err, errlen, "%s: out of memory", r->ops->name);
            return TW_ERR;
        }
        r->buf = b;
        r->cap = n;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (tw_tensor_steps_admit(&r->steps, t[i].step, t[i].mode) &&
            !tw_tensor_is_heartbeat(&t[i]) &&
            (tw_tensor_select_match(&r->sel, &t[i], r->all_if_empty) ||
             (r->ops->select_extra != NULL &&
              r->ops->select_extra(r->impl, &t[i]))))
            r->buf[k++] = &t[i];
    if (k == 0)
        return 0;
    dbg_step st = {t[0].node, t[0].step, r->buf, k};
    dbg_hit hit;
    memset(&hit, 0, sizeof(hit));
    r->datapoints++;
    int rc = r->ops->step(r->impl, &st, &hit, err, errlen);
    if (rc == TW_ERR)
        return TW_ERR;
    if (rc != 1)
        return 0;
    r->violations++;
    if (!r->first.set)
        record_fire(&r->first, st.node, st.step, &hit);
    record_fire(&r->last, st.node, st.step, &hit);
    return 1;
}

int dbg_rule_scan(void *state, const tw_scan *scan, tw_scan_result *out,
                  char *err, size_t errlen)
{
    dbg_rule *r = state;
    int met = 0;
    size_t n = scan->ntensors;
    for (size_t i = 0; i < n && !r->stopped;) {
        size_t j = i + 1;
        while (j < n && scan->tensors[j].step == scan->tensors[i].step &&
               strcmp(scan->tensors[j].node, scan->tensors[i].node) == 0)
            j++;
        int rc = eval_group(r, &scan->tensors[i], j - i, err, errlen);
        if (rc == TW_ERR)
            return TW_ERR;
        if (rc == 1) {
            met = 1;
            if (r->stop_first)
                r->stopped = 1;
        }
        i = j;
    }
    if (met)
        r->triggered++;
    out->condition_met = met;
    out->rule_triggered = r->triggered;
    out->violations = r->violations;
    out->datapoints = r->datapoints;
    return TW_OK;
}

static void json_fire(const tw_host *h, tw_json *j, const char *key,
                      const dbg_fire *f)
{
    h->json_key(j, key);
    h->json_object_begin(j);
    h->json_key(j, "node");
    h->json_string(j, f->node);
    h->json_key(j, "step");
    h->json_int(j, f->step);
    h->json_key(j, "mode");
    h->json_string(j, mode_name(f->hit.mode));
    h->json_key(j, "mode_step");
    h->json_int(j, f->hit.mode_step);
    h->json_key(j, "wall_us");
    h->json_int(j, f->hit.wall_us);
    h->json_key(j, "tensor");
    h->json_string(j, f->hit.tensor);
    h->json_key(j, "value");
    h->json_double(j, f->hit.value);
    h->json_key(j, "limit");
    h->json_double(j, f->hit.limit);
    h->json_key(j, "condition");
    h->json_string(j, f->hit.what);
    h->json_object_end(j);
}

int dbg_rule_details(void *state, tw_json *j)
{
    dbg_rule *r = state;
    const tw_host *h = r->host;
    h->json_object_begin(j);
    h->json_key(j, "steps_evaluated");
    h->json_int(j, r->datapoints);
    h->json_key(j, "steps_fired");
    h->json_int(j, r->violations);
    h->json_key(j, "stopped_at_first_fire");
    h->json_bool(j, r->stopped);
    if (r->first.set) {
        json_fire(h, j, "first_fire", &r->first);
        json_fire(h, j, "last_fire", &r->last);
    }
    h->json_object_end(j);
    return TW_OK;
}

static void ser_fire(tw_ser *s, const dbg_fire *f)
{
    tw_ser_u8(s, (uint8_t)f->set);
    tw_ser_str(s, f->node);
    tw_ser_i64(s, f->step);
    tw_ser_str(s, f->hit.tensor);
    tw_ser_u8(s, (uint8_t)f->hit.mode);
    tw_ser_i64(s, f->hit.mode_step);
    tw_ser_i64(s, f->hit.wall_us);
    tw_ser_f64(s, f->hit.value);
    tw_ser_f64(s, f->hit.limit);
    tw_ser_str(s, f->hit.what);
}

/* A restored string into a fixed field (cut to fit, as when recorded). */
static void deser_into(tw_deser *d, char *out, size_t cap)
{
    char *v = tw_deser_str(d);
    snprintf(out, cap, "%s", v != NULL ? v : "");
    free(v);
}

static void deser_fire(tw_deser *d, dbg_fire *f)
{
    f->set = tw_deser_u8(d) != 0;
    deser_into(d, f->node, sizeof(f->node));
    f->step = tw_deser_i64(d);
    deser_into(d, f->hit.tensor, sizeof(f->hit.tensor));
    uint8_t mode = tw_deser_u8(d);
    if (mode > TW_MODE_GLOBAL)
        tw_deser_fail(d);
    f->hit.mode = (tw_mode)mode;
    f->hit.mode_step = tw_deser_i64(d);
    f->hit.wall_us = tw_deser_i64(d);
    f->hit.value = tw_deser_f64(d);
    f->hit.limit = tw_deser_f64(d);
    deser_into(d, f->hit.what, sizeof(f->hit.what));
}

int dbg_rule_save(void *state, tw_buf *out)
{
    dbg_rule *r = state;
    tw_ser s;
    tw_ser_init(&s, r->host, out);
    tw_ser_u32(&s, DBG_MAGIC);
    tw_ser_str(&s, r->ops->name);
    tw_ser_i64(&s, r->triggered);
    tw_ser_i64(&s, r->violations);
    tw_ser_i64(&s, r->datapoints);
    tw_ser_u8(&s, (uint8_t)r->stopped);
    ser_fire(&s, &r->first);
    ser_fire(&s, &r->last);
    if (r->ops->save != NULL)
        r->ops->save(r->impl, &s);
    return tw_ser_ok(&s) ? TW_OK : TW_ERR;
}

int dbg_rule_restore(void *state, const void *data, size_t len, char *err,
                     size_t errlen)
{
    dbg_rule *r = state;
    tw_deser d;
    tw_deser_init(&d, data, len);
    uint32_t magic = tw_deser_u32(&d);
    char *name = tw_deser_str(&d);
    int same =
        magic == DBG_MAGIC && name != NULL && strcmp(name, r->ops->name) == 0;
    free(name);
    if (!same) {
        snprintf(err, errlen, "%s: checkpoint is not from this rule",
                 r->ops->name);
        return TW_ERR;
    }
    r->triggered = tw_deser_i64(&d);
    r->violations = tw_deser_i64(&d);
    r->datapoints = tw_deser_i64(&d);
    r->stopped = tw_deser_u8(&d) != 0;
    deser_fire(&d, &r->first);
    deser_fire(&d, &r->last);
    if (r->ops->restore != NULL && r->ops->restore(r->impl, &d) != TW_OK)
        tw_deser_fail(&d);
    if (!tw_deser_ok(&d) || !tw_deser_done(&d)) {
        snprintf(err, errlen, "%s: checkpoint of %zu bytes is corrupt",
                 r->ops->name, len);
        return TW_ERR;
    }
    return TW_OK;
}

int dbg_rule_finding(void *state, const tw_finding_ctx *ctx, tw_finding *f,
                     char *err, size_t errlen)
{
    dbg_rule *r = state;
    (void)ctx, (void)err, (void)errlen;
    if (!r->first.set)
        return TW_OK;
    const dbg_fire *a = &r->first, *b = &r->last;
    tw_finding_add_name(f, a->node);
    tw_finding_add_name(f, b->node);
    tw_finding_time(f, a->hit.wall_us);
    tw_finding_time(f, b->hit.wall_us);
    f->value = a->hit.value;
    f->limit = a->hit.limit;
    tw_finding_text(
        f->summary, "%s at step %lld (%s step %lld) on %s: tensor %s, %s.",
        r->ops->condition, (long long)a->step, mode_name(a->hit.mode),
        (long long)a->hit.mode_step, a->node, a->hit.tensor, a->hit.what);
    if (r->violations > 1)
        tw_finding_text(f->magnitude,
                        "held at %lld of %lld evaluated steps, from step %lld "
                        "to step %lld (last: %s, %s)",
                        (long long)r->violations, (long long)r->datapoints,
                        (long long)a->step, (long long)b->step, b->hit.tensor,
                        b->hit.what);
    else
        tw_finding_text(
            f->magnitude, "held at step %lld, 1 of %lld evaluated steps%s",
            (long long)a->step, (long long)r->datapoints,
            r->stopped ? "; evaluation stopped at this first fire" : "");
    tw_finding_text(f->recommendation, "%s", r->ops->recommendation);
    return TW_OK;
}

void dbg_map_init(dbg_map *m, size_t words)
{
    memset(m, 0, sizeof(*m));
    m->words = words;
}

void *dbg_map_get(dbg_map *m, const char *name, tw_mode mode, int create)
{
    for (size_t i = 0; i < m->n; i++)
        if (m->modes[i] == mode && strcmp(m->names[i], name) == 0)
            return &m->data[i * m->words];
    if (!create)
        return NULL;
    if (m->n == m->cap) {
        size_t cap = m->cap ? 2 * m->cap : 16;
        char **names = realloc(m->names, cap * sizeof(*names));
        if (names == NULL)
            return NULL;
        m->names = names;
        tw_mode *modes = realloc(m->modes, cap * sizeof(*modes));
        if (modes == NULL)
            return NULL;
        m->modes = modes;
        uint64_t *data = realloc(m->data, cap * m->words * sizeof(*data));
        if (data == NULL)
            return NULL;
        m->data = data;
        m->cap = cap;
    }
    char *copy = strdup(name);
    if (copy == NULL)
        return NULL;
    m->names[m->n] = copy;
    m->modes[m->n] = mode;
    memset(&m->data[m->n * m->words], 0, m->words * sizeof(uint64_t));
    return &m->data[m->n++ * m->words];
}

void dbg_map_free(dbg_map *m)
{
    for (size_t i = 0; i < m->n; i++)
        free(m->names[i]);
    free(m->names);
    free(m->modes);
    free(m->data);
    memset(m, 0, sizeof(*m));
}

void dbg_map_save(const dbg_map *m, tw_ser *s)
{
    tw_ser_u64(s, m->n);
    for (size_t i = 0; i < m->n; i++) {
        tw_ser_str(s, m->names[i]);
        tw_ser_u8(s, (uint8_t)m->modes[i]);
        for (size_t w = 0; w < m->words; w++)
            tw_ser_u64(s, m->data[i * m->words + w]);
    }
}

int dbg_map_restore(dbg_map *m, tw_deser *d)
{
    uint64_t n = tw_deser_count(d, 5 + 8 * m->words);
    for (uint64_t i = 0; i < n && tw_deser_ok(d); i++) {
        char *name = tw_deser_str(d);
        uint8_t mode = tw_deser_u8(d);
        if (name == NULL || mode > TW_MODE_GLOBAL) {
            free(name);
            return TW_ERR;
        }
        uint64_t *p = dbg_map_get(m, name, (tw_mode)mode, 1);
        free(name);
        if (p == NULL)
            return TW_ERR;
        for (size_t w = 0; w < m->words; w++)
            p[w] = tw_deser_u64(d);
    }
    return tw_deser_ok(d) ? TW_OK : TW_ERR;
}

double dbg_variance(const double *v, size_t n)
{
    if (n == 0)
        return NAN;
    double mean = 0;
    for (size_t i = 0; i < n; i++)
        mean += v[i];
    mean /= (double)n;
    double ss = 0;
    for (size_t i = 0; i < n; i++)
        ss += (v[i] - mean) * (v[i] - mean);
    return ss / (double)n;
}
