/*
 * gpu_memory_ceiling.c - an example custom rule for trainwatch.
 *
 * Fires when a GPU's memory utilization has stayed above `ceiling` percent
 * for more than `patience` consecutive samples: a sign that the next batch
 * may not fit. Build it out of tree (see docs/plugins.md) and
 * configure it as
 *
 *     - name: GPUMemoryCeiling
 *       source: /path/to/gpu_memory_ceiling.so
 *       rule_to_invoke: gpu_memory_ceiling_rule
 *       parameters: {ceiling: 95, patience: 20}
 *
 * State: one counter per series, grown as series appear: 8 bytes x series,
 * plus what the finding names (the worst series, the first and last
 * violation times). All of it is saved: a rule that keeps state between
 * scans must save and restore it, or a host with a persistent store
 * refuses it (plugin.h, TW_RULE_STATELESS).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <trainwatch/finding.h>
#include <trainwatch/plugin.h>
#include <trainwatch/ser.h>

typedef struct ceiling_rule {
    const tw_host *host;
    double ceiling;
    int64_t patience;
    int64_t *streak; /* consecutive samples above the ceiling, per series */
    size_t nstreak;
    int64_t triggered, violations, datapoints;
    /* for the finding */
    int64_t first_us, last_us; /* first and last violation            */
    int64_t worst_streak;      /* longest streak above the ceiling     */
    uint32_t worst_series;     /* the series that had it               */
    uint32_t worst_node;       /* its node (index into tw_scan.nodes)  */
    char worst_name[32];       /* its GPU's name                       */
} ceiling_rule;

static const tw_param_spec params[] = {
    {"ceiling", TW_PARAM_DOUBLE, "95", 0, 100,
     "GPU memory utilization (%) above which a sample counts"},
    {"patience", TW_PARAM_INT, "20", 1, 1e9,
     "consecutive samples above the ceiling that make a violation"},
};

static int create(const tw_host *host, const tw_params *p, void **state,
                  char *err, size_t errlen)
{
    ceiling_rule *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        snprintf(err, errlen, "out of memory");
        return TW_ERR;
    }
    r->host = host;
    r->ceiling = p->values[0].d;
    r->patience = p->values[1].i;
    *state = r;
    return TW_OK;
}

static int scan(void *state, const tw_scan *s, tw_scan_result *out, char *err,
                size_t errlen)
{
    ceiling_rule *r = state;
    if (s->nseries > r->nstreak) {
        int64_t *ns = realloc(r->streak, s->nseries * sizeof(int64_t));
        if (ns == NULL) {
            snprintf(err, errlen, "out of memory for %zu series", s->nseries);
            return TW_ERR;
        }
        memset(ns + r->nstreak, 0, (s->nseries - r->nstreak) * sizeof(int64_t));
        r->streak = ns;
        r->nstreak = s->nseries;
    }
    int met = 0;
    for (size_t i = 0; i < s->nsamples; i++) {
        const tw_sample *x = &s->samples[i];
        if (s->series[x->series].metric != TW_METRIC_GPU_MEM)
            continue;
        r->datapoints++;
        if (x->value > r->ceiling) {
            int64_t run = ++r->streak[x->series];
            if (run == r->patience + 1) {
                int64_t t = (int64_t)(x->ts * 1e6);
                r->violations++;
                met = 1;
                if (r->first_us == 0)
                    r->first_us = t;
                r->last_us = t;
            }
            if (run > r->worst_streak) {
                const tw_series *se = &s->series[x->series];
                r->worst_streak = run;
                r->worst_series = x->series;
                r->worst_node = se->node;
                snprintf(r->worst_name, sizeof(r->worst_name), "%s",
                         se->name != NULL ? se->name : "gpu");
            }
        } else {
            r->streak[x->series] = 0;
        }
    }
    if (met)
        r->triggered++;
    out->condition_met = met;
    out->rule_triggered = r->triggered;
    out->violations = r->violations;
    out->datapoints = r->datapoints;
    return TW_OK;
}

/* The report's Details: the longest run so far and where. The host
 * writes the rest of the report (counters from scan(), the parameters). */
static int details(void *state, tw_json *j)
{
    ceiling_rule *r = state;
    const tw_host *h = r->host;
    h->json_object_begin(j);
    h->json_key(j, "longest_run");
    h->json_int(j, r->worst_streak);
    if (r->worst_streak > 0) {
        h->json_key(j, "gpu");
        h->json_string(j, r->worst_name);
    }
    h->json_object_end(j);
    return TW_OK;
}

/* What a person reads: where, since when, how much, what to do. */
static int finding(void *state, const tw_finding_ctx *ctx, tw_finding *f,
                   char *err, size_t errlen)
{
    ceiling_rule *r = state;
    (void)err, (void)errlen;
    char where[TW_FINDING_NAME_LEN];
    const char *node =
        r->worst_node < ctx->nnodes ? ctx->nodes[r->worst_node] : "?";
    snprintf(where, sizeof(where), "%s/%s", node, r->worst_name);
    tw_finding_add_name(f, where);
    f->first_us = r->first_us;
    f->last_us = r->last_us;
    f->value = (double)r->worst_streak;
    f->limit = (double)r->patience;
    snprintf(f->unit, sizeof(f->unit), "samples");
    tw_finding_text(f->summary,
                    "GPU memory stayed above %g %% for longer than %lld "
                    "samples %lld time(s); the next larger batch may not fit.",
                    r->ceiling, (long long)r->patience,
                    (long long)r->violations);
    tw_finding_text(f->magnitude,
                    "longest run above %g %%: %lld consecutive samples on %s "
                    "(patience %lld); %lld of %lld samples checked",
                    r->ceiling, (long long)r->worst_streak, where,
                    (long long)r->patience, (long long)r->violations,
                    (long long)r->datapoints);
    tw_finding_text(f->recommendation,
                    "Lower the batch size or the model's activation memory "
                    "(mixed precision, gradient checkpointing) on %s before "
                    "it runs out of memory.",
                    where);
    tw_finding_text(f->parameters, "ceiling %g %%, patience %lld samples",
                    r->ceiling, (long long)r->patience);
    return TW_OK;
}

/* Checkpoint, through trainwatch/ser.h (fixed-width little-endian
 * fields, doubles bit-exact, bounds-checked reads): a version word, the
 * counters, the finding's facts, then the streak of every series. */
#define CEILING_CKPT_VERSION 2u

static int save(void *state, tw_buf *out)
{
    ceiling_rule *r = state;
    tw_ser s;
    tw_ser_init(&s, r->host, out);
    tw_ser_u32(&s, CEILING_CKPT_VERSION);
    tw_ser_i64(&s, r->triggered);
    tw_ser_i64(&s, r->violations);
    tw_ser_i64(&s, r->datapoints);
    tw_ser_i64(&s, r->first_us);
    tw_ser_i64(&s, r->last_us);
    tw_ser_i64(&s, r->worst_streak);
    tw_ser_u32(&s, r->worst_series);
    tw_ser_u32(&s, r->worst_node);
    tw_ser_str(&s, r->worst_name);
    tw_ser_u64(&s, r->nstreak);
    for (size_t i = 0; i < r->nstreak; i++)
        tw_ser_i64(&s, r->streak[i]);
    return tw_ser_ok(&s) ? TW_OK : TW_ERR;
}

static int restore(void *state, const void *data, size_t len, char *err,
                   size_t errlen)
{
    ceiling_rule *r = state;
    tw_deser d;
    tw_deser_init(&d, data, len);
    uint32_t version = tw_deser_u32(&d);
    if (tw_deser_ok(&d) && version != CEILING_CKPT_VERSION) {
        snprintf(err, errlen, "checkpoint version %u, this build reads %u",
                 version, CEILING_CKPT_VERSION);
        return TW_ERR;
    }
    r->triggered = tw_deser_i64(&d);
    r->violations = tw_deser_i64(&d);
    r->datapoints = tw_deser_i64(&d);
    r->first_us = tw_deser_i64(&d);
    r->last_us = tw_deser_i64(&d);
    r->worst_streak = tw_deser_i64(&d);
    r->worst_series = tw_deser_u32(&d);
    r->worst_node = tw_deser_u32(&d);
    char *name = tw_deser_str(&d);
    snprintf(r->worst_name, sizeof(r->worst_name), "%s", name ? name : "");
    free(name);
    /* the count is checked against the bytes left before allocating */
    uint64_t n = tw_deser_count(&d, sizeof(int64_t));
    int64_t *streak = n > 0 ? malloc(n * sizeof(int64_t)) : NULL;
    if (n > 0 && streak == NULL) {
        snprintf(err, errlen, "out of memory for %llu series",
                 (unsigned long long)n);
        return TW_ERR;
    }
    for (uint64_t i = 0; i < n; i++)
        streak[i] = tw_deser_i64(&d);
    if (!tw_deser_done(&d)) {
        free(streak);
        snprintf(err, errlen,
                 "checkpoint of %zu bytes is truncated or has extra bytes",
                 len);
        return TW_ERR;
    }
    free(r->streak);
    r->streak = streak;
    r->nstreak = (size_t)n;
    return TW_OK;
}

static void destroy(void *state)
{
    ceiling_rule *r = state;
    free(r->streak);
    free(r);
}

static const tw_rule_descriptor descriptor = {
    .abi_version = TW_PLUGIN_ABI_VERSION,
    .name = "GPUMemoryCeiling",
    .description = "GPU memory above a ceiling for too long",
    .params = params,
    .nparams = sizeof(params) / sizeof(params[0]),
    .create = create,
    .scan = scan,
    .details = details,
    .save = save,
    .restore = restore,
    .destroy = destroy,
    .flags = 0, /* keeps state between scans: save/restore are required */
    .finding = finding,
    .finding_help = "A GPU's memory stayed above the ceiling for longer than "
                    "`patience` samples: the next larger batch or sequence "
                    "may not fit. Lower the batch size or the activation "
                    "memory (mixed precision, gradient checkpointing).",
};

TW_PLUGIN_EXPORT const tw_rule_descriptor *gpu_memory_ceiling_rule(void)
{
    return &descriptor;
}

/* Optional (plugin.h): the rule reads system samples only, so a job that
 * sent no system data reports it NoData instead of healthy. */
TW_PLUGIN_EXPORT uint32_t gpu_memory_ceiling_rule_inputs(void)
{
    return TW_INPUT_SYSTEM;
}
