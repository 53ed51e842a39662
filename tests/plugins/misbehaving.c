/* Test fixture: a rule that misbehaves at a chosen scan the way a buggy
 * plugin can, to check that plugin isolation stops it and the engine and
 * the other rules go on. mode: segv (writes to read-only memory), abort, hang
 * (loops forever), alloc (allocates and touches memory without bound),
 * none (behaves). */
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <trainwatch/plugin.h>

static const tw_param_spec params[] = {
    {"mode", TW_PARAM_STRING, "none", 0, 0, "segv, abort, hang, alloc or none"},
    {"at_scan", TW_PARAM_INT, "1", 0, 1000000, "scan index that misbehaves"},
};

typedef struct state {
    char mode[16];
    int64_t at;
    int64_t scans;
} state;

/* Blocks the runaway allocation reaches, kept reachable so a leak checker
 * sees memory the guard abandoned, not memory the fixture lost. */
typedef struct block {
    struct block *next;
} block;
static block *volatile kept;
static const tw_host *host; /* for buf_write; set by create */

static int create(const tw_host *h, const tw_params *p, void **s, char *e,
                  size_t n)
{
    (void)e, (void)n;
    host = h;
    state *st = calloc(1, sizeof(*st));
    if (st == NULL)
        return TW_ERR;
    strncpy(st->mode, p->values[0].s, sizeof(st->mode) - 1);
    st->at = p->values[1].i;
    *s = st;
    return TW_OK;
}

static void misbehave(const char *mode)
{
    if (strcmp(mode, "segv") == 0) {
        /* a write to read-only memory: a real SIGSEGV that valgrind does
         * not also report as an invalid write */
        static const char text[] = "read-only";
        volatile char *ro = (volatile char *)(uintptr_t)text;
        ro[0] = 1;
    } else if (strcmp(mode, "abort") == 0) {
        abort();
    } else if (strcmp(mode, "hang") == 0) {
        for (volatile uint64_t i = 0;; i++)
            ;
    } else if (strcmp(mode, "alloc") == 0) {
        for (;;) {
            size_t len = 4u << 20;
            volatile char *b = malloc(len);
            if (b == NULL)
                continue;
            ((block *)b)->next = kept; /* kept first: a stop while */
            kept = (block *)b;         /* touching it loses nothing */
            for (size_t i = sizeof(block); i < len; i += 4096)
                b[i] = 1; /* touched: resident, not just reserved */
        }
    }
}

static int scan(void *s, const tw_scan *sc, tw_scan_result *o, char *e,
                size_t n)
{
    (void)e, (void)n;
    state *st = s;
    st->scans++;
    o->datapoints = st->scans;
    if ((int64_t)sc->index == st->at)
        misbehave(st->mode);
    return TW_OK;
}

static int details(void *s, tw_json *j)
{
    (void)s, (void)j;
    return TW_OK;
}

static int save(void *s, tw_buf *out)
{
    state *st = s;
    return host->buf_write(out, &st->scans, sizeof(st->scans));
}

static int restore(void *s, const void *data, size_t len, char *e, size_t n)
{
    (void)e, (void)n;
    state *st = s;
    if (len != sizeof(st->scans))
        return TW_ERR;
    memcpy(&st->scans, data, len);
    return TW_OK;
}

static void destroy(void *s)
{
    free(s);
}

static const tw_rule_descriptor d = {
    .abi_version = TW_PLUGIN_ABI_VERSION,
    .name = "Misbehaving",
    .params = params,
    .nparams = 2,
    .create = create,
    .scan = scan,
    .details = details,
    .save = save,
    .restore = restore,
    .destroy = destroy,
};
TW_PLUGIN_EXPORT const tw_rule_descriptor *misbehaving(void)
{
    return &d;
}
