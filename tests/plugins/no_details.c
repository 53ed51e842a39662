/* Test fixture: an ABI 2 descriptor still written the ABI 1 way (a report
 * callback, no details); the host must refuse it at load, saying why. */
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
static int report(void *s, tw_json *j)
{
    (void)s, (void)j;
    return TW_OK;
}
static void destroy(void *s)
{
    (void)s;
}
static const tw_rule_descriptor d = {
    .abi_version = TW_PLUGIN_ABI_VERSION,
    .name = "NoDetails",
    .create = create,
    .scan = scan,
    .report = report,
    .destroy = destroy,
    .flags = TW_RULE_STATELESS,
};
TW_PLUGIN_EXPORT const tw_rule_descriptor *trainwatch_rule(void)
{
    return &d;
}
