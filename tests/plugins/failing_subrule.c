/* Test fixture: a stand-in for the built-in "Dataloader" (same name, the
 * default entry symbol) whose scan fails on its second scan, so
 * ProfilerReport's handling of a failing sub-rule can be checked. A test
 * puts it first on the registry's search path. */
#include <stdio.h>
#include <stdlib.h>

#include <trainwatch/plugin.h>

static int create(const tw_host *h, const tw_params *p, void **s, char *e,
                  size_t n)
{
    (void)p, (void)e, (void)n;
    *s = (void *)h;
    return TW_OK;
}
static int scan(void *s, const tw_scan *sc, tw_scan_result *o, char *e,
                size_t n)
{
    (void)s;
    if (sc->index == 1) {
        snprintf(e, n, "deliberate failure at scan 1");
        return TW_ERR;
    }
    o->datapoints = 7;
    return TW_OK;
}
/* Details {}; the host's report carries scan 0's 7 datapoints. */
static int details(void *s, tw_json *j)
{
    const tw_host *h = s;
    h->json_object_begin(j);
    h->json_object_end(j);
    return TW_OK;
}
static void destroy(void *s)
{
    (void)s;
}
static const tw_rule_descriptor d = {
    .abi_version = TW_PLUGIN_ABI_VERSION,
    .name = "Dataloader",
    .create = create,
    .scan = scan,
    .details = details,
    .destroy = destroy,
};
TW_PLUGIN_EXPORT const tw_rule_descriptor *trainwatch_rule(void)
{
    return &d;
}
