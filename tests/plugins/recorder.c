/* Test fixture: a rule that records what each scan delivered, so tests of
 * the job pipeline can check boundaries, order and flags. Its report is
 * {"scans": [{"k","start","end","clock","samples":[[node,value,flags]...],
 *             "events":[[name,flags]...]}...]} */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <trainwatch/plugin.h>

typedef struct rec {
    const tw_host *host;
    char *log;
    size_t len, cap;
} rec;

static int append(rec *r, const char *s)
{
    size_t n = strlen(s);
    if (r->len + n + 1 > r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 1024;
        while (cap < r->len + n + 1)
            cap *= 2;
        char *nl = realloc(r->log, cap);
        if (nl == NULL)
            return TW_ERR;
        r->log = nl;
        r->cap = cap;
    }
    memcpy(r->log + r->len, s, n + 1);
    r->len += n;
    return TW_OK;
}

static int create(const tw_host *h, const tw_params *p, void **s, char *e,
                  size_t n)
{
    (void)p, (void)e, (void)n;
    rec *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return TW_ERR;
    r->host = h;
    *s = r;
    return append(r, "");
}

static int scan(void *s, const tw_scan *sc, tw_scan_result *o, char *e,
                size_t n)
{
    rec *r = s;
    char buf[256];
    snprintf(buf, sizeof(buf),
             "%s{\"k\": %llu, \"start\": %lld, \"end\": %lld, \"first\": %lld, "
             "\"final\": %d, \"samples\": [",
             r->len > 0 ? ", " : "", (unsigned long long)sc->index,
             (long long)sc->start_us, (long long)sc->end_us,
             (long long)sc->first_timestamp_us, sc->final);
    if (append(r, buf) != TW_OK)
        goto oom;
    for (size_t i = 0; i < sc->nsamples; i++) {
        const tw_sample *x = &sc->samples[i];
        snprintf(buf, sizeof(buf), "%s[\"%s\", %.17g, %u]", i ? ", " : "",
                 sc->nodes[sc->series[x->series].node], x->value, x->flags);
        if (append(r, buf) != TW_OK)
            goto oom;
    }
    if (append(r, "], \"events\": [") != TW_OK)
        goto oom;
    for (size_t i = 0; i < sc->nevents; i++) {
        snprintf(buf, sizeof(buf), "%s[\"%s\", %u]", i ? ", " : "",
                 sc->events[i].name, sc->events[i].flags);
        if (append(r, buf) != TW_OK)
            goto oom;
    }
    if (append(r, "]}") != TW_OK)
        goto oom;
    o->datapoints += (int64_t)sc->nsamples;
    return TW_OK;
oom:
    snprintf(e, n, "out of memory");
    return TW_ERR;
}

/* Details: {"scans": [...]} */
static int details(void *s, tw_json *j)
{
    rec *r = s;
    size_t n = r->len + 32;
    char *text = malloc(n);
    if (text == NULL)
        return TW_ERR;
    snprintf(text, n, "{\"scans\": [%s]}", r->log);
    r->host->json_raw(j, text);
    free(text);
    return TW_OK;
}

static void destroy(void *s)
{
    rec *r = s;
    free(r->log);
    free(r);
}

static const tw_rule_descriptor d = {
    .abi_version = TW_PLUGIN_ABI_VERSION,
    .name = "Recorder",
    .create = create,
    .scan = scan,
    .details = details,
    .destroy = destroy,
};

TW_PLUGIN_EXPORT const tw_rule_descriptor *recorder_rule(void)
{
    return &d;
}
