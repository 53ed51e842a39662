/* Test fixture: a parameter whose own default lies outside its bounds,
 * which `trainwatch rules check` must name (the engine would refuse every
 * configuration that leaves it out). */
#include <trainwatch/plugin.h>

static int create(const tw_host *h, const tw_params *p, void **s, char *e,
                  size_t n)
{
    (void)h, (void)p, (void)e, (void)n;
    *s = NULL;
    return TW_OK;
}
static int scan(void *s, const tw_scan *sc, tw_scan_result *o, char *e,
                size_t n)
{
    (void)s, (void)sc, (void)o, (void)e, (void)n;
    return TW_OK;
}
static int details(void *s, tw_json *j)
{
    (void)s, (void)j;
    return TW_OK;
}
static void destroy(void *s)
{
    (void)s;
}
static const tw_param_spec params[] = {
    {"threshold", TW_PARAM_DOUBLE, "150", 0, 100, "a percentage"},
};
static const tw_rule_descriptor d = {
    .abi_version = TW_PLUGIN_ABI_VERSION,
    .name = "BadDefault",
    .params = params,
    .nparams = 1,
    .create = create,
    .scan = scan,
    .details = details,
    .destroy = destroy,
    .flags = TW_RULE_STATELESS,
};
TW_PLUGIN_EXPORT const tw_rule_descriptor *trainwatch_rule(void)
{
    return &d;
}
