/* Test fixture: a rule as an ABI 1 plugin describes it (abi_version 1, no
 * finding(), no flags) that keeps state between scans yet has no
 * save/restore. The host must still run it and describe its findings
 * generically, and refuse it where a persistent store would restore jobs
 * (plugin.h). Fires on every scan with more than `limit` samples. */
#include <stdio.h>
#include <stdlib.h>

#include <trainwatch/plugin.h>

typedef struct counter {
    int64_t limit, triggered, violations, datapoints;
} counter;

static const tw_param_spec params[] = {
    {"limit", TW_PARAM_INT, "1", 0, 1000, "samples a scan may have"},
};
static int create(const tw_host *h, const tw_params *p, void **s, char *e,
                  size_t n)
{
    (void)h;
    counter *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        snprintf(e, n, "out of memory");
        return TW_ERR;
    }
    c->limit = p->values[0].i;
    *s = c;
    return TW_OK;
}
static int scan(void *s, const tw_scan *sc, tw_scan_result *o, char *e,
                size_t n)
{
    (void)e, (void)n;
    counter *c = s;
    c->datapoints += (int64_t)sc->nsamples;
    o->condition_met = (int64_t)sc->nsamples > c->limit;
    if (o->condition_met) {
        c->triggered++;
        c->violations++;
    }
    o->rule_triggered = c->triggered;
    o->violations = c->violations;
    o->datapoints = c->datapoints;
    return TW_OK;
}
static int report(void *s, tw_json *j)
{
    (void)s, (void)j;
    return TW_OK;
}
static void destroy(void *s)
{
    free(s);
}
/* Positional, as an ABI 1 source would have it: the ABI 2 members
 * after destroy stay zero and the host must not read them. */
static const tw_rule_descriptor d = {
    1,
    "Abi1Counter",
    "fires on scans with more than limit samples",
    params,
    1,
    create,
    scan,
    report,
    NULL,
    NULL,
    destroy,
    0,
    NULL,
    NULL,
    NULL,
    NULL,
};
TW_PLUGIN_EXPORT const tw_rule_descriptor *abi1_counter(void)
{
    return &d;
}
