/*
 * job.c - per-job evaluation: dictionary, clock, scan assembly in the
 * reference's order, rules (job.h).
 */
#include "job.h"
#include "grow.h"
#include "job_internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "event_time.h"
#include "log.h"
#include "sample_pack.h"
#include "strmap.h"
#include "tw_assert.h"

void tw_job_config_default(tw_job_config *c)
{
    memset(c, 0, sizeof(*c));
    c->tick_us = 60 * 1000000LL;
    c->lateness_us = 60 * 1000000LL;
    c->idle_node_us = 300 * 1000000LL;
    c->semantics = TW_SEMANTICS_FIXED;
    c->clock_skew_us = TW_JOB_SKEW_DEFAULT;
    tw_isolation_default(&c->isolation);
}

/* TW_JOB_SKEW_DEFAULT: 10 ticks (10 min when continuous), but never more
 * than idle_node: a time accepted further ahead than that would make every
 * other node idle, and the watermark would jump with it. */
static int64_t skew_default_us(const tw_job_config *c)
{
    int64_t ticks;
    if (c->tick_us <= 0 ||
        __builtin_mul_overflow(c->tick_us, (int64_t)TW_JOB_SKEW_TICKS, &ticks))
        ticks = TW_JOB_SKEW_TICKS * 60 * 1000000LL;
    if (c->idle_node_us > 0 && c->idle_node_us < ticks)
        return c->idle_node_us;
    return ticks;
}

tw_metric tw_metric_classify(const char *type, const char *name,
                             const char *dimension)
{
    (void)type;
    if (name != NULL && strcmp(name, "MemoryUsedPercent") == 0)
        return TW_METRIC_MEM_USED;
    if (dimension == NULL)
        return TW_METRIC_OTHER;
    if (strcmp(dimension, "CPUUtilization") == 0)
        return TW_METRIC_CPU_UTIL;
    if (strcmp(dimension, "I/OWaitPercentage") == 0)
        return TW_METRIC_CPU_IOWAIT;
    if (strcmp(dimension, "GPUUtilization") == 0)
        return TW_METRIC_GPU_UTIL;
    if (strcmp(dimension, "GPUMemoryUtilization") == 0)
        return TW_METRIC_GPU_MEM;
    if (strcmp(dimension, "Algorithm") == 0)
        return TW_METRIC_NET_ALGORITHM;
    return TW_METRIC_OTHER;
}

/* The reference's selection: ts in ns as ((ts*1000)*1000)*1000, truncated.
 * tw_job_ingest keeps only samples whose time converts; INT64_MIN (never
 * inside a scan) for anything else, e.g. from an old checkpoint. */
static inline int64_t ts_to_ns(double ts)
{
    int64_t ns;
    return tw_time_s_to_ns(ts, &ns) ? ns : INT64_MIN;
}

/* Only for times tw_job_ingest checked (0 otherwise). */
static int64_t minute_floor_us(double ts)
{
    int64_t us;
    return tw_time_minute_floor_us(ts, &us) ? us : 0;
}

static int create_rules(tw_job *j, const tw_rule_spec *specs, size_t n,
                        char *err, size_t errlen)
{
    j->rules = calloc(n ? n : 1, sizeof(tw_rule *));
    if (j->rules == NULL) {
        snprintf(err, errlen, "out of memory");
        return TW_ERR;
    }
    for (size_t i = 0; i < n; i++) {
        const tw_rule_spec *s = &specs[i];
        const tw_plugin *p;
        char why[768];
        int rc = s->source != NULL
                     ? tw_registry_load(j->reg, s->source, s->entry, &p, why,
                                        sizeof(why))
                     : tw_registry_find(j->reg, s->rule != NULL ? s->rule : "",
                                        &p, why, sizeof(why));
        if (rc != TW_OK) {
            snprintf(err, errlen, "%s", why);
            return TW_ERR;
        }
        tw_semantics sem = s->has_semantics ? s->semantics : j->cfg.semantics;
        if (tw_rule_create(p, s->name, s->keys, s->values, s->nparams, sem,
                           j->host, &j->rules[j->nrules], why,
                           sizeof(why)) != TW_OK) {
            snprintf(err, errlen, "%s", why);
            return TW_ERR;
        }
        j->nrules++;
    }
    return TW_OK;
}

int tw_job_new(const char *job_id, const tw_job_config *cfg, tw_registry *reg,
               const tw_rule_spec *specs, size_t nspecs, tw_job **out,
               char *err, size_t errlen)
{
    *out = NULL;
    tw_job *j = calloc(1, sizeof(*j));
    if (j == NULL) {
        snprintf(err, errlen, "out of memory");
        return TW_ERR;
    }
    j->id = strdup(job_id);
    if (cfg != NULL)
        j->cfg = *cfg;
    else
        tw_job_config_default(&j->cfg);
    if (j->cfg.clock_skew_us < 0)
        j->cfg.clock_skew_us = skew_default_us(&j->cfg);
    j->reg = reg;
    tw_arena_init(&j->dict);
    tw_strmap_init(&j->series_ids);
    tw_strmap_init(&j->node_ids);
    tw_strmap_init(&j->producer_ids);
    tw_job_loss_init(&j->loss);
    tw_watermark_init(&j->wm, j->cfg.idle_node_us);
    j->windows = tw_windows_new();
    if (j->id == NULL || j->windows == NULL ||
        (j->host = tw_host_ctx_new(reg, j->windows, job_id)) == NULL) {
        snprintf(err, errlen, "out of memory");
        tw_job_free(j);
        return TW_ERR;
    }
    tw_host_ctx_set_isolation(j->host, &j->cfg.isolation);
    if (create_rules(j, specs, nspecs, err, errlen) != TW_OK) {
        tw_job_free(j);
        return TW_ERR;
    }
    for (size_t i = 0; i < j->nrules && j->wallclock == NULL; i++)
        if (tw_rule_has_wallclock(j->rules[i]) &&
            (j->wallclock = tw_wallclock_tracker_new()) == NULL) {
            snprintf(err, errlen, "out of memory");
            tw_job_free(j);
            return TW_ERR;
        }
    *out = j;
    return TW_OK;
}

void tw_job_free(tw_job *j)
{
    if (j == NULL)
        return;
    for (size_t i = 0; i < j->nrules; i++)
        tw_rule_destroy(j->rules[i]);
    free(j->rules);
    for (size_t i = 0; i < j->nchunks; i++)
        tw_batch_free(j->chunks[i].batch);
    free(j->chunks);
    tw_buf_free(j->pack);
    free(j->scan_samples);
    free(j->scan_events);
    free(j->scan_tensors);
    free(j->tensor_order);
    free(j->order);
    free(j->csegs);
    free(j->dsegs);
    free(j->pend);
    for (size_t i = 0; i < j->nretired; i++)
        tw_batch_free(j->retired[i].batch);
    free(j->retired);
    tw_buf_free(j->snap);
    free(j->snap_off);
    tw_job_restore_drop_(j);
    for (size_t i = 0; i < j->nunsealed; i++)
        free(j->unsealed[i]);
    free(j->unsealed);
    free(j->stale);
    free(j->series);
    free(j->nodes);
    for (size_t i = 0; i < j->nproducers; i++)
        free(j->producers[i].dict_ids);
    free(j->producers);
    tw_strmap_free(&j->series_ids);
    tw_strmap_free(&j->node_ids);
    tw_strmap_free(&j->producer_ids);
    tw_watermark_free(&j->wm);
    tw_arena_free(&j->dict);
    tw_host_ctx_free(j->host);
    tw_windows_free(j->windows);
    tw_buf_free(j->ckpt);
    tw_job_loss_free(&j->loss);
    tw_wallclock_tracker_free(j->wallclock);
    free(j->id);
    free(j);
}

void tw_job_on_scan(tw_job *j, tw_job_scan_fn fn, void *ud)
{
    j->on_scan = fn;
    j->on_scan_ud = ud;
}

void tw_job_on_wallclock(tw_job *j, tw_job_wallclock_fn fn, void *ud)
{
    j->on_wallclock = fn;
    j->on_wallclock_ud = ud;
}

/* Every rule with a wall-clock callback, at now_us; 1 when one of them
 * changed its status or counters (what alerts and results show). */
static int run_wallclock_rules(tw_job *j, int64_t now_us, int offline)
{
    const tw_wallclock *wc = tw_wallclock_view(j->wallclock, now_us, offline);
    int changed = 0;
    for (size_t r = 0; r < j->nrules; r++) {
        tw_rule *rule = j->rules[r];
        if (!tw_rule_has_wallclock(rule) ||
            tw_rule_get_status(rule) == TW_STATUS_ERROR)
            continue;
        tw_rule_status before = tw_rule_get_status(rule);
        tw_scan_result was = *tw_rule_last_result(rule);
        tw_rule_wallclock(rule, wc); /* a failure goes Error alone */
        const tw_scan_result *now = tw_rule_last_result(rule);
        changed |= before != tw_rule_get_status(rule) ||
                   was.condition_met != now->condition_met ||
                   was.violations != now->violations ||
                   was.rule_triggered != now->rule_triggered ||
                   was.datapoints != now->datapoints;
    }
    return changed;
}

/* A restored job runs its pending scans again before anything else
 * (job_state.c, deferred state); the daemon does it right after loading. */
static int restored(tw_job *j)
{
    if (!j->replay_due)
        return TW_OK;
    char err[512];
    if (tw_job_restore_end(j, err, sizeof(err)) != TW_OK) {
        tw_log(TW_LOG_ERROR, "%s", err);
        return TW_ERR;
    }
    return TW_OK;
}

void tw_job_wallclock(tw_job *j, int64_t now_us)
{
    if (j->wallclock == NULL || j->cfg.wall_now == NULL || j->finished ||
        restored(j) != TW_OK)
        return;
    /* Saved when what it shows changed (a finding, a status): a quiet
     * call's bookkeeping rides with the next scan's checkpoint, so a
     * thousand idle jobs do not rewrite their rules every second. */
    if (!run_wallclock_rules(j, now_us, 0))
        return;
    j->rules_changes++;
    if (j->on_wallclock != NULL)
        j->on_wallclock(j->on_wallclock_ud, j, now_us);
}

void tw_job_set_first_timestamp(tw_job *j, int64_t first_us)
{
    /* scans work in ns: a time past that range (a JOB_START or file name
     * beyond year 2262) cannot be F; F then comes from the data */
    if (j->started || first_us > INT64_MAX / 1000 ||
        first_us < INT64_MIN / 1000)
        return;
    /* Several producers announce the job (a training hook from its
     * process start, an agent from its own later start): the job began
     * with the earliest of them. */
    if (j->first_fixed && first_us >= j->first_us)
        return;
    j->first_us = first_us;
    j->first_fixed = 1;
    j->core_changes++;
    j->next_start_us = first_us;
}

void tw_job_set_scan_limit(tw_job *j, int64_t limit_us)
{
    j->scan_limit_us = limit_us;
    j->core_changes++;
}

const char *tw_job_id(const tw_job *j)
{
    return j->id;
}
int tw_job_finished(const tw_job *j)
{
    return j->finished;
}
int tw_job_note_loss(tw_job *j, tw_loss_kind kind, const char *where,
                     uint64_t from, uint64_t to)
{
    j->core_changes++;
    return tw_job_loss_add(&j->loss, j->id, kind, where, from, to);
}
const tw_job_loss *tw_job_loss_of(const tw_job *j)
{
    return &j->loss;
}
int tw_job_end_marker_seen(const tw_job *j)
{
    return j->end_marker;
}
int64_t tw_job_first_timestamp(const tw_job *j)
{
    return j->first_us;
}
size_t tw_job_nrules(const tw_job *j)
{
    return j->nrules;
}
tw_rule *tw_job_rule(tw_job *j, size_t i)
{
    return i < j->nrules ? j->rules[i] : NULL;
}

int64_t tw_job_latest_timestamp(const tw_job *j)
{
    /* RULES.md §1.4: the newest system file, replaced by the newest
     * framework file when that is smaller. */
    int64_t s = j->latest_system_us, f = j->latest_framework_us;
    if (s == 0)
        return f;
    if (f != 0 && f < s)
        return f;
    return s;
}

void tw_job_get_stats(const tw_job *j, tw_job_stats *out)
{
    *out = j->stats;
    out->buffered_batches = j->nchunks;
}

size_t tw_job_memory(const tw_job *j)
{
    size_t bytes = tw_windows_memory(j->windows) + j->dict.total +
                   j->nseries * sizeof(tw_series);
    for (size_t i = 0; i < j->nchunks; i++)
        bytes += j->chunks[i].batch->arena.total;
    return bytes;
}

/* ---- dictionary -------------------------------------------------------- */

static int node_index(tw_job *j, const char *node, uint32_t *out)
{
    size_t len = strlen(node);
    if (tw_strmap_get(&j->node_ids, node, len, out))
        return TW_OK;
    if (tw_grow((void **)&j->nodes, &j->nodes_cap, j->nnodes + 1,
                sizeof(char *), 16) != TW_OK ||
        tw_strmap_put(&j->node_ids, node, len, (uint32_t)j->nnodes) != TW_OK)
        return TW_ERR;
    j->nodes[j->nnodes] = tw_strmap_key(&j->node_ids, node, len);
    *out = (uint32_t)j->nnodes++;
    return TW_OK;
}

static size_t key_part(char *key, size_t o, size_t cap, const char *s)
{
    size_t n = strlen(s);
    if (o + n + 1 >= cap)
        n = o + 1 < cap ? cap - o - 1 : 0;
    memcpy(key + o, s, n);
    o += n;
    if (o + 1 < cap)
        key[o++] = '\x1f';
    return o;
}

static int series_id(tw_job *j, uint32_t node, const char *node_name,
                     const tw_batch_series *bs, uint32_t *out)
{
    char key[1024];
    size_t len = key_part(key, 0, sizeof(key), node_name);
    len = key_part(key, len, sizeof(key), bs->type ? bs->type : "");
    len = key_part(key, len, sizeof(key), bs->name ? bs->name : "\x1e");
    len = key_part(key, len, sizeof(key), bs->dimension ? bs->dimension : "");
    if (tw_strmap_get(&j->series_ids, key, len, out))
        return TW_OK;
    if (tw_grow((void **)&j->series, &j->series_cap, j->nseries + 1,
                sizeof(tw_series), 16) != TW_OK)
        return TW_ERR;
    tw_series *s = &j->series[j->nseries];
    s->id = (uint32_t)j->nseries;
    s->node = node;
    s->type = tw_arena_strdup(&j->dict, bs->type ? bs->type : "");
    s->name = bs->name ? tw_arena_strdup(&j->dict, bs->name) : NULL;
    s->dimension =
        tw_arena_strdup(&j->dict, bs->dimension ? bs->dimension : "");
    s->metric = tw_metric_classify(s->type, s->name, s->dimension);
    if (s->type == NULL || s->dimension == NULL ||
        (bs->name != NULL && s->name == NULL))
        return TW_ERR;
    if (tw_strmap_put(&j->series_ids, key, len, s->id) != TW_OK ||
        tw_windows_add_series(j->windows, s->id, s->metric) != TW_OK)
        return TW_ERR;
    *out = s->id;
    j->nseries++;
    return TW_OK;
}

/* "<kind>:<node>" into key (cut at cap - 1 bytes); its length. */
static size_t producer_key(char *key, size_t cap, const char *kind,
                           const char *node)
{
    int n = snprintf(key, cap, "%s:%s", kind, node);
    return n < 0 ? 0 : (size_t)n < cap ? (size_t)n : cap - 1;
}

static producer *producer_get(tw_job *j, const char *kind, const char *node)
{
    char key[512];
    size_t len = producer_key(key, sizeof(key), kind, node);
    uint32_t idx;
    if (tw_strmap_get(&j->producer_ids, key, len, &idx))
        return &j->producers[idx];
    if (tw_grow((void **)&j->producers, &j->producers_cap, j->nproducers + 1,
                sizeof(producer), 16) != TW_OK ||
        tw_strmap_put(&j->producer_ids, key, len, (uint32_t)j->nproducers) !=
            TW_OK)
        return NULL;
    producer *p = &j->producers[j->nproducers++];
    memset(p, 0, sizeof(*p));
    p->name = tw_strmap_key(&j->producer_ids, key, len);
    return p;
}

/* ---- ingest ------------------------------------------------------------ */

static int str_same(const char *a, const char *b)
{
    if (a == NULL || b == NULL)
        return a == b;
    return strcmp(a, b) == 0;
}

static int same_series(const tw_series *s, const tw_batch_series *b)
{
    return str_same(s->dimension, b->dimension ? b->dimension : "") &&
           str_same(s->name, b->name) &&
           str_same(s->type, b->type ? b->type : "");
}

/* Reports the sequence numbers in [lo, hi] (inside p's window) that were
 * never seen as gaps of p's node ("seq:<node>"). */
static int seq_report_unseen(tw_job *j, const producer *p, uint64_t lo,
                             uint64_t hi)
{
    uint64_t run_from = 0;
    int in_run = 0;
    for (uint64_t s = lo; s <= hi && s != 0; s++) {
        uint64_t back = p->max_seq - s;
        TW_ASSERT(back < SEQ_WINDOW);
        int seen = (p->seen[back / 64] >> (back % 64)) & 1u;
        if (!seen && !in_run) {
            run_from = s;
            in_run = 1;
        } else if (seen && in_run) {
            in_run = 0;
            if (tw_job_loss_add(&j->loss, j->id, TW_LOSS_SEQ, p->name + 4,
                                run_from, s - 1) != TW_OK)
                return TW_ERR;
        }
    }
    if (in_run && tw_job_loss_add(&j->loss, j->id, TW_LOSS_SEQ, p->name + 4,
                                  run_from, hi) != TW_OK)
        return TW_ERR;
    return TW_OK;
}

/* Records seq; returns 1 when it was seen before (or is too old to tell),
 * 0 when new, TW_ERR on out-of-memory. Sequence numbers start at 1: those
 * that leave the window unseen are gaps, recorded as data loss. */
static int seq_seen(tw_job *j, producer *p, uint64_t seq)
{
    if (seq > p->max_seq) {
        uint64_t shift = seq - p->max_seq;
        /* numbers leaving the window: up to seq - SEQ_WINDOW */
        if (seq > SEQ_WINDOW) {
            uint64_t leave_hi = seq - SEQ_WINDOW;
            uint64_t lo =
                p->max_seq >= SEQ_WINDOW ? p->max_seq - SEQ_WINDOW + 1 : 1;
            uint64_t hi = leave_hi < p->max_seq ? leave_hi : p->max_seq;
            if (lo <= hi && seq_report_unseen(j, p, lo, hi) != TW_OK)
                return TW_ERR;
            if (leave_hi > p->max_seq &&
                tw_job_loss_add(&j->loss, j->id, TW_LOSS_SEQ, p->name + 4,
                                p->max_seq + 1, leave_hi) != TW_OK)
                return TW_ERR;
        }
        if (shift >= SEQ_WINDOW) {
            memset(p->seen, 0, sizeof(p->seen));
        } else {
            /* Slide the window: bit i means max_seq - i was seen. */
            size_t words = SEQ_WINDOW / 64, ws = (size_t)(shift / 64);
            unsigned bs = (unsigned)(shift % 64);
            for (size_t w = words; w-- > 0;) {
                uint64_t lo = w >= ws ? p->seen[w - ws] : 0;
                uint64_t lower = w >= ws + 1 ? p->seen[w - ws - 1] : 0;
                p->seen[w] = bs ? (lo << bs) | (lower >> (64 - bs)) : lo;
            }
        }
        p->max_seq = seq;
        p->seen[0] |= 1u;
        return 0;
    }
    uint64_t back = p->max_seq - seq;
    if (back >= SEQ_WINDOW)
        return 1;
    uint64_t mask = 1ull << (back % 64);
    if (p->seen[back / 64] & mask)
        return 1;
    p->seen[back / 64] |= mask;
    return 0;
}

/* At the job's end every number still unseen in a node's window is lost. */
static int seq_report_open_gaps(tw_job *j)
{
    for (size_t i = 0; i < j->nproducers; i++) {
        const producer *p = &j->producers[i];
        if (strncmp(p->name, "seq:", 4) != 0 || p->max_seq == 0)
            continue;
        uint64_t lo =
            p->max_seq >= SEQ_WINDOW ? p->max_seq - SEQ_WINDOW + 1 : 1;
        if (seq_report_unseen(j, p, lo, p->max_seq) != TW_OK)
            return TW_ERR;
    }
    return TW_OK;
}

static int64_t scan_start(const tw_job *j, uint64_t k)
{
    return j->first_us + (int64_t)k * j->cfg.tick_us;
}

/* Start of the oldest scan still open: anything entirely before it is late. */
static int64_t open_from_us(const tw_job *j)
{
    if (!j->started)
        return INT64_MIN;
    return j->cfg.tick_us > 0 ? scan_start(j, j->next_scan) : j->next_start_us;
}

/* 1 when every "start:<node>" producer has its "end:<node>" (or there is
 * none at all) - see the markers in tw_job_ingest. */
static int every_start_ended(const tw_job *j)
{
    for (size_t i = 0; i < j->nproducers; i++) {
        const char *name = j->producers[i].name;
        if (strncmp(name, "start:", 6) != 0)
            continue;
        char key[512];
        size_t len = producer_key(key, sizeof(key), "end", name + 6);
        uint32_t idx;
        if (!tw_strmap_get(&j->producer_ids, key, len, &idx))
            return 0;
    }
    return 1;
}

/* ---- clock skew (job.h) ------------------------------------------------ */

static int skew_bounded(const tw_job *j)
{
    return !j->cfg.external_watermark && j->cfg.clock_skew_us > 0;
}

/* The job's newest accepted time, else its JOB_START time; 0 = none.
 * Producers' times only grow, so the maximum is cached (after a restore
 * it is recomputed once). */
static int64_t skew_reference_us(tw_job *j)
{
    if (j->newest_us == 0)
        for (size_t i = 0; i < j->nproducers; i++)
            if (j->producers[i].newest_us > j->newest_us)
                j->newest_us = j->producers[i].newest_us;
    int64_t ref = j->first_fixed ? j->first_us : 0;
    return j->newest_us > ref ? j->newest_us : ref;
}

/* One WARN per node: the first time it refuses, with what and why. */
static void skew_warn(tw_job *j, producer *p, const char *node,
                      const char *what, double t_s, int64_t limit_us)
{
    if (p->skew_warned)
        return;
    p->skew_warned = 1;
    if (limit_us == INT64_MAX)
        tw_log(TW_LOG_WARN,
               "job %s node %s: %s time %g s is not a representable time: "
               "refused and counted (skewed); further ones of this node are "
               "counted only",
               j->id, node, what, t_s);
    else
        tw_log(TW_LOG_WARN,
               "job %s node %s: %s time %.6f s is %.0f s ahead of the job's "
               "newest time %.6f s, beyond the clock-skew bound of %.0f s: "
               "refused and counted (skewed); further ones of this node are "
               "counted only",
               j->id, node, what, t_s,
               t_s - (double)(limit_us - j->cfg.clock_skew_us) / 1e6,
               (double)(limit_us - j->cfg.clock_skew_us) / 1e6,
               (double)j->cfg.clock_skew_us / 1e6);
}

/* µs -> ns, saturated (limits only). */
static int64_t limit_ns_of(int64_t us)
{
    int64_t ns;
    if (!__builtin_mul_overflow(us, (int64_t)1000, &ns))
        return ns;
    return us > 0 ? INT64_MAX : INT64_MIN;
}

/* The newest time a batch may carry (INT64_MAX = no bound), after the
 * TW_JOB_SKEW_CONFIRM rule for batches wholly beyond it. */
static int64_t skew_limit_us(tw_job *j, const tw_batch *b, producer *p,
                             const char *node)
{
    if (!skew_bounded(j))
        return INT64_MAX;
    int64_t ref = skew_reference_us(j);
    if (ref == 0) {
        /* No time seen yet: the batch's earliest one. */
        ref = INT64_MAX;
        for (size_t i = 0; i < b->nsamples; i++) {
            int64_t us;
            if (tw_time_s_valid(b->samples[i].ts) &&
                tw_time_s_to_us(b->samples[i].ts, &us) && us < ref)
                ref = us;
        }
        for (size_t i = 0; i < b->nevents; i++)
            if (b->events[i].end_us < ref)
                ref = b->events[i].end_us;
        for (size_t i = 0; i < b->ntensors; i++)
            if (b->tensors[i].wall_us < ref)
                ref = b->tensors[i].wall_us;
        if (ref == INT64_MAX)
            return INT64_MAX;
    }
    int64_t limit = tw_time_add_sat(ref, j->cfg.clock_skew_us);
    int64_t limit_ns = limit_ns_of(limit);
    /* Is the whole batch beyond? (stops at the first time that is not) */
    size_t valid = 0;
    for (size_t i = 0; i < b->nsamples; i++) {
        int64_t ns;
        if (!tw_time_s_to_ns(b->samples[i].ts, &ns))
            continue;
        valid++;
        if (ns <= limit_ns)
            goto within;
    }
    for (size_t i = 0; i < b->nevents; i++) {
        valid++;
        if (b->events[i].end_us <= limit)
            goto within;
    }
    for (size_t i = 0; i < b->ntensors; i++) {
        valid++;
        if (b->tensors[i].wall_us <= limit)
            goto within;
    }
    if (valid == 0)
        goto within;
    if (++p->skew_run < TW_JOB_SKEW_CONFIRM)
        return limit;
    p->skew_run = 0;
    tw_log(TW_LOG_WARN,
           "job %s node %s: %d batches in a row lie wholly beyond the "
           "clock-skew bound (%.0f s ahead of %.6f s): taken as a real jump "
           "of its clock and accepted",
           j->id, node, TW_JOB_SKEW_CONFIRM, (double)j->cfg.clock_skew_us / 1e6,
           (double)ref / 1e6);
    return INT64_MAX;
within:
    p->skew_run = 0;
    return limit;
}

/* 1 when a tensor at t falls in a scan already closed (job.h). */
static int tensor_late(const tw_job *j, int64_t t)
{
    if (!j->started)
        return 0;
    return j->cfg.tick_us > 0 ? t < scan_start(j, j->next_scan)
                              : t <= j->next_start_us;
}

/* Keeps b's tensors that are neither skewed nor late (counting those),
 * and advances the clock with them as framework input of the node. */
static int ingest_tensors(tw_job *j, tw_batch *b, chunk *c, const char *node,
                          size_t clock_i, int64_t limit, int has_samples,
                          int has_events)
{
    size_t kept = 0;
    int64_t mn = INT64_MAX, mx = INT64_MIN;
    for (size_t i = 0; i < b->ntensors; i++) {
        const tw_tensor *t = &b->tensors[i];
        /* scans work in ns: a time past year 2262 is no time */
        int representable = t->wall_us > 0 && t->wall_us <= INT64_MAX / 1000;
        if (!representable || t->wall_us > limit) {
            j->stats.skewed_tensors++;
            skew_warn(j, &j->producers[clock_i], node, "tensor",
                      (double)t->wall_us / 1e6,
                      representable ? limit : INT64_MAX);
            continue;
        }
        if (tensor_late(j, t->wall_us)) {
            j->stats.late_tensors++;
            continue;
        }
        b->tensors[kept++] = *t;
        if (t->wall_us < mn)
            mn = t->wall_us;
        if (t->wall_us > mx)
            mx = t->wall_us;
    }
    b->ntensors = kept;
    j->stats.tensors += kept;
    if (kept == 0)
        return TW_OK;
    c->min_tensor_us = mn;
    c->max_tensor_us = mx;
    if (!has_samples && !has_events)
        c->order_ts = mn;
    if (j->first_candidate_us == 0 || mn < j->first_candidate_us)
        j->first_candidate_us = mn;
    if (mx > j->latest_framework_us)
        j->latest_framework_us = mx;
    producer *p = producer_get(j, "fw", node);
    if (p == NULL || tw_job_producer_newest_(j, p, mx) != TW_OK)
        return TW_ERR;
    if (j->newest_us != 0 && mx > j->newest_us)
        j->newest_us = mx; /* 0: skew_reference_us computes it */
    return TW_OK;
}

/* The samples of c's batch packed into a copy without them (segmented
 * jobs: the bytes a checkpoint's "chunks" part writes, 2-4 a sample
 * instead of 24). NULL on out of memory or a batch with more than
 * samples. */
static tw_batch *pack_samples(tw_job *j, chunk *c)
{
    const tw_batch *b = c->batch;
    if (j->pack == NULL && (j->pack = tw_buf_new()) == NULL)
        return NULL;
    tw_buf_clear(j->pack);
    tw_ckw w = {j->pack, 0};
    tw_sample_cursor cur;
    tw_sample_cursor_init(&cur, 1);
    for (size_t i = 0; i < b->nsamples; i++)
        tw_sample_pack(&w, &cur, &b->samples[i]);
    if (w.failed)
        return NULL;
    size_t len = tw_buf_len(j->pack);
    uint8_t *at;
    tw_batch *p = tw_batch_shell_copy(b, len, &at);
    if (p == NULL)
        return NULL;
    if (len > 0)
        memcpy(at, tw_buf_data(j->pack), len);
    c->packed = at;
    c->packed_len = len;
    c->npacked = b->nsamples;
    return p;
}

/* A buffered agent batch is mostly its series dictionary, dead once its
 * samples carry the job's series ids: keep a tight copy of the samples
 * instead (about 3x less memory at 96 cores; packed, 20x less). Out of
 * memory keeps it. */
static void buffer_tight(tw_job *j, chunk *c)
{
    tw_batch *b = c->batch;
    tw_batch *tight = j->segmented && b->nsamples > 0
                          ? pack_samples(j, c)
                          : tw_batch_samples_copy(b);
    if (tight == NULL)
        return;
    if (c->order_name == b->file_path)
        c->order_name = tight->file_path;
    else if (c->order_name == b->node)
        c->order_name = tight->node;
    c->batch = tight;
    tw_batch_free(b);
}

int tw_job_ingest(tw_job *j, tw_batch *b)
{
    if (restored(j) != TW_OK) {
        tw_batch_free(b);
        return TW_ERR;
    }
    j->stats.batches++;
    j->core_changes++;
    const char *node = b->node != NULL ? b->node : "";
    int has_samples = b->nsamples > 0, has_events = b->nevents > 0;
    int has_tensors = b->ntensors > 0;

    /* Job markers: every node that announced itself with JOB_START (an
     * agent per host, or replay's one "replay" node) must send JOB_END
     * before the job has ended; with no JOB_START seen, one JOB_END ends it.
     * Kept as sequence-only producer entries ("start:<node>", "end:<node>",
     * newest_us 0: the watermark skips them), so checkpoints carry them. */
    int end_seen = 0;
    for (size_t i = 0; i < b->nmarkers; i++) {
        tw_marker_kind kind = b->markers[i].kind;
        if (kind != TW_MARKER_JOB_START && kind != TW_MARKER_JOB_END)
            continue;
        if (producer_get(j, kind == TW_MARKER_JOB_START ? "start" : "end",
                         node) == NULL)
            goto oom;
        end_seen |= kind == TW_MARKER_JOB_END;
    }
    if (end_seen && !j->end_marker)
        j->end_marker = every_start_ended(j);

    /* Redelivery: a (node, seq) at or below the newest seen is a duplicate.
     * seq 0 means "not sequenced" (offline readers). */
    if (b->seq != 0) {
        producer *p = producer_get(j, "seq", node);
        if (p == NULL)
            goto oom;
        int seen = seq_seen(j, p, b->seq);
        if (seen < 0)
            goto oom;
        if (seen) {
            j->stats.duplicate_batches++;
            tw_batch_free(b);
            return TW_OK;
        }
    }
    /* stamped on arrival, even when empty or late: it arrived */
    if (j->wallclock != NULL && j->cfg.wall_now != NULL &&
        tw_wallclock_note_batch(j->wallclock, b, j->cfg.wall_now()) != TW_OK)
        goto oom;
    if (!has_samples && !has_events && !has_tensors) {
        tw_batch_free(b);
        return TW_OK;
    }

    /* by index: producer_get below may move the array */
    producer *clock = producer_get(j, has_samples ? "sys" : "fw", node);
    if (clock == NULL)
        goto oom;
    size_t clock_i = (size_t)(clock - j->producers);
    int64_t limit = skew_limit_us(j, b, clock, node);
    if (b->file_ts_us != 0 &&
        (b->file_ts_us > limit || b->file_ts_us > INT64_MAX / 1000 ||
         b->file_ts_us < INT64_MIN / 1000))
        b->file_ts_us = 0; /* unusable: order and L come from the data */

    chunk c;
    memset(&c, 0, sizeof(c));
    c.batch = b;
    c.arrival = j->arrivals++;
    c.order_name = node;
    int64_t limit_ns = limit_ns_of(limit);
    int64_t open_from = open_from_us(j);
    int64_t open_from_ns =
        open_from == INT64_MIN ? INT64_MIN : open_from * 1000;

    if (has_samples) {
        uint32_t nidx;
        if (node_index(j, node, &nidx) != TW_OK)
            goto oom;
        producer *sp = producer_get(j, "sys", node);
        if (sp == NULL)
            goto oom;
        if (tw_grow((void **)&sp->dict_ids, &sp->dict_cap, b->nseries + 1,
                    sizeof(uint32_t), 16) != TW_OK)
            goto oom;
        uint32_t *map = sp->dict_ids;
        for (size_t i = 0; i < b->nseries; i++) {
            if (i < sp->ndict && same_series(&j->series[map[i]], &b->series[i]))
                continue;
            if (series_id(j, nidx, node, &b->series[i], &map[i]) != TW_OK)
                goto oom;
        }
        if (b->nseries > sp->ndict)
            sp->ndict = b->nseries;
        /* Remap to job-wide ids, drop late samples, find the time range. */
        size_t kept = 0;
        double min_ts = INFINITY, max_ts = -INFINITY;
        for (size_t i = 0; i < b->nsamples; i++) {
            tw_sample s = b->samples[i];
            if (s.series >= b->nseries)
                continue; /* decoders validate; readers never produce it */
            int64_t ns = 0;
            int valid = tw_time_s_to_ns(s.ts, &ns); /* then µs fit too */
            if (!valid || ns > limit_ns) {
                j->stats.skewed_samples++;
                skew_warn(j, &j->producers[clock_i], node, "sample", s.ts,
                          valid ? limit : INT64_MAX);
                continue;
            }
            if (ns < open_from_ns) {
                j->stats.late_samples++;
                continue;
            }
            s.series = map[s.series];
            b->samples[kept++] = s;
            if (s.ts < min_ts)
                min_ts = s.ts;
            if (s.ts > max_ts)
                max_ts = s.ts;
        }
        b->nsamples = kept;
        j->stats.samples += kept;
        if (kept > 0) {
            c.min_ns = ts_to_ns(min_ts);
            c.max_ns = ts_to_ns(max_ts);
            int64_t file_ts =
                b->file_ts_us ? b->file_ts_us : minute_floor_us(min_ts);
            c.order_ts = file_ts;
            if (j->first_candidate_us == 0 || file_ts < j->first_candidate_us)
                j->first_candidate_us = file_ts;
            int64_t latest =
                b->file_ts_us ? b->file_ts_us : minute_floor_us(max_ts);
            if (latest > j->latest_system_us)
                j->latest_system_us = latest;
            int64_t newest = 0;
            (void)tw_time_s_to_us(max_ts, &newest); /* checked above */
            if (tw_job_producer_newest_(j, sp, newest) != TW_OK)
                goto oom;
            if (j->newest_us != 0 && newest > j->newest_us)
                j->newest_us = newest; /* 0: skew_reference_us computes it */
        }
        has_samples = kept > 0;
    }

    if (has_events) {
        size_t kept = 0;
        int64_t min_start = INT64_MAX, max_end = INT64_MIN;
        int source = TW_SOURCE_COUNT;
        for (size_t i = 0; i < b->nevents; i++) {
            tw_fw_event *e = &b->events[i];
            if (e->end_us > limit) {
                j->stats.skewed_events++;
                skew_warn(j, &j->producers[clock_i], node, "event end",
                          (double)e->end_us / 1e6, limit);
                continue;
            }
            if (open_from != INT64_MIN && e->end_us < open_from) {
                j->stats.late_events++;
                continue;
            }
            b->events[kept++] = *e;
            if (e->start_us < min_start)
                min_start = e->start_us;
            if (e->end_us > max_end)
                max_end = e->end_us;
            if ((int)e->source < source)
                source = (int)e->source;
        }
        b->nevents = kept;
        j->stats.events += kept;
        if (kept > 0) {
            c.min_start_us = min_start;
            c.max_end_us = max_end;
            c.source = source;
            int64_t file_ts = b->file_ts_us ? b->file_ts_us : max_end;
            if (!has_samples) {
                c.order_ts = file_ts;
                if (b->file_path != NULL)
                    c.order_name = b->file_path;
            }
            if (j->first_candidate_us == 0 || file_ts < j->first_candidate_us)
                j->first_candidate_us = file_ts;
            if (file_ts > j->latest_framework_us)
                j->latest_framework_us = file_ts;
            producer *p = producer_get(j, "fw", node);
            if (p == NULL || tw_job_producer_newest_(j, p, max_end) != TW_OK)
                goto oom;
            if (j->newest_us != 0 && max_end > j->newest_us)
                j->newest_us = max_end; /* 0: skew_reference_us computes it */
        }
        has_events = kept > 0;
    }

    if (has_tensors) {
        if (ingest_tensors(j, b, &c, node, clock_i, limit, has_samples,
                           has_events) != TW_OK)
            goto oom;
        has_tensors = b->ntensors > 0;
    }

    if (!has_samples && !has_events && !has_tensors) {
        tw_batch_free(b);
        return TW_OK;
    }
    if (tw_grow((void **)&j->chunks, &j->chunks_cap, j->nchunks + 1,
                sizeof(chunk), 16) != TW_OK)
        goto oom;
    if (!has_samples)
        c.min_ns = c.max_ns = INT64_MIN;
    if (!has_events) {
        c.min_start_us = INT64_MAX;
        c.max_end_us = INT64_MIN;
    }
    if (!has_tensors) {
        c.min_tensor_us = INT64_MAX;
        c.max_tensor_us = INT64_MIN;
    }
    j->chunks[j->nchunks++] = c;
    if (b->nseries > 0)
        buffer_tight(j, &j->chunks[j->nchunks - 1]);

    if (!j->cfg.external_watermark) {
        /* Watermark: the slowest active producer's newest time. */
        int64_t wm = tw_watermark_get(&j->wm);
        if (wm != INT64_MAX)
            return tw_job_advance(j, wm);
    }
    return TW_OK;
oom:
    tw_batch_free(b);
    return TW_ERR;
}

/* ---- scans --------------------------------------------------------------- */

static int cmp_system(const void *pa, const void *pb)
{
    const chunk *a = *(chunk *const *)pa, *b = *(chunk *const *)pb;
    if (a->order_ts != b->order_ts)
        return a->order_ts < b->order_ts ? -1 : 1;
    int c = strcmp(a->order_name, b->order_name);
    if (c != 0)
        return c;
    if (a->batch->seq != b->batch->seq)
        return a->batch->seq < b->batch->seq ? -1 : 1;
    return a->arrival < b->arrival ? -1 : a->arrival > b->arrival;
}

static int cmp_framework(const void *pa, const void *pb)
{
    const chunk *a = *(chunk *const *)pa, *b = *(chunk *const *)pb;
    if (a->source != b->source)
        return a->source < b->source ? -1 : 1;
    return cmp_system(pa, pb);
}

/* A buffered tensor and what orders it within a scan. */
typedef struct tensor_key {
    const tw_tensor *t;
    uint64_t arrival;
    size_t pos;
} tensor_key;

static int cmp_tensor(const void *pa, const void *pb)
{
    const tensor_key *a = pa, *b = pb;
    int c = strcmp(a->t->node, b->t->node);
    if (c != 0)
        return c;
    if (a->t->step != b->t->step)
        return a->t->step < b->t->step ? -1 : 1;
    if ((c = strcmp(a->t->name, b->t->name)) != 0)
        return c;
    if (a->arrival != b->arrival)
        return a->arrival < b->arrival ? -1 : 1;
    return a->pos < b->pos ? -1 : a->pos > b->pos;
}

/* Does the scan [start, end] (tick: [start, end), the final one closed;
 * continuous: (start, end] unless start_inclusive) hold a tensor at t? */
static int tensor_in_scan(const tw_job *j, uint64_t k, int64_t t,
                          int64_t start_us, int64_t end_us, int start_inclusive,
                          int final)
{
    if (t > end_us || (t == end_us && j->cfg.tick_us > 0 && !final))
        return 0;
    if (k == 0)
        return 1; /* anything before F belongs to the first scan */
    return t > start_us || (t == start_us && start_inclusive);
}

/* Copies the tensors of scan k into j->scan_tensors in (node, step, name,
 * arrival) order; *n receives their count. */
static int select_tensors(tw_job *j, uint64_t k, int64_t start_us,
                          int64_t end_us, int start_inclusive, int final,
                          uint64_t cutoff, size_t *n)
{
    size_t nt = 0;
    for (size_t i = 0; i < j->nchunks; i++) {
        const chunk *c = &j->chunks[i];
        if (c->arrival >= cutoff || c->max_tensor_us == INT64_MIN ||
            c->min_tensor_us > end_us)
            continue;
        const tw_batch *b = c->batch;
        if (tw_grow(&j->tensor_order, &j->tensor_order_cap, nt + b->ntensors,
                    sizeof(tensor_key), 16) != TW_OK)
            return TW_ERR;
        tensor_key *keys = j->tensor_order;
        for (size_t t = 0; t < b->ntensors; t++) {
            if (!tensor_in_scan(j, k, b->tensors[t].wall_us, start_us, end_us,
                                start_inclusive, final))
                continue;
            keys[nt].t = &b->tensors[t];
            keys[nt].arrival = c->arrival;
            keys[nt].pos = t;
            nt++;
        }
    }
    if (nt > 1)
        qsort(j->tensor_order, nt, sizeof(tensor_key), cmp_tensor);
    if (tw_grow((void **)&j->scan_tensors, &j->scan_tensors_cap, nt + 1,
                sizeof(tw_tensor), 16) != TW_OK)
        return TW_ERR;
    const tensor_key *keys = j->tensor_order;
    for (size_t i = 0; i < nt; i++)
        j->scan_tensors[i] = *keys[i].t;
    *n = nt;
    return TW_OK;
}

/* The inputs of scan k: the buffered batches with an arrival number below
 * `cutoff` (UINT64_MAX: all; a replay: those the scan first saw), their
 * samples, events and tensors in the scan's window, in the reference's
 * order, in the job's scan buffers. *scan gets all but the dictionary. */
static int scan_assemble(tw_job *j, uint64_t k, int64_t start_us,
                         int64_t end_us, int start_inclusive, int final,
                         uint64_t cutoff, tw_scan *scan)
{
    int64_t start_ns = start_us * 1000, end_ns = end_us * 1000;
    size_t nsel = 0;
    if (tw_grow((void **)&j->order, &j->order_cap, j->nchunks + 1,
                sizeof(chunk *), 16) != TW_OK)
        return TW_ERR;

    /* System samples, in (file, node, arrival) order. */
    for (size_t i = 0; i < j->nchunks; i++) {
        chunk *c = &j->chunks[i];
        if (c->arrival < cutoff && c->max_ns != INT64_MIN &&
            c->min_ns <= end_ns && c->max_ns >= start_ns)
            j->order[nsel++] = c;
    }
    if (nsel > 1)
        qsort(j->order, nsel, sizeof(chunk *), cmp_system);
    size_t ns = 0;
    for (size_t i = 0; i < nsel; i++) {
        const chunk *c = j->order[i];
        size_t n = chunk_nsamples(c);
        if (tw_grow((void **)&j->scan_samples, &j->scan_samples_cap, ns + n,
                    sizeof(tw_sample), 16) != TW_OK)
            return TW_ERR;
        const tw_sample *src = c->batch->samples;
        if (c->packed != NULL) {
            /* unpacked where they go; the loop below keeps those in the
             * scan, each written at or before where it was read */
            tw_ckr r;
            tw_ckr_init(&r, c->packed, c->packed_len);
            const char *bad =
                tw_sample_unpack_n(&r, n, 1, j->nseries, &j->scan_samples[ns]);
            TW_ASSERT(bad == NULL && tw_ckr_left(&r) == 0);
            src = &j->scan_samples[ns];
        }
        for (size_t s = 0; s < n; s++) {
            int64_t t = ts_to_ns(src[s].ts);
            if (t > end_ns || t < start_ns ||
                (!start_inclusive && t == start_ns))
                continue;
            tw_sample x = src[s];
            if (t == start_ns && k > 0)
                x.flags |= TW_SAMPLE_REPEAT;
            j->scan_samples[ns++] = x;
        }
    }

    /* Framework events, in (source, file, path, arrival) order. */
    nsel = 0;
    for (size_t i = 0; i < j->nchunks; i++) {
        chunk *c = &j->chunks[i];
        if (c->arrival < cutoff && c->max_end_us != INT64_MIN &&
            c->min_start_us <= end_us && c->max_end_us >= start_us)
            j->order[nsel++] = c;
    }
    if (nsel > 1)
        qsort(j->order, nsel, sizeof(chunk *), cmp_framework);
    size_t ne = 0;
    for (size_t i = 0; i < nsel; i++) {
        const tw_batch *b = j->order[i]->batch;
        if (tw_grow((void **)&j->scan_events, &j->scan_events_cap,
                    ne + b->nevents, sizeof(tw_fw_event), 16) != TW_OK)
            return TW_ERR;
        for (size_t e = 0; e < b->nevents; e++) {
            const tw_fw_event *ev = &b->events[e];
            if (ev->end_us < start_us || ev->start_us > end_us)
                continue;
            if (!start_inclusive && ev->end_us == start_us)
                continue;
            tw_fw_event x = *ev;
            if (k > 0 && ev->start_us <= start_us)
                x.flags |= TW_EVENT_REPEAT;
            j->scan_events[ne++] = x;
        }
    }

    size_t nt = 0;
    if (select_tensors(j, k, start_us, end_us, start_inclusive, final, cutoff,
                       &nt) != TW_OK)
        return TW_ERR;

    memset(scan, 0, sizeof(*scan));
    scan->index = k;
    scan->start_us = start_us;
    scan->end_us = end_us;
    scan->first_timestamp_us = j->first_us;
    scan->rule_clock_us = start_us;
    scan->samples = j->scan_samples;
    scan->nsamples = ns;
    scan->events = j->scan_events;
    scan->nevents = ne;
    scan->windows = j->windows;
    scan->final = final;
    scan->tensors = j->scan_tensors;
    scan->ntensors = nt;
    return TW_OK;
}

/* Releases the batches (arrival below `cutoff`) nothing after scan k can
 * select: samples before the next scan's start (end_ns, which is
 * inclusive there) and events that end before it. A segmented job keeps a
 * batch no save has written yet (j->retired): a replay of scan k would
 * need it. */
static int scan_release(tw_job *j, uint64_t k, int64_t end_us,
                        int start_inclusive, int final, uint64_t cutoff)
{
    int64_t end_ns = end_us * 1000;
    /* only once the store holds a core, and not past the bound (a store
     * that stays down): the next save then writes the state whole */
    int retire = j->segmented && j->seg_next != 0 && !j->force_whole;
    if (retire && j->nretired > TW_JOB_RETIRED_MAX) {
        for (size_t i = 0; i < j->nretired; i++)
            tw_batch_free(j->retired[i].batch);
        j->nretired = 0;
        j->force_whole = 1;
        retire = 0;
    }
    if (retire &&
        tw_grow((void **)&j->retired, &j->retired_cap,
                j->nretired + j->nchunks + 1, sizeof(chunk), 16) != TW_OK)
        return TW_ERR;
    size_t kept = 0;
    for (size_t i = 0; i < j->nchunks; i++) {
        chunk *c = &j->chunks[i];
        int sys_done = c->max_ns == INT64_MIN || c->max_ns < end_ns;
        int fw_done = c->max_end_us == INT64_MIN || c->max_end_us < end_us;
        int tensors_done = c->max_tensor_us < end_us || final;
        if (!start_inclusive) {
            sys_done = c->max_ns == INT64_MIN || c->max_ns <= end_ns;
            fw_done = c->max_end_us == INT64_MIN || c->max_end_us <= end_us;
        }
        if (j->cfg.tick_us <= 0)
            tensors_done = c->max_tensor_us <= end_us || final;
        if (c->arrival < cutoff && sys_done && fw_done && tensors_done) {
            tw_job_chunk_released_(j, c, k + 1);
            if (retire && c->seg == 0) {
                c->released_by = k + 1;
                j->retired[j->nretired++] = *c;
            } else
                tw_batch_free(c->batch);
        } else
            j->chunks[kept++] = *c;
    }
    j->nchunks = kept;
    return TW_OK;
}

static int run_scan(tw_job *j, uint64_t k, int64_t start_us, int64_t end_us,
                    int start_inclusive, int final)
{
    tw_scan scan;
    if (scan_assemble(j, k, start_us, end_us, start_inclusive, final,
                      UINT64_MAX, &scan) != TW_OK)
        return TW_ERR;
    scan.series = j->series;
    scan.nseries = j->nseries;
    scan.nodes = j->nodes;
    scan.nnodes = j->nnodes;
    /* what a restore needs to run it again (job_state.c) */
    pend_scan ps = {k,
                    start_us,
                    end_us,
                    j->arrivals,
                    j->nseries,
                    j->nnodes,
                    (uint8_t)(start_inclusive != 0),
                    (uint8_t)(final != 0)};
    j->last_scan = ps;
    j->has_last_scan = 1;
    if (j->segmented && j->seg_next != 0 && !j->force_whole) {
        if (tw_grow((void **)&j->pend, &j->pend_cap, j->npend + 1,
                    sizeof(*j->pend), 8) != TW_OK)
            return TW_ERR;
        j->pend[j->npend++] = ps;
    }
    j->core_changes++;
    j->rules_changes++;
    j->windows_changes++;
    if (tw_windows_feed_scan(j->windows, &scan) != TW_OK)
        return TW_ERR;
    for (size_t r = 0; r < j->nrules; r++)
        tw_rule_scan(j->rules[r], &scan); /* a failing rule goes Error alone */
    /* offline, event time is the wall clock: the scan's end is "now" */
    if (j->wallclock != NULL && j->cfg.wall_now == NULL) {
        if (tw_wallclock_note_scan(j->wallclock, &scan) != TW_OK)
            return TW_ERR;
        run_wallclock_rules(j, end_us, 1);
    }
    j->stats.scans++;
    if (j->on_scan != NULL)
        j->on_scan(j->on_scan_ud, j, &scan);
    return scan_release(j, k, end_us, start_inclusive, final, UINT64_MAX);
}

int tw_job_replay_(tw_job *j)
{
    for (size_t p = 0; p < j->npend; p++) {
        const pend_scan *ps = &j->pend[p];
        TW_ASSERT(ps->nseries <= j->nseries && ps->nnodes <= j->nnodes);
        tw_scan scan;
        if (scan_assemble(j, ps->k, ps->start_us, ps->end_us,
                          ps->start_inclusive, ps->final, ps->cutoff,
                          &scan) != TW_OK)
            return TW_ERR;
        scan.series = j->series;
        scan.nseries = (size_t)ps->nseries;
        scan.nodes = j->nodes;
        scan.nnodes = (size_t)ps->nnodes;
        if (tw_windows_feed_scan(j->windows, &scan) != TW_OK)
            return TW_ERR;
        for (size_t r = 0; r < j->nrules; r++)
            if (tw_job_rule_deferred_(j, r))
                tw_rule_scan(j->rules[r], &scan);
        if (scan_release(j, ps->k, ps->end_us, ps->start_inclusive, ps->final,
                         ps->cutoff) != TW_OK)
            return TW_ERR;
    }
    /* batches the last scan released but a kept segment brought back */
    if (j->has_last_scan) {
        const pend_scan *ls = &j->last_scan;
        return scan_release(j, ls->k, ls->end_us, ls->start_inclusive,
                            ls->final, ls->cutoff);
    }
    return TW_OK;
}

static void freeze_first(tw_job *j)
{
    if (j->started)
        return;
    if (!j->first_fixed) {
        j->first_us = j->first_candidate_us;
        j->next_start_us = j->first_us;
    }
    j->started = 1;
}

static int stop_requested(const tw_job *j)
{
    return j->cfg.stop_requested != NULL &&
           j->cfg.stop_requested(j->cfg.stop_ud);
}

static void scan_cap_hit(tw_job *j, int64_t watermark_us)
{
    if (j->stats.scan_cap_hits++ == 0)
        tw_log(TW_LOG_WARN,
               "job %s: the watermark (%.6f s) is more than %" PRIu64
               " scans ahead; the rest run with the next batches (counted "
               "in scan_cap_hits)",
               j->id, (double)watermark_us / 1e6, j->cfg.max_scans_per_advance);
}

int tw_job_advance(tw_job *j, int64_t watermark_us)
{
    if (j->finished)
        return TW_OK;
    if (restored(j) != TW_OK)
        return TW_ERR;
    if (!j->first_fixed && j->first_candidate_us == 0)
        return TW_OK; /* nothing seen yet */
    int64_t first = j->first_fixed ? j->first_us : j->first_candidate_us;
    if (j->cfg.tick_us > 0) {
        for (uint64_t ran = 0;; ran++) {
            int64_t end = first + (int64_t)(j->next_scan + 1) * j->cfg.tick_us;
            if (end + j->cfg.lateness_us > watermark_us)
                break;
            if (j->scan_limit_us != 0 &&
                first + (int64_t)j->next_scan * j->cfg.tick_us >=
                    j->scan_limit_us)
                break;
            if (j->cfg.max_scans_per_advance != 0 &&
                ran == j->cfg.max_scans_per_advance) {
                scan_cap_hit(j, watermark_us);
                break;
            }
            if (stop_requested(j))
                return TW_JOB_STOPPED;
            freeze_first(j);
            int64_t start = scan_start(j, j->next_scan);
            if (run_scan(j, j->next_scan, start, end, 1, 0) != TW_OK)
                return TW_ERR;
            j->next_scan++;
        }
    } else {
        int64_t end = watermark_us - j->cfg.lateness_us;
        if (stop_requested(j))
            return TW_JOB_STOPPED;
        if (!j->started && end >= first) {
            freeze_first(j);
            if (run_scan(j, 0, j->first_us, end, 1, 0) != TW_OK)
                return TW_ERR;
            j->next_start_us = end;
            j->next_scan = 1;
        } else if (j->started && end > j->next_start_us) {
            if (run_scan(j, j->next_scan, j->next_start_us, end, 0, 0) != TW_OK)
                return TW_ERR;
            j->next_start_us = end;
            j->next_scan++;
        }
    }
    tw_job_snapshot_early_(j);
    return TW_OK;
}

int tw_job_finish(tw_job *j, int64_t latest_us)
{
    if (j->finished)
        return TW_OK;
    if (restored(j) != TW_OK)
        return TW_ERR;
    j->core_changes++;
    j->rules_changes++;
    /* gaps are reported once, when the finish begins */
    if (!j->finish_begun && seq_report_open_gaps(j) != TW_OK)
        return TW_ERR;
    if (j->finish_begun) {
        latest_us = j->finish_latest_us; /* a stopped finish goes on */
    } else if (latest_us != 0 && skew_bounded(j)) {
        int64_t ref = skew_reference_us(j);
        if (tw_job_latest_timestamp(j) > ref)
            ref = tw_job_latest_timestamp(j);
        int64_t limit = tw_time_add_sat(ref, j->cfg.clock_skew_us);
        if (ref != 0 && latest_us > limit) {
            j->stats.skewed_markers++;
            tw_log(TW_LOG_WARN,
                   "job %s: JOB_END latest time %.6f s is %.0f s ahead of the "
                   "job's newest time %.6f s, beyond the clock-skew bound of "
                   "%.0f s: refused and counted (skewed); the latest time "
                   "comes from the data",
                   j->id, (double)latest_us / 1e6,
                   (double)(latest_us - ref) / 1e6, (double)ref / 1e6,
                   (double)j->cfg.clock_skew_us / 1e6);
            latest_us = 0;
        }
    }
    j->finish_begun = 1;
    j->finish_latest_us = latest_us;
    int64_t L = latest_us != 0 ? latest_us : tw_job_latest_timestamp(j);
    if (j->first_fixed || j->first_candidate_us != 0) {
        freeze_first(j);
        if (j->cfg.tick_us > 0) {
            /* The reference evaluates scan k while start_k < L. */
            while (scan_start(j, j->next_scan) < L) {
                if (stop_requested(j))
                    return TW_JOB_STOPPED;
                int64_t start = scan_start(j, j->next_scan);
                int final = scan_start(j, j->next_scan + 1) >= L;
                if (run_scan(j, j->next_scan, start, start + j->cfg.tick_us, 1,
                             final) != TW_OK)
                    return TW_ERR;
                j->next_scan++;
            }
        } else {
            int64_t end = INT64_MIN;
            for (size_t i = 0; i < j->nproducers; i++)
                if (j->producers[i].newest_us > end)
                    end = j->producers[i].newest_us;
            if (end > j->next_start_us || j->next_scan == 0) {
                if (stop_requested(j))
                    return TW_JOB_STOPPED;
                if (run_scan(j, j->next_scan, j->next_start_us, end,
                             j->next_scan == 0, 1) != TW_OK)
                    return TW_ERR;
                j->next_scan++;
            }
        }
    }
    for (size_t r = 0; r < j->nrules; r++)
        tw_rule_finish(j->rules[r]);
    j->windows_changes++; /* the rules' state, for the deferred snapshot */
    /* a finished job's next save stores its whole state: no scan is
     * replayed after it, so nothing needs the batches */
    for (size_t i = 0; i < j->nchunks; i++) {
        tw_job_chunk_released_(j, &j->chunks[i], j->next_scan);
        tw_batch_free(j->chunks[i].batch);
    }
    j->nchunks = 0;
    j->finished = 1;
    return TW_OK;
}

/* ---- for job_state.c (job_internal.h) ------------------------------------ */

int tw_job_node_index_(tw_job *j, const char *node, uint32_t *out)
{
    return node_index(j, node, out);
}

int tw_job_series_id_(tw_job *j, uint32_t node, const char *node_name,
                      const tw_batch_series *bs, uint32_t *out)
{
    return series_id(j, node, node_name, bs, out);
}

int tw_job_producer_newest_(tw_job *j, producer *p, int64_t t)
{
    if (t <= p->newest_us)
        return TW_OK;
    p->newest_us = t;
    /* newest_us 0 marks sequence-only entries; times only grow past it */
    return tw_watermark_set(&j->wm, (size_t)(p - j->producers), t);
}

producer *tw_job_producer_get_(tw_job *j, const char *kind, const char *node)
{
    return producer_get(j, kind, node);
}
