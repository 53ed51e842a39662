/* Test fixture: a rule whose save() forgets part of its state (the sample
 * count), so a restored instance goes on from a wrong count. `eval
 * --roundtrip` must catch it. Fires once more than `limit` samples were
 * seen in all. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <trainwatch/plugin.h>

typedef struct lossy {
    const tw_host *host;
    int64_t limit, triggered, datapoints;
} lossy;

static const tw_param_spec params[] = {
    {"limit", TW_PARAM_INT, "100", 0, 1e9, "samples before it fires"},
};
static int create(const tw_host *h, const tw_params *p, void **s, char *e,
                  size_t n)
{
    lossy *l = calloc(1, sizeof(*l));
    if (l == NULL) {
        snprintf(e, n, "out of memory");
        return TW_ERR;
    }
    l->host = h;
    l->limit = p->values[0].i;
    *s = l;
    return TW_OK;
}
static int scan(void *s, const tw_scan *sc, tw_scan_result *o, char *e,
                size_t n)
{
    (void)e, (void)n;
    lossy *l = s;
    l->datapoints += (int64_t)sc->nsamples;
    o->condition_met = l->datapoints > l->limit;
    if (o->condition_met)
        l->triggered++;
    o->rule_triggered = l->triggered;
    o->violations = l->triggered;
    o->datapoints = l->datapoints;
    return TW_OK;
}
static int details(void *s, tw_json *j)
{
    lossy *l = s;
    l->host->json_object_begin(j);
    l->host->json_key(j, "datapoints");
    l->host->json_int(j, l->datapoints);
    l->host->json_object_end(j);
    return TW_OK;
}
static int save(void *s, tw_buf *out)
{
    lossy *l = s; /* the deliberate bug: datapoints is not saved */
    return l->host->buf_write(out, &l->triggered, sizeof(l->triggered));
}
static int restore(void *s, const void *data, size_t len, char *e, size_t n)
{
    lossy *l = s;
    if (len != sizeof(l->triggered)) {
        snprintf(e, n, "bad checkpoint length %zu", len);
        return TW_ERR;
    }
    memcpy(&l->triggered, data, len);
    return TW_OK;
}
static void destroy(void *s)
{
    free(s);
}
static const tw_rule_descriptor d = {
    .abi_version = TW_PLUGIN_ABI_VERSION,
    .name = "LossyRule",
    .params = params,
    .nparams = 1,
    .create = create,
    .scan = scan,
    .details = details,
    .save = save,
    .restore = restore,
    .destroy = destroy,
};
TW_PLUGIN_EXPORT const tw_rule_descriptor *lossy_save(void)
{
    return &d;
}
