/* alert.c - alert JSON, deterministic ids and the per-job tracker
 * (alert.h). */
#include "alert.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_codec.h"
#include "finding_cause.h"
#include "finding_text.h"
#include "job_results.h"
#include "json_writer.h"
#include "log.h"
#include "plugin_host.h"
#include "tw_assert.h"

#define TW_ALERT_SCHEMA_VERSION 3

/* What the tracker remembers of one rule between scans. */
typedef struct tw_alert_rule_state {
    tw_rule_status status;
    int64_t violations;
    /* 1 + the scan whose status alert said IssuesFound last; 0 = none
     * (or restored from a version 1 checkpoint): caused_by's alert_id */
    uint64_t issues_scan;
    /* 1 + the end (µs) of the scan of the last finding alert published;
     * 0 = none yet (or restored from a version 1-2 checkpoint) */
    int64_t finding_end;
} tw_alert_rule_state;

struct tw_alert_tracker {
    tw_alert_emit_fn emit;
    void *ud;
    tw_alert_rule_state *rules; /* by position in the flattened rule list */
    size_t nrules, cap;
    char **nodes; /* copies of the job's system node ids, first-seen order */
    size_t nnodes;
    tw_json *out, *scratch;
    uint64_t sent;
    size_t max_bytes; /* 0 = no limit */
    uint64_t truncated;
    int64_t finding_every_us; /* 0 = a finding alert per scan that finds */
    uint64_t held;            /* findings not published: finding_every */
};

const char *tw_alert_kind_name(tw_alert_kind k)
{
    return k == TW_ALERT_FINDING ? "finding" : "status";
}

/* FNV-1a, 128 bits: offset basis and prime from the FNV specification. */
typedef unsigned __int128 tw_u128;

static tw_u128 fnv128_bytes(tw_u128 h, const void *data, size_t len)
{
    const tw_u128 prime = ((tw_u128)1 << 88) + 0x13b;
    const unsigned char *p = data;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= prime;
    }
    return h;
}

void tw_alert_id(const char *job, const char *parent, const char *rule,
                 tw_alert_kind kind, uint64_t scan, const char *status,
                 char *out)
{
    tw_u128 h = ((tw_u128)0x6c62272e07bb0142ULL << 64) | 0x62b821756295c58dULL;
    char scan_text[32];
    snprintf(scan_text, sizeof(scan_text), "%" PRIu64, scan);
    const char *parts[] = {"tw-alert-2",
                           job,
                           parent != NULL ? parent : "",
                           rule,
                           tw_alert_kind_name(kind),
                           scan_text,
                           status};
    for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
        if (i > 0)
            h = fnv128_bytes(h, "", 1); /* the NUL separator */
        h = fnv128_bytes(h, parts[i], strlen(parts[i]));
    }
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        unsigned nib = (unsigned)(h >> (124 - 4 * i)) & 0xf;
        out[i] = hex[nib];
    }
    out[32] = '\0';
}

tw_alert_tracker *tw_alert_tracker_new(tw_alert_emit_fn emit, void *ud)
{
    tw_alert_tracker *t = calloc(1, sizeof(*t));
    if (t == NULL)
        return NULL;
    t->emit = emit;
    t->ud = ud;
    t->out = tw_json_new();
    t->scratch = tw_json_new();
    if (t->out == NULL || t->scratch == NULL) {
        tw_alert_tracker_free(t);
        return NULL;
    }
    tw_json_set_compact(t->out, 1);
    /* Alert consumers use strict JSON parsers: a report's NaN -> null. */
    tw_json_set_strict(t->out, 1);
    tw_json_set_strict(t->scratch, 1);
    return t;
}

void tw_alert_tracker_free(tw_alert_tracker *t)
{
    if (t == NULL)
        return;
    for (size_t i = 0; i < t->nnodes; i++)
        free(t->nodes[i]);
    free(t->nodes);
    free(t->rules);
    tw_json_free(t->out);
    tw_json_free(t->scratch);
    free(t);
}

uint64_t tw_alert_tracker_sent(const tw_alert_tracker *t)
{
    return t->sent;
}

void tw_alert_tracker_set_max_bytes(tw_alert_tracker *t, size_t max_bytes)
{
    t->max_bytes = max_bytes;
}

void tw_alert_tracker_set_finding_every(tw_alert_tracker *t, int64_t us)
{
    TW_ASSERT(us >= 0);
    t->finding_every_us = us;
}

uint64_t tw_alert_tracker_held(const tw_alert_tracker *t)
{
    return t->held;
}

uint64_t tw_alert_tracker_truncated(const tw_alert_tracker *t)
{
    return t->truncated;
}

static int tw_alert_copy_nodes(tw_alert_tracker *t, const tw_scan *scan)
{
    if (scan->nnodes <= t->nnodes)
        return TW_OK;
    char **n = realloc(t->nodes, scan->nnodes * sizeof(*n));
    if (n == NULL)
        return TW_ERR;
    t->nodes = n;
    for (size_t i = t->nnodes; i < scan->nnodes; i++) {
        t->nodes[i] = strdup(scan->nodes[i]);
        if (t->nodes[i] == NULL)
            return TW_ERR;
        t->nnodes = i + 1;
    }
    return TW_OK;
}

/* What one alert says besides the rule itself. */
typedef struct tw_alert_event {
    tw_alert_kind kind;
    tw_rule_status previous;
    uint64_t scan;
    int64_t start_us, end_us;
    int final;
    int wall; /* from a wall-clock call, not a scan (alert.h, "Its id") */
} tw_alert_event;

int tw_alert_facts_copy(tw_alert_facts *dst, const tw_alert_facts *src)
{
    *dst = *src;
    dst->rule = src->rule != NULL ? strdup(src->rule) : NULL;
    dst->parent = src->parent != NULL ? strdup(src->parent) : NULL;
    dst->cause_rule = src->cause_rule != NULL ? strdup(src->cause_rule) : NULL;
    dst->cause_parent =
        src->cause_parent != NULL ? strdup(src->cause_parent) : NULL;
    if ((src->rule != NULL && dst->rule == NULL) ||
        (src->parent != NULL && dst->parent == NULL) ||
        (src->cause_rule != NULL && dst->cause_rule == NULL) ||
        (src->cause_parent != NULL && dst->cause_parent == NULL)) {
        tw_alert_facts_release(dst);
        return TW_ERR;
    }
    return TW_OK;
}

void tw_alert_facts_release(tw_alert_facts *f)
{
    free(f->rule);
    free(f->parent);
    free(f->cause_rule);
    free(f->cause_parent);
    f->rule = f->parent = f->cause_rule = f->cause_parent = NULL;
}

/* What a size-bounded alert leaves out (tw_alert_build). */
typedef struct tw_alert_cut {
    size_t nodes;          /* nodes listed: the first `nodes` of t->nodes */
    size_t report_len;     /* the report left out (always); 0 = none */
    size_t params_omitted; /* parameters left out (all or none) */
    size_t full_len;       /* the alert's length with nothing left out */
} tw_alert_cut;

/* Writes the alert into t->out; cut NULL = all of it, with the report the
 * caller put in t->scratch (empty: none); with a cut, never the report. */
static void tw_alert_build(tw_alert_tracker *t, tw_job *job, tw_rule *rule,
                           const char *parent, const tw_alert_event *ev,
                           const char *id, const tw_alert_facts *facts,
                           const tw_alert_cut *cut)
{
    const char *status = tw_rule_status_name(tw_rule_get_status(rule));
    const tw_scan_result *res = tw_rule_last_result(rule);
    tw_json *j = t->out;
    tw_json_reset(j);
    tw_json_object_begin(j);
    tw_json_key(j, "id");
    tw_json_string(j, id);
    tw_json_key(j, "schema_version");
    tw_json_int(j, TW_ALERT_SCHEMA_VERSION);
    tw_json_key(j, "kind");
    tw_json_string(j, tw_alert_kind_name(ev->kind));
    tw_json_key(j, "job");
    tw_json_string(j, tw_job_id(job));
    tw_json_key(j, "rule");
    tw_json_string(j, tw_rule_name(rule));
    if (parent != NULL) {
        tw_json_key(j, "parent");
        tw_json_string(j, parent);
    }
    tw_json_key(j, "status");
    tw_json_string(j, status);
    if (tw_rule_get_status(rule) == TW_STATUS_ERROR &&
        tw_rule_error(rule)[0] != '\0') { /* why: a failure, a stopped plugin */
        tw_json_key(j, "error");
        tw_json_string(j, tw_rule_error(rule));
    }
    tw_json_key(j, "input");
    tw_json_string(j, tw_rule_received_input(rule) ? "received" : "none");
    tw_json_key(j, "previous_status");
    tw_json_string(j, tw_rule_status_name(ev->previous));
    tw_json_key(j, "final");
    tw_json_bool(j, ev->final);
    /* a job that lost input says so where its verdict is final */
    const tw_job_loss *loss = tw_job_loss_of(job);
    if (ev->final && tw_job_loss_any(loss)) {
        tw_json_key(j, "partial");
        tw_json_bool(j, 1);
        tw_json_key(j, "missing");
        tw_json_int(j, (int64_t)loss->missing);
    }
    tw_json_key(j, "scan");
    tw_json_int(j, (int64_t)ev->scan);
    tw_json_key(j, "window");
    tw_json_object_begin(j);
    tw_json_key(j, "start_us");
    tw_json_int(j, ev->start_us);
    tw_json_key(j, "end_us");
    tw_json_int(j, ev->end_us);
    tw_json_object_end(j);
    tw_json_key(j, "nodes");
    tw_json_array_begin(j);
    size_t nnodes = cut != NULL ? cut->nodes : t->nnodes;
    for (size_t i = 0; i < nnodes; i++)
        tw_json_string(j, t->nodes[i]);
    tw_json_array_end(j);
    tw_json_key(j, "semantics");
    tw_json_string(j, tw_rule_semantics(rule) == TW_SEMANTICS_REFERENCE
                          ? "reference"
                          : "fixed");
    /* what a person reads, while the rule says IssuesFound; a cut that
     * drops the parameters drops it too (the results file keeps both) */
    if (facts->has_finding && (cut == NULL || cut->params_omitted == 0)) {
        tw_json_key(j, "finding");
        tw_finding_json(j, &facts->finding);
    }
    if (facts->cause_rule != NULL) {
        tw_json_key(j, "caused_by");
        tw_json_object_begin(j);
        tw_json_key(j, "rule");
        tw_json_string(j, facts->cause_rule);
        if (facts->cause_parent != NULL) {
            tw_json_key(j, "parent");
            tw_json_string(j, facts->cause_parent);
        }
        if (facts->cause_alert_id[0] != '\0') {
            tw_json_key(j, "alert_id");
            tw_json_string(j, facts->cause_alert_id);
        }
        tw_json_object_end(j);
    }
    tw_json_key(j, "parameters");
    tw_json_object_begin(j);
    const tw_rule_descriptor *d = tw_rule_descriptor_of(rule);
    const tw_params *p = tw_rule_params(rule);
    for (size_t i = 0; (cut == NULL || cut->params_omitted == 0) && d != NULL &&
                       p != NULL && i < p->nvalues && i < d->nparams;
         i++) {
        tw_json_key(j, d->params[i].name);
        tw_json_string(j,
                       p->values[i].text != NULL ? p->values[i].text : "None");
    }
    tw_json_object_end(j);
    tw_json_key(j, "details");
    tw_json_object_begin(j);
    tw_json_key(j, "condition_met");
    tw_json_bool(j, res->condition_met);
    tw_json_key(j, "conditions_met");
    tw_json_int(j, (int64_t)tw_rule_conditions_met(rule));
    tw_json_key(j, "scans");
    tw_json_int(j, (int64_t)tw_rule_scans(rule));
    tw_job_results_counters(j, rule);
    if (cut == NULL && tw_json_len(t->scratch) > 0) {
        tw_json_key(j, "report");
        tw_json_raw(j, tw_json_str(t->scratch));
    }
    tw_json_object_end(j);
    if (cut != NULL) {
        tw_json_key(j, "truncated");
        tw_json_bool(j, 1);
        tw_json_key(j, "truncation");
        tw_json_object_begin(j);
        tw_json_key(j, "max_bytes");
        tw_json_int(j, (int64_t)t->max_bytes);
        tw_json_key(j, "full_bytes");
        tw_json_int(j, (int64_t)cut->full_len);
        tw_json_key(j, "nodes_total");
        tw_json_int(j, (int64_t)t->nnodes);
        tw_json_key(j, "nodes_listed");
        tw_json_int(j, (int64_t)cut->nodes);
        tw_json_key(j, "report_bytes_omitted");
        tw_json_int(j, (int64_t)cut->report_len);
        tw_json_key(j, "parameters_omitted");
        tw_json_int(j, (int64_t)cut->params_omitted);
        tw_json_object_end(j);
    }
    tw_json_object_end(j);
}

/* Room the truncation marker needs: its keys and six 20-digit numbers. */
#define TW_ALERT_CUT_RESERVE 256

/* The rule's parameters as the alert lists them. */
static size_t tw_alert_nparams(tw_rule *rule)
{
    const tw_rule_descriptor *d = tw_rule_descriptor_of(rule);
    const tw_params *p = tw_rule_params(rule);
    if (d == NULL || p == NULL)
        return 0;
    return p->nvalues < d->nparams ? p->nvalues : d->nparams;
}

/* The alert in t->out cut to t->max_bytes: first the report goes (the
 * results file keeps it), then the node list is shortened (the nodes
 * listed are the first ones seen), after the parameters (the
 * configuration has them) when even no node leaves room. TW_ERR when
 * that does not fit either. */
static int tw_alert_fit(tw_alert_tracker *t, tw_job *job, tw_rule *rule,
                        const char *parent, const tw_alert_event *ev,
                        const char *id, const tw_alert_facts *facts)
{
    tw_alert_cut cut = {.nodes = t->nnodes,
                        .report_len = tw_json_len(t->scratch),
                        .full_len = tw_json_len(t->out)};
    tw_alert_build(t, job, rule, parent, ev, id, facts, &cut);
    if (tw_json_failed(t->out))
        return TW_ERR;
    if (tw_json_len(t->out) > t->max_bytes) {
        /* Without nodes, then as many as fit; each costs its escaped
         * length plus a comma (measured with the scratch writer). */
        cut.nodes = 0;
        tw_alert_build(t, job, rule, parent, ev, id, facts, &cut);
        size_t used = tw_json_len(t->out) + TW_ALERT_CUT_RESERVE;
        if (!tw_json_failed(t->out) && used > t->max_bytes) {
            cut.params_omitted = tw_alert_nparams(rule);
            tw_alert_build(t, job, rule, parent, ev, id, facts, &cut);
            used = tw_json_len(t->out) + TW_ALERT_CUT_RESERVE;
        }
        if (tw_json_failed(t->out) || used > t->max_bytes)
            return TW_ERR;
        size_t room = t->max_bytes - used;
        for (; cut.nodes < t->nnodes; cut.nodes++) {
            tw_json_reset(t->scratch);
            tw_json_string(t->scratch, t->nodes[cut.nodes]);
            size_t cost = tw_json_len(t->scratch) + 1;
            if (cost > room)
                break;
            room -= cost;
        }
        tw_alert_build(t, job, rule, parent, ev, id, facts, &cut);
    }
    if (tw_json_failed(t->out) || tw_json_len(t->out) > t->max_bytes)
        return TW_ERR;
    t->truncated++;
    return TW_OK;
}

/* The position of `rule` in results order (parents before sub-rules),
 * as the tracker's per-rule state is kept; SIZE_MAX when not the job's. */
static size_t tw_alert_index_of(tw_job *job, const tw_rule *rule)
{
    size_t index = 0;
    for (size_t i = 0; i < tw_job_nrules(job); i++) {
        tw_rule *top = tw_job_rule(job, i);
        if (top == rule)
            return index;
        index++;
        for (size_t k = 0; k < tw_rule_nchildren(top); k++, index++)
            if (tw_rule_child(top, k) == rule)
                return index;
    }
    return SIZE_MAX;
}

/* The id of the cause's status alert that said IssuesFound (the one a
 * consumer acted on); "" when the tracker does not know its scan. */
static void tw_alert_cause_id(const tw_alert_tracker *t, tw_job *job,
                              const tw_rule_cause *cause,
                              char out[TW_ALERT_ID_LEN + 1])
{
    out[0] = '\0';
    size_t i = tw_alert_index_of(job, cause->rule);
    if (i >= t->nrules || t->rules[i].issues_scan == 0)
        return;
    tw_alert_id(tw_job_id(job), cause->parent, tw_rule_name(cause->rule),
                TW_ALERT_STATUS, t->rules[i].issues_scan - 1,
                tw_rule_status_name(TW_STATUS_ISSUES_FOUND), out);
}

static int tw_alert_publish(tw_alert_tracker *t, tw_job *job, tw_rule *rule,
                            const char *parent, const tw_alert_event *ev)
{
    const char *status = tw_rule_status_name(tw_rule_get_status(rule));
    char id[TW_ALERT_ID_LEN + 1];
    char wall_status[64];
    if (ev->wall) { /* several may come while one scan stays open */
        snprintf(wall_status, sizeof(wall_status), "%s/wall/%lld", status,
                 (long long)tw_rule_last_result(rule)->violations);
        status = wall_status;
    }
    tw_alert_id(tw_job_id(job), parent, tw_rule_name(rule), ev->kind, ev->scan,
                status, id);
    /* The rule's own report; a composite's would repeat its sub-rules'. */
    tw_json_reset(t->scratch);
    if (tw_rule_nchildren(rule) != 0 ||
        tw_rule_report(rule, t->scratch) != TW_OK || tw_json_failed(t->scratch))
        tw_json_reset(t->scratch);
    /* what a person reads, while the rule says IssuesFound (a composite's
     * findings are its sub-rules') */
    const tw_scan_result *res = tw_rule_last_result(rule);
    tw_alert_facts facts = {.kind = ev->kind,
                            .rule = (char *)tw_rule_name(rule),
                            .parent = (char *)parent,
                            .status = tw_rule_get_status(rule),
                            .scan = ev->scan,
                            .end_us = ev->end_us,
                            .job_start_us = tw_job_first_timestamp(job),
                            .violations = res->violations,
                            .datapoints = res->datapoints};
    facts.has_finding = tw_rule_nchildren(rule) == 0 &&
                        tw_rule_finding(rule, &facts.finding) == TW_OK;
    tw_rule_cause cause;
    if (tw_job_rule_cause(job, rule, &cause)) {
        facts.cause_rule = (char *)tw_rule_name(cause.rule);
        facts.cause_parent = (char *)cause.parent;
        tw_alert_cause_id(t, job, &cause, facts.cause_alert_id);
    }
    tw_alert_build(t, job, rule, parent, ev, id, &facts, NULL);
    if (tw_json_failed(t->out))
        return TW_ERR;
    if (t->max_bytes > 0 && tw_json_len(t->out) > t->max_bytes &&
        tw_alert_fit(t, job, rule, parent, ev, id, &facts) != TW_OK) {
        tw_log(TW_LOG_ERROR,
               "alert %s of job %.200s rule %s: cannot fit %zu bytes even "
               "without its report, nodes and parameters",
               id, tw_job_id(job), tw_rule_name(rule), t->max_bytes);
        return TW_ERR;
    }
    tw_json *j = t->out;
    if (t->emit(t->ud, tw_job_id(job), id, tw_json_str(j), tw_json_len(j),
                &facts) != TW_OK)
        return TW_ERR;
    t->sent++;
    return TW_OK;
}

/* Calls fn for every rule in results order (parents before sub-rules). */
typedef int (*tw_alert_visit_fn)(tw_alert_tracker *t, tw_job *job,
                                 tw_rule *rule, const char *parent,
                                 size_t index, const void *arg);

static int tw_alert_walk(tw_alert_tracker *t, tw_job *job, tw_rule *rule,
                         const char *parent, size_t *index,
                         tw_alert_visit_fn fn, const void *arg)
{
    if (*index >= t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 16;
        while (cap <= *index)
            cap *= 2;
        tw_alert_rule_state *n = realloc(t->rules, cap * sizeof(*n));
        if (n == NULL)
            return TW_ERR;
        t->rules = n;
        t->cap = cap;
    }
    if (*index >= t->nrules) {
        /* first sight of this rule: everything starts InProgress */
        t->rules[*index] = (tw_alert_rule_state){
            .status = TW_STATUS_IN_PROGRESS, .violations = 0};
        t->nrules = *index + 1;
    }
    int rc = fn(t, job, rule, parent, *index, arg);
    (*index)++;
    for (size_t i = 0; rc == TW_OK && i < tw_rule_nchildren(rule); i++)
        rc = tw_alert_walk(t, job, tw_rule_child(rule, i), tw_rule_name(rule),
                           index, fn, arg);
    return rc;
}

static int tw_alert_visit_all(tw_alert_tracker *t, tw_job *job,
                              tw_alert_visit_fn fn, const void *arg)
{
    size_t index = 0;
    for (size_t i = 0; i < tw_job_nrules(job); i++)
        if (tw_alert_walk(t, job, tw_job_rule(job, i), NULL, &index, fn, arg) !=
            TW_OK)
            return TW_ERR;
    return TW_OK;
}

static int tw_alert_on_scan(tw_alert_tracker *t, tw_job *job, tw_rule *rule,
                            const char *parent, size_t index, const void *arg)
{
    const tw_scan *scan = arg;
    tw_alert_rule_state *st = &t->rules[index];
    tw_rule_status now = tw_rule_get_status(rule);
    const tw_scan_result *res = tw_rule_last_result(rule);
    tw_alert_event ev = {.previous = st->status,
                         .scan = scan->index,
                         .start_us = scan->start_us,
                         .end_us = scan->end_us,
                         .final = 0};
    if (now != st->status) {
        ev.kind = TW_ALERT_STATUS;
        if (tw_alert_publish(t, job, rule, parent, &ev) != TW_OK)
            return TW_ERR;
    }
    if (res->condition_met && res->violations > st->violations) {
        /* A rule that finds at every scan (continuous ticks: a scan per
         * message) would publish a finding per message; its first finding
         * always goes, then at most one per finding_every of event time,
         * carrying the violations so far. Event time keeps it
         * deterministic across a restore. */
        if (t->finding_every_us > 0 && st->finding_end != 0 &&
            scan->end_us - (st->finding_end - 1) < t->finding_every_us) {
            t->held++;
        } else {
            ev.kind = TW_ALERT_FINDING;
            ev.previous = now;
            if (tw_alert_publish(t, job, rule, parent, &ev) != TW_OK)
                return TW_ERR;
            st->finding_end = scan->end_us + 1;
        }
    }
    st->status = now;
    st->violations = res->violations;
    return TW_OK;
}

/* Before any alert of the scan: the scan of each rule that turns
 * IssuesFound now, so that a consequence published before its cause (in
 * results order) already names the cause's alert. */
static int tw_alert_on_issues(tw_alert_tracker *t, tw_job *job, tw_rule *rule,
                              const char *parent, size_t index, const void *arg)
{
    (void)job, (void)parent;
    const tw_scan *scan = arg;
    tw_alert_rule_state *st = &t->rules[index];
    if (tw_rule_get_status(rule) == TW_STATUS_ISSUES_FOUND &&
        st->status != TW_STATUS_ISSUES_FOUND)
        st->issues_scan = scan->index + 1;
    return TW_OK;
}

int tw_alert_tracker_scan(tw_alert_tracker *t, tw_job *job, const tw_scan *scan)
{
    if (tw_alert_copy_nodes(t, scan) != TW_OK)
        return TW_ERR;
    if (tw_alert_visit_all(t, job, tw_alert_on_issues, scan) != TW_OK)
        return TW_ERR;
    return tw_alert_visit_all(t, job, tw_alert_on_scan, scan);
}

/* A wall-clock call (tw_job_wallclock): status changes and new findings
 * of the configured rules that judge on the wall clock. */
static int tw_alert_on_wallclock(tw_alert_tracker *t, tw_job *job,
                                 tw_rule *rule, const char *parent,
                                 size_t index, const void *arg)
{
    if (parent != NULL || !tw_rule_has_wallclock(rule))
        return TW_OK;
    const tw_alert_event *proto = arg;
    tw_alert_rule_state *st = &t->rules[index];
    tw_rule_status now = tw_rule_get_status(rule);
    const tw_scan_result *res = tw_rule_last_result(rule);
    tw_alert_event ev = *proto;
    ev.previous = st->status;
    if (now != st->status) {
        ev.kind = TW_ALERT_STATUS;
        if (tw_alert_publish(t, job, rule, parent, &ev) != TW_OK)
            return TW_ERR;
    }
    if (res->condition_met && res->violations > st->violations) {
        ev.kind = TW_ALERT_FINDING;
        ev.previous = now;
        if (tw_alert_publish(t, job, rule, parent, &ev) != TW_OK)
            return TW_ERR;
    }
    st->status = now;
    st->violations = res->violations;
    return TW_OK;
}

int tw_alert_tracker_wallclock(tw_alert_tracker *t, tw_job *job, int64_t now_us)
{
    tw_job_stats s;
    tw_job_get_stats(job, &s);
    tw_alert_event ev = {.scan = s.scans, /* the scan still open */
                         .start_us = now_us,
                         .end_us = now_us,
                         .wall = 1};
    return tw_alert_visit_all(t, job, tw_alert_on_wallclock, &ev);
}

static int tw_alert_on_finish(tw_alert_tracker *t, tw_job *job, tw_rule *rule,
                              const char *parent, size_t index, const void *arg)
{
    const tw_alert_event *proto = arg;
    tw_alert_rule_state *st = &t->rules[index];
    tw_alert_event ev = *proto;
    ev.previous = st->status;
    st->status = tw_rule_get_status(rule);
    return tw_alert_publish(t, job, rule, parent, &ev);
}

int tw_alert_tracker_finish(tw_alert_tracker *t, tw_job *job)
{
    tw_job_stats js;
    tw_job_get_stats(job, &js);
    tw_alert_event ev = {.kind = TW_ALERT_STATUS,
                         .scan = js.scans,
                         .start_us = tw_job_first_timestamp(job),
                         .end_us = tw_job_latest_timestamp(job),
                         .final = 1};
    return tw_alert_visit_all(t, job, tw_alert_on_finish, &ev);
}

/* ---- checkpoints ----------------------------------------------------------
 * Blob: "TWAT", u8 version (3), uv nrules, per rule {uv status, iv
 * violations, uv issues_scan (version 2 on; 0 when restored from 1), iv
 * finding_end (version 3 on; 0 when restored from 1-2)}, uv nnodes, per
 * node str, uv sent. */

#define TW_ALERT_BLOB_VERSION 3

int tw_alert_tracker_save(const tw_alert_tracker *t, tw_buf *out)
{
    tw_ckw w = {.b = out, .failed = 0};
    tw_ckw_bytes(&w, "TWAT", 4);
    tw_ckw_u8(&w, TW_ALERT_BLOB_VERSION);
    tw_ckw_uv(&w, t->nrules);
    for (size_t i = 0; i < t->nrules; i++) {
        tw_ckw_uv(&w, (uint64_t)t->rules[i].status);
        tw_ckw_iv(&w, t->rules[i].violations);
        tw_ckw_uv(&w, t->rules[i].issues_scan);
        tw_ckw_iv(&w, t->rules[i].finding_end);
    }
    tw_ckw_uv(&w, t->nnodes);
    for (size_t i = 0; i < t->nnodes; i++)
        tw_ckw_str(&w, t->nodes[i]);
    tw_ckw_uv(&w, t->sent);
    return w.failed ? TW_ERR : TW_OK;
}

int tw_alert_tracker_restore(tw_alert_tracker *t, const void *data, size_t len,
                             char *err, size_t errlen)
{
    tw_ckr r;
    tw_ckr_init(&r, data, len);
    const uint8_t *magic = tw_ckr_bytes(&r, 4);
    if (magic != NULL && memcmp(magic, "TWAT", 4) != 0)
        tw_ckr_fail(&r, "not an alert tracker blob (magic)");
    uint8_t version = tw_ckr_u8(&r);
    if ((version < 1 || version > TW_ALERT_BLOB_VERSION) && r.why == NULL)
        tw_ckr_fail(&r, "unsupported version");
    size_t nrules = tw_ckr_count(&r, 2);
    tw_alert_rule_state *rules = NULL;
    if (r.why == NULL && nrules > 0) {
        rules = calloc(nrules, sizeof(*rules));
        if (rules == NULL) {
            snprintf(err, errlen, "alerts: out of memory");
            return TW_ERR;
        }
    }
    for (size_t i = 0; r.why == NULL && i < nrules; i++) {
        uint64_t st = tw_ckr_uv(&r);
        if (st > TW_STATUS_NO_DATA && r.why == NULL)
            tw_ckr_fail(&r, "bad rule status");
        rules[i].status = (tw_rule_status)st;
        rules[i].violations = tw_ckr_iv(&r);
        if (version >= 2)
            rules[i].issues_scan = tw_ckr_uv(&r);
        if (version >= 3)
            rules[i].finding_end = tw_ckr_iv(&r);
    }
    size_t nnodes = tw_ckr_count(&r, 1);
    char **nodes = NULL;
    if (r.why == NULL && nnodes > 0 &&
        (nodes = calloc(nnodes, sizeof(*nodes))) == NULL) {
        free(rules);
        snprintf(err, errlen, "alerts: out of memory");
        return TW_ERR;
    }
    int oom = 0;
    for (size_t i = 0; r.why == NULL && !oom && i < nnodes; i++) {
        const char *s;
        size_t n;
        if (tw_ckr_str(&r, &s, &n) && s == NULL)
            tw_ckr_fail(&r, "NULL node id");
        if (r.why == NULL && (nodes[i] = strndup(s, n)) == NULL)
            oom = 1;
    }
    uint64_t sent = tw_ckr_uv(&r);
    if (r.why == NULL && !oom && tw_ckr_left(&r) != 0)
        tw_ckr_fail(&r, "trailing bytes");
    if (r.why != NULL || oom) {
        if (oom)
            snprintf(err, errlen, "alerts: out of memory");
        else
            snprintf(err, errlen, "alerts: %s at byte %zu", r.why,
                     tw_ckr_offset(&r));
        for (size_t i = 0; nodes != NULL && i < nnodes; i++)
            free(nodes[i]);
        free(nodes);
        free(rules);
        return TW_ERR;
    }
    for (size_t i = 0; i < t->nnodes; i++)
        free(t->nodes[i]);
    free(t->nodes);
    free(t->rules);
    t->rules = rules;
    t->nrules = t->cap = nrules;
    t->nodes = nodes;
    t->nnodes = nnodes;
    t->sent = sent;
    return TW_OK;
}
