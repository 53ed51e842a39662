/* Test fixture: a rule whose scan fails on its second scan, so the host's
 * Error status and "the other rules keep running" can be checked. */
#include <stdio.h>
#include <stdlib.h>

#include <trainwatch/plugin.h>

static const tw_param_spec params[] = {
    {"fail_at_scan", TW_PARAM_INT, "1", 0, 1000, "scan index that fails"},
};
static int create(const tw_host *h, const tw_params *p, void **s, char *e,
                  size_t n)
{
    (void)h, (void)e, (void)n;
    int64_t *at = malloc(sizeof(int64_t));
    if (at == NULL)
        return TW_ERR;
    *at = p->values[0].i;
    *s = at;
    return TW_OK;
}
static int scan(void *s, const tw_scan *sc, tw_scan_result *o, char *e,
                size_t n)
{
    (void)o;
    if ((int64_t)sc->index == *(int64_t *)s) {
        snprintf(e, n, "deliberate failure at scan %llu",
                 (unsigned long long)sc->index);
        return TW_ERR;
    }
    return TW_OK;
}
/* Writes nothing: the host makes that an empty Details object. */
static int details(void *s, tw_json *j)
{
    (void)s, (void)j;
    return TW_OK;
}
static void destroy(void *s)
{
    free(s);
}
static const tw_rule_descriptor d = {
    .abi_version = TW_PLUGIN_ABI_VERSION,
    .name = "FailingRule",
    .params = params,
    .nparams = 1,
    .create = create,
    .scan = scan,
    .details = details,
    .destroy = destroy,
};
TW_PLUGIN_EXPORT const tw_rule_descriptor *failing_rule(void)
{
    return &d;
}
