/* fwagg.c - the framework-metrics aggregation of RULES.md §4 (see
 * fwagg.h). */
#include "fwagg.h"

#include <stdlib.h>
#include <string.h>

/* ---- key order ------------------------------------------------------ */

void tw_keyorder_init(tw_keyorder *ko)
{
    memset(ko, 0, sizeof(*ko));
}

int tw_keyorder_has(const tw_keyorder *ko, unsigned id)
{
    for (unsigned i = 0; i < ko->n; i++)
        if (ko->id[i] == id)
            return 1;
    return 0;
}

void tw_keyorder_note(tw_keyorder *ko, unsigned id)
{
    if (id > 255 || tw_keyorder_has(ko, id) || ko->n >= TW_KEYORDER_MAX)
        return;
    ko->id[ko->n++] = (uint8_t)id;
}

void tw_keyorder_save(const tw_keyorder *ko, tw_ser *s)
{
    tw_ser_u8(s, ko->n);
    tw_ser_bytes(s, ko->id, ko->n);
}

int tw_keyorder_restore(tw_keyorder *ko, tw_deser *d)
{
    tw_keyorder_init(ko);
    uint8_t n = tw_deser_u8(d);
    if (n > TW_KEYORDER_MAX) {
        tw_deser_fail(d);
        return TW_ERR;
    }
    tw_deser_bytes(d, ko->id, n);
    ko->n = n;
    return tw_deser_ok(d) ? TW_OK : TW_ERR;
}

/* ---- accumulation ----------------------------------------------------- */

void tw_fwagg_init(tw_fwagg *a, tw_semantics semantics)
{
    memset(a, 0, sizeof(*a));
    a->semantics = semantics;
    tw_smap_init(&a->cpu_ops);
    tw_smap_init(&a->gpu_ops);
    tw_smap_init(&a->step_phases);
    tw_smap_init(&a->forward);
    tw_smap_init(&a->backward);
    tw_smap_init(&a->general);
    tw_smap_init(&a->horovod);
}

void tw_fwagg_free(tw_fwagg *a)
{
    tw_smap_free(&a->cpu_ops);
    tw_smap_free(&a->gpu_ops);
    tw_smap_free(&a->step_phases);
    tw_smap_free(&a->forward);
    tw_smap_free(&a->backward);
    tw_smap_free(&a->general);
    tw_smap_free(&a->horovod);
}

/* `needle` (lower-case ASCII) in `s` lower-cased. */
static int contains_lower(const char *s, const char *needle)
{
    size_t n = strlen(needle);
    for (; *s != '\0'; s++) {
        size_t i = 0;
        while (i < n && s[i] != '\0') {
            char c = s[i];
            if (c >= 'A' && c <= 'Z')
                c = (char)(c - 'A' + 'a');
            if (c != needle[i])
                break;
            i++;
        }
        if (i == n)
            return 1;
    }
    return 0;
}

/* The classification of §3.11 as modified by §4 (first match wins). */
enum {
    CLS_CPU,
    CLS_GPU,
    CLS_STEP,
    CLS_FORWARD,
    CLS_BACKWARD,
    CLS_GENERAL,
    CLS_HOROVOD,
    CLS_NONE
};

static int classify(const tw_fw_event *e)
{
    const char *phase = e->phase != NULL ? e->phase : "Unknown";
    if (contains_lower(phase, "cpu"))
        return CLS_CPU;
    if (contains_lower(phase, "gpu"))
        return CLS_GPU;
    if (strstr(phase, "Step") != NULL)
        return CLS_STEP;
    if (strcmp(phase, "Forward-SubModuleInternal") == 0)
        return CLS_FORWARD;
    if (strcmp(phase, "Backward-SubModuleInternal") == 0)
        return CLS_BACKWARD;
    int horovod = e->source == TW_SOURCE_HOROVOD;
    if (strstr(phase, ":CPU") == NULL && strstr(phase, ":GPU") == NULL &&
        !horovod)
        return CLS_GENERAL;
    return horovod ? CLS_HOROVOD : CLS_NONE;
}

static int add_classified(tw_fwagg *a, const tw_fw_event *e, int cls)
{
    const char *phase = e->phase != NULL ? e->phase : "Unknown";
    const char *name = e->name != NULL ? e->name : "";
    int64_t dur = e->end_us - e->start_us;
    switch (cls) {
    case CLS_CPU: {
        tw_smap *ops = tw_smap_sub(&a->cpu_ops, phase);
        return ops != NULL ? tw_smap_add(ops, name, dur) : TW_ERR;
    }
    case CLS_GPU: {
        tw_smap *ops = tw_smap_sub(&a->gpu_ops, phase);
        return ops != NULL ? tw_smap_add(ops, name, dur) : TW_ERR;
    }
    case CLS_STEP:
        return tw_smap_add(&a->step_phases, phase, dur);
    case CLS_FORWARD:
        return tw_smap_add(&a->forward, name, dur);
    case CLS_BACKWARD:
        return tw_smap_add(&a->backward, name, dur);
    case CLS_GENERAL:
        return tw_smap_add(&a->general, phase, dur);
    case CLS_HOROVOD:
        return tw_smap_add(&a->horovod, name, dur);
    default:
        return TW_OK;
    }
}

static int add_event(tw_fwagg *a, const tw_fw_event *e)
{
    return add_classified(a, e, classify(e));
}

static int64_t ops_sum(const tw_smap *ops)
{
    int64_t s = 0;
    for (size_t i = 0; i < ops->n; i++)
        if (ops->ent[i].sub != NULL)
            s += tw_smap_sum(ops->ent[i].sub);
    return s;
}

/* Record which keys the reference's recomputation would assign, in its
 * order; a key whose division would fail is skipped. */
static void note_keys(const tw_fwagg *a, tw_keyorder *ko)
{
    if (ko == NULL)
        return;
    int64_t cpu = ops_sum(&a->cpu_ops), gpu = ops_sum(&a->gpu_ops);
    if (a->cpu_ops.n + a->gpu_ops.n == 0 || cpu + gpu != 0)
        tw_keyorder_note(ko, TW_FWKEY_RATIO);
    if (a->cpu_ops.n > 0 && cpu != 0) {
        tw_keyorder_note(ko, TW_FWKEY_CPU);
        tw_keyorder_note(ko, TW_FWKEY_CPU_TOTAL);
    }
    if (a->gpu_ops.n > 0 && gpu != 0) {
        tw_keyorder_note(ko, TW_FWKEY_GPU);
        tw_keyorder_note(ko, TW_FWKEY_GPU_TOTAL);
    }
    if (a->step_phases.n == 0 || tw_smap_sum(&a->step_phases) != 0) {
        tw_keyorder_note(ko, TW_FWKEY_PHASE);
        tw_keyorder_note(ko, TW_FWKEY_PHASE_TIME);
    }
    if (a->general.n > 0 && tw_smap_sum(&a->general) != 0)
        tw_keyorder_note(ko, TW_FWKEY_GENERAL);
    if (a->forward.n > 0 && a->backward.n > 0 &&
        tw_smap_sum(&a->forward) + tw_smap_sum(&a->backward) != 0)
        tw_keyorder_note(ko, TW_FWKEY_FORWARD_BACKWARD);
    if (a->horovod.n > 0 && tw_smap_sum(&a->horovod) != 0)
        tw_keyorder_note(ko, TW_FWKEY_HOROVOD);
}

int tw_fwagg_instant(tw_fwagg *a, const tw_fw_event *ev, size_t n,
                     double begin_us, tw_keyorder *ko)
{
    int rc = TW_OK;
    for (size_t i = 0; i < n; i++)
        if ((double)ev[i].start_us < begin_us &&
            (double)ev[i].end_us > begin_us && add_event(a, &ev[i]) != TW_OK)
            rc = TW_ERR;
    note_keys(a, ko);
    return rc;
}

/* Sort helper for tw_fwagg_instants: anchor positions by value. */
typedef struct anchor_pos {
    double v;
    size_t i;
} anchor_pos;

static int cmp_anchor(const void *pa, const void *pb)
{
    const anchor_pos *a = pa, *b = pb;
    if (a->v != b->v)
        return a->v < b->v ? -1 : 1;
    return (a->i > b->i) - (a->i < b->i);
}

/* First position in sorted[0..n) whose value is > x. */
static size_t upper_bound(const anchor_pos *sorted, size_t n, double x)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (sorted[mid].v > x)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

int tw_fwagg_instants(tw_fwagg *a, const tw_fw_event *ev, size_t n,
                      const double *begin_us, size_t nb, tw_keyorder *ko)
{
    if (nb <= 1)
        return nb == 1 ? tw_fwagg_instant(a, ev, n, begin_us[0], ko) : TW_OK;
    int rc = TW_ERR;
    anchor_pos *sorted = malloc(nb * sizeof(*sorted));
    size_t *off = calloc(nb + 1, sizeof(size_t));
    size_t *fill = calloc(nb, sizeof(size_t));
    size_t *list = NULL;
    /* Each event is classified once, however many anchors it contains. */
    unsigned char *cls = malloc(n ? n : 1);
    if (sorted == NULL || off == NULL || fill == NULL || cls == NULL)
        goto out;
    memset(cls, 0xff, n ? n : 1);
    for (size_t k = 0; k < nb; k++)
        sorted[k] = (anchor_pos){begin_us[k], k};
    qsort(sorted, nb, sizeof(*sorted), cmp_anchor);
    /* Pass 1: how many events contain each anchor (the same strict double
     * comparisons as tw_fwagg_instant). */
    for (size_t i = 0; i < n; i++) {
        double s = (double)ev[i].start_us, e = (double)ev[i].end_us;
        for (size_t k = upper_bound(sorted, nb, s); k < nb && sorted[k].v < e;
             k++)
            off[sorted[k].i + 1]++;
    }
    for (size_t k = 0; k < nb; k++)
        off[k + 1] += off[k];
    list = malloc((off[nb] ? off[nb] : 1) * sizeof(size_t));
    if (list == NULL)
        goto out;
    /* Pass 2: each anchor's events, in event order. */
    for (size_t i = 0; i < n; i++) {
        double s = (double)ev[i].start_us, e = (double)ev[i].end_us;
        for (size_t k = upper_bound(sorted, nb, s); k < nb && sorted[k].v < e;
             k++) {
            size_t at = sorted[k].i;
            list[off[at] + fill[at]++] = i;
        }
    }
    /* Replay anchor by anchor: the sequence of additions, and so every
     * sum and every key's first-seen position, is the reference's. */
    rc = TW_OK;
    for (size_t k = 0; k < nb; k++) {
        for (size_t m = off[k]; m < off[k + 1]; m++) {
            size_t i = list[m];
            if (cls[i] == 0xff)
                cls[i] = (unsigned char)classify(&ev[i]);
            if (add_classified(a, &ev[i], cls[i]) != TW_OK)
                rc = TW_ERR;
        }
        note_keys(a, ko);
    }
out:
    free(cls);
    free(sorted);
    free(off);
    free(fill);
    free(list);
    return rc;
}

int tw_fwagg_interval(tw_fwagg *a, const tw_fw_event *ev, size_t n,
                      int64_t begin_us, int64_t end_us, tw_keyorder *ko)
{
    int rc = TW_OK;
    for (size_t i = 0; i < n; i++)
        if (ev[i].end_us >= begin_us && ev[i].start_us <= end_us &&
            add_event(a, &ev[i]) != TW_OK)
            rc = TW_ERR;
    note_keys(a, ko);
    return rc;
}

/* ---- derived keys ------------------------------------------------------ */

static double share(int64_t part, int64_t total)
{
    return (double)part / (double)total * 100.0;
}

static void write_ratio(const tw_fwagg *a, const tw_host *h, tw_json *j)
{
    const tw_smap *cpu = &a->cpu_ops, *gpu = &a->gpu_ops;
    size_t n = cpu->n + gpu->n;
    int64_t total = ops_sum(cpu) + ops_sum(gpu);
    h->json_object_begin(j);
    if (total != 0) {
        for (size_t i = 0; i < n; i++) {
            /* labels: CPU phases then GPU phases */
            const tw_smap_entry *label =
                i < cpu->n ? &cpu->ent[i] : &gpu->ent[i - cpu->n];
            const tw_smap_entry *size = label;
            if (a->semantics == TW_SEMANTICS_REFERENCE)
                /* totals: GPU phases then CPU phases (the swap quirk) */
                size = i < gpu->n ? &gpu->ent[i] : &cpu->ent[i - gpu->n];
            h->json_key(j, label->key);
            h->json_double(
                j,
                share(size->sub != NULL ? tw_smap_sum(size->sub) : 0, total));
        }
    }
    h->json_object_end(j);
}

/* filter_events(ops, 2): shares (want_times = 0) or raw totals (1). */
static int write_filtered(const tw_smap *ops, int want_times, const tw_host *h,
                          tw_json *j)
{
    tw_smap merged;
    tw_smap_init(&merged);
    int rc = TW_OK;
    for (size_t p = 0; p < ops->n && rc == TW_OK; p++) {
        const tw_smap *names = ops->ent[p].sub;
        for (size_t i = 0; names != NULL && i < names->n && rc == TW_OK; i++)
            rc = tw_smap_add(&merged, names->ent[i].key, names->ent[i].val);
    }
    h->json_object_begin(j);
    int64_t total = tw_smap_sum(&merged);
    if (rc == TW_OK && total != 0) {
        double kept = 0.0;
        for (size_t i = 0; i < merged.n; i++) {
            double s = share(merged.ent[i].val, total);
            if (s > 2.0)
                kept += s;
        }
        for (size_t i = 0; i < merged.n; i++) {
            double s = share(merged.ent[i].val, total);
            if (!(s > 2.0))
                continue;
            h->json_key(j, merged.ent[i].key);
            if (want_times)
                h->json_int(j, merged.ent[i].val);
            else
                h->json_double(j, s / kept * 100.0);
        }
    }
    h->json_object_end(j);
    tw_smap_free(&merged);
    return rc;
}

static void write_shares(const tw_smap *m, const tw_host *h, tw_json *j)
{
    int64_t total = tw_smap_sum(m);
    h->json_object_begin(j);
    for (size_t i = 0; total != 0 && i < m->n; i++) {
        h->json_key(j, m->ent[i].key);
        h->json_double(j, share(m->ent[i].val, total));
    }
    h->json_object_end(j);
}

static void write_forward_backward(const tw_fwagg *a, const tw_host *h,
                                   tw_json *j)
{
    int64_t f = tw_smap_sum(&a->forward), b = tw_smap_sum(&a->backward);
    h->json_object_begin(j);
    if (f + b != 0) {
        h->json_key(j, "Forward pass");
        h->json_double(j, share(f, f + b));
        h->json_key(j, "Backward pass");
        h->json_double(j, share(b, f + b));
    }
    h->json_object_end(j);
}

static void write_horovod(const tw_smap *m, const tw_host *h, tw_json *j)
{
    int64_t total = tw_smap_sum(m), kept = 0;
    h->json_object_begin(j);
    if (total != 0) {
        for (size_t i = 0; i < m->n; i++)
            if (m->ent[i].val > 0 &&
                (double)m->ent[i].val / (double)total > 0.02)
                kept += m->ent[i].val;
        for (size_t i = 0; i < m->n; i++) {
            if (!(m->ent[i].val > 0 &&
                  (double)m->ent[i].val / (double)total > 0.02))
                continue;
            h->json_key(j, m->ent[i].key);
            h->json_double(j, share(m->ent[i].val, kept));
        }
    }
    h->json_object_end(j);
}

int tw_fwagg_write_key(const tw_fwagg *a, unsigned id, const tw_host *h,
                       tw_json *j)
{
    switch (id) {
    case TW_FWKEY_RATIO:
        h->json_key(j, "ratio");
        write_ratio(a, h, j);
        return TW_OK;
    case TW_FWKEY_CPU:
        h->json_key(j, "CPU");
        return write_filtered(&a->cpu_ops, 0, h, j);
    case TW_FWKEY_CPU_TOTAL:
        h->json_key(j, "CPU_total");
        return write_filtered(&a->cpu_ops, 1, h, j);
    case TW_FWKEY_GPU:
        h->json_key(j, "GPU");
        return write_filtered(&a->gpu_ops, 0, h, j);
    case TW_FWKEY_GPU_TOTAL:
        h->json_key(j, "GPU_total");
        return write_filtered(&a->gpu_ops, 1, h, j);
    case TW_FWKEY_PHASE:
        h->json_key(j, "phase");
        write_shares(&a->step_phases, h, j);
        return TW_OK;
    case TW_FWKEY_PHASE_TIME:
        h->json_key(j, "phase_time");
        h->json_object_begin(j);
        h->json_object_end(j);
        return TW_OK;
    case TW_FWKEY_GENERAL:
        h->json_key(j, "general");
        write_shares(&a->general, h, j);
        return TW_OK;
    case TW_FWKEY_FORWARD_BACKWARD:
        h->json_key(j, "forward_backward");
        write_forward_backward(a, h, j);
        return TW_OK;
    case TW_FWKEY_HOROVOD:
        h->json_key(j, "horovod");
        write_horovod(&a->horovod, h, j);
        return TW_OK;
    default:
        return TW_ERR;
    }
}

void tw_fwagg_write_details(const tw_fwagg *a, const tw_keyorder *ko,
                            const tw_host *h, tw_json *j, tw_details_own_fn own,
                            void *ctx)
{
    for (unsigned i = 0; i < ko->n; i++) {
        unsigned id = ko->id[i];
        if (id >= TW_FWKEY_FIRST && id < TW_FWKEY_END) {
            if (a != NULL)
                tw_fwagg_write_key(a, id, h, j);
        } else if (own != NULL) {
            own(ctx, id, j);
        }
    }
}

size_t tw_fwagg_memory(const tw_fwagg *a)
{
    return sizeof(*a) + tw_smap_memory(&a->cpu_ops) +
           tw_smap_memory(&a->gpu_ops) + tw_smap_memory(&a->step_phases) +
           tw_smap_memory(&a->forward) + tw_smap_memory(&a->backward) +
           tw_smap_memory(&a->general) + tw_smap_memory(&a->horovod);
}

#define FWAGG_TAG 0x46574147u /* "FWAG" */

void tw_fwagg_save(const tw_fwagg *a, tw_ser *s)
{
    tw_ser_u32(s, FWAGG_TAG);
    tw_smap_save(&a->cpu_ops, 2, s);
    tw_smap_save(&a->gpu_ops, 2, s);
    tw_smap_save(&a->step_phases, 1, s);
    tw_smap_save(&a->forward, 1, s);
    tw_smap_save(&a->backward, 1, s);
    tw_smap_save(&a->general, 1, s);
    tw_smap_save(&a->horovod, 1, s);
}

int tw_fwagg_restore(tw_fwagg *a, tw_deser *d)
{
    if (tw_deser_u32(d) != FWAGG_TAG) {
        tw_deser_fail(d);
        return TW_ERR;
    }
    if (tw_smap_restore(&a->cpu_ops, 2, d) != TW_OK ||
        tw_smap_restore(&a->gpu_ops, 2, d) != TW_OK ||
        tw_smap_restore(&a->step_phases, 1, d) != TW_OK ||
        tw_smap_restore(&a->forward, 1, d) != TW_OK ||
        tw_smap_restore(&a->backward, 1, d) != TW_OK ||
        tw_smap_restore(&a->general, 1, d) != TW_OK ||
        tw_smap_restore(&a->horovod, 1, d) != TW_OK)
        return TW_ERR;
    return TW_OK;
}
