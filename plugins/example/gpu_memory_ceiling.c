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

static int report(void *state, tw_json *j)
{
    ceiling_rule *r = state;
    const tw_host *h = r->host;
    h->json_object_begin(j);
    h->json_key(j, "RuleTriggered");
    h->json_int(j, r->triggered);
    h->json_key(j, "Violations");
    h->json_int(j, r->violations);
    h->json_key(j, "Details");
    h->json_object_begin(j);
    h->json_object_end(j);
    h->json_key(j, "Datapoints");
    h->json_int(j, r->datapoints);
    h->json_key(j, "RuleParameters");
    char text[128];
    snprintf(text, sizeof(text), "ceiling:%g\npatience:%lld", r->ceiling,
             (long long)r->patience);
    h->json_string(j, text);
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

/* Checkpoint: a version word, the counters, the finding's facts, then
 * one streak per series. Native byte order: checkpoints are read back by
 * the same build on the same kind of machine. */
#define CEILING_CKPT_VERSION 1u

typedef struct ceiling_wire {
    uint32_t version;
    uint32_t worst_series, worst_node;
    uint32_t pad;
    int64_t triggered, violations, datapoints;
    int64_t first_us, last_us, worst_streak;
    uint64_t nstreak;
    char worst_name[32];
} ceiling_wire;

static int save(void *state, tw_buf *out)
{
    ceiling_rule *r = state;
    ceiling_wire w;
    memset(&w, 0, sizeof(w));
    w.version = CEILING_CKPT_VERSION;
    w.worst_series = r->worst_series;
    w.worst_node = r->worst_node;
    w.triggered = r->triggered;
    w.violations = r->violations;
    w.datapoints = r->datapoints;
    w.first_us = r->first_us;
    w.last_us = r->last_us;
    w.worst_streak = r->worst_streak;
    w.nstreak = r->nstreak;
    memcpy(w.worst_name, r->worst_name, sizeof(w.worst_name));
    if (r->host->buf_write(out, &w, sizeof(w)) != TW_OK)
        return TW_ERR;
    return r->host->buf_write(out, r->streak, r->nstreak * sizeof(int64_t));
}

static int restore(void *state, const void *data, size_t len, char *err,
                   size_t errlen)
{
    ceiling_rule *r = state;
    ceiling_wire w;
    if (len < sizeof(w)) {
        snprintf(err, errlen, "checkpoint of %zu bytes is truncated", len);
        return TW_ERR;
    }
    memcpy(&w, data, sizeof(w));
    if (w.version != CEILING_CKPT_VERSION ||
        w.nstreak != (len - sizeof(w)) / sizeof(int64_t) ||
        (len - sizeof(w)) % sizeof(int64_t) != 0) {
        snprintf(err, errlen,
                 "checkpoint is not version %u or has a bad "
                 "series count",
                 CEILING_CKPT_VERSION);
        return TW_ERR;
    }
    int64_t *streak = NULL;
    if (w.nstreak > 0) {
        streak = malloc(w.nstreak * sizeof(int64_t));
        if (streak == NULL) {
            snprintf(err, errlen, "out of memory for %llu series",
                     (unsigned long long)w.nstreak);
            return TW_ERR;
        }
        memcpy(streak, (const char *)data + sizeof(w),
               w.nstreak * sizeof(int64_t));
    }
    free(r->streak);
    r->streak = streak;
    r->nstreak = (size_t)w.nstreak;
    r->triggered = w.triggered;
    r->violations = w.violations;
    r->datapoints = w.datapoints;
    r->first_us = w.first_us;
    r->last_us = w.last_us;
    r->worst_streak = w.worst_streak;
    r->worst_series = w.worst_series;
    r->worst_node = w.worst_node;
    memcpy(r->worst_name, w.worst_name, sizeof(r->worst_name));
    r->worst_name[sizeof(r->worst_name) - 1] = '\0';
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
    .report = report,
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
