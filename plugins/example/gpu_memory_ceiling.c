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
 * State: one counter per series, grown as series appear: 8 bytes x series.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <trainwatch/plugin.h>

typedef struct ceiling_rule {
    const tw_host *host;
    double ceiling;
    int64_t patience;
    int64_t *streak; /* consecutive samples above the ceiling, per series */
    size_t nstreak;
    int64_t triggered, violations, datapoints;
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

static int scan(void *state, const tw_scan *s, tw_scan_result *out,
                char *err, size_t errlen)
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
            if (++r->streak[x->series] == r->patience + 1) {
                r->violations++;
                met = 1;
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
    .save = NULL,
    .restore = NULL,
    .destroy = destroy,
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
