/* Test fixture: a plugin built for a future ABI the engine must refuse. */
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
/* Writes nothing: the host makes that an empty Details object. */
static int details(void *s, tw_json *j)
{
    (void)s, (void)j;
    return TW_OK;
}
static void destroy(void *s)
{
    (void)s;
}
static const tw_rule_descriptor d = {
    .abi_version = TW_PLUGIN_ABI_VERSION + 1,
    .name = "FutureRule",
    .create = create,
    .scan = scan,
    .details = details,
    .destroy = destroy,
};
TW_PLUGIN_EXPORT const tw_rule_descriptor *trainwatch_rule(void)
{
    return &d;
}
