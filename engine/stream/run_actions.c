/* run_actions.c - alerts -> actions for `trainwatch run` (run_actions.h). */
#include "run_actions.h"

#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "actions.h"
#include "checkpoint.h"
#include "finding_text.h"
#include "grow.h"
#include "log.h"
#include "plugin_host.h"
#include "results_file.h"
#include "run_capture.h"
#include "state_store.h"
#include "tw_assert.h"

/* A rule name seen in alerts and the configured rule it belongs to. */
typedef struct tw_ra_name {
    char *name;
    size_t rule;           /* index into cfg->rules */
    const char *semantics; /* "fixed" or "reference" (top rules) */
} tw_ra_name;

/* An alert posted to Alertmanager, kept until its job ends to be posted
 * again as resolved (consuming thread). */
typedef struct tw_ra_firing {
    char *job;
    size_t rule;    /* index into cfg->rules */
    json_t *alert;  /* the last alert object posted for these labels */
    int64_t end_us; /* the latest event time of the job seen in an alert */
    int ended;      /* its job ended: resolve it */
} tw_ra_firing;

struct tw_run_actions {
    tw_actions *actions;
    tw_store *store; /* redis ledger, worker thread only; NULL: in-memory */
    int store_down;  /* worker thread only */
    tw_ra_name *top; /* configured rules' display names, by index */
    size_t ntop;
    tw_ra_name *sub; /* their sub-rules (any depth) */
    size_t nsub, capsub;
    char *results_dir;
    int *act_on_consequences; /* by configured rule index (ntop) */
    uint64_t bad_alerts;  /* alerts that could not be read (consuming thread) */
    tw_ra_firing *firing; /* consuming thread */
    size_t nfiring, capfiring;
    char **ended; /* jobs ended since the last tw_run_actions_resolve_ended */
    size_t nended, capended;
    /* capture actions' channel; set before the first alert, then read by
     * the action worker (the inbox mutex orders the two) */
    tw_run_capture *capture;
};

/* tw_action_capture_fn (action worker thread) */
static int tw_ra_capture(void *ud, const tw_capture_request *r, char *msg,
                         size_t msglen)
{
    tw_run_actions *ra = ud;
    if (ra->capture == NULL) {
        snprintf(msg, msglen, "no control channel (not started)");
        return 0;
    }
    return tw_run_capture_submit(ra->capture, r, msg, msglen);
}

/* ---- the ledger (worker thread) --------------------------------------- */

static int tw_ra_claim(void *ud, const char *id)
{
    tw_run_actions *ra = ud;
    char err[512];
    if (ra->store_down) {
        if (tw_store_ping(ra->store, err, sizeof(err)) != TW_OK)
            return TW_ERR; /* the module retries the claim later */
        ra->store_down = 0;
    }
    char label[1200];
    snprintf(label, sizeof(label), "action %s", id);
    int rc = tw_checkpoint_claim(ra->store, id, label, err, sizeof(err));
    if (rc == 0 || rc == 1)
        return rc;
    if (rc == TW_UNAVAILABLE)
        ra->store_down = 1; /* the store logs the change itself */
    else
        tw_log(TW_LOG_ERROR, "action ledger: %s", err);
    return TW_ERR;
}

/* A send's final outcome: its claim is no longer possibly lost. One round
 * trip on the worker's own connection (never the consuming thread's). */
static void tw_ra_confirm(void *ud, const char *id)
{
    tw_run_actions *ra = ud;
    char err[512];
    const char *ids[1] = {id};
    if (tw_checkpoint_confirm(ra->store, ids, 1, err, sizeof(err)) != TW_OK)
        tw_log(TW_LOG_WARN,
               "action %s: its delivery could not be confirmed in the "
               "ledger (%s); it will be reported as unconfirmed",
               id, err);
}

/* ---- construction -------------------------------------------------------- */

static int tw_ra_add_sub(tw_run_actions *ra, tw_rule *rule, size_t top)
{
    for (size_t i = 0; i < tw_rule_nchildren(rule); i++) {
        tw_rule *c = tw_rule_child(rule, i);
        if (tw_grow((void **)&ra->sub, &ra->capsub, ra->nsub + 1,
                    sizeof(*ra->sub), 32) != TW_OK)
            return TW_ERR;
        ra->sub[ra->nsub].name = strdup(tw_rule_name(c));
        if (ra->sub[ra->nsub].name == NULL)
            return TW_ERR;
        ra->sub[ra->nsub++].rule = top;
        if (tw_ra_add_sub(ra, c, top) != TW_OK)
            return TW_ERR;
    }
    return TW_OK;
}

/* A redis `state:` gets its own connection for the ledger; anything else
 * (memory, absent) leaves the module's in-memory ledger. */
static int tw_ra_open_ledger(tw_run_actions *ra, const tw_config *cfg,
                             char *err, size_t errlen)
{
    const char *kind = NULL;
    tw_settings_get_str(&cfg->state, "store", &kind);
    if (kind == NULL || strcmp(kind, "redis") != 0)
        return TW_OK;
    if (tw_store_open(&cfg->state, &ra->store, err, errlen) != TW_OK)
        return TW_ERR;
    char perr[256];
    if (tw_store_ping(ra->store, perr, sizeof(perr)) != TW_OK) {
        ra->store_down = 1;
        tw_log(TW_LOG_WARN,
               "actions: the ledger store is not reachable yet; actions "
               "wait until it is");
    }
    return TW_OK;
}

int tw_run_actions_new(const tw_config *cfg, tw_job *probe,
                       const char *results_dir, tw_run_actions **out, char *err,
                       size_t errlen)
{
    *out = NULL;
    size_t total = 0;
    for (size_t i = 0; cfg->actions != NULL && i < cfg->nrules; i++)
        total += cfg->actions[i].n;
    if (total == 0)
        return TW_OK;
    tw_run_actions *ra = calloc(1, sizeof(*ra));
    if (ra == NULL)
        goto oom;
    size_t n = tw_job_nrules(probe);
    ra->top = calloc(n ? n : 1, sizeof(*ra->top));
    ra->act_on_consequences =
        calloc(n ? n : 1, sizeof(*ra->act_on_consequences));
    if (ra->top == NULL || ra->act_on_consequences == NULL)
        goto oom;
    for (size_t i = 0; i < n; i++) {
        tw_rule *rule = tw_job_rule(probe, i);
        ra->top[i].name = strdup(tw_rule_name(rule));
        ra->top[i].rule = i;
        ra->act_on_consequences[i] =
            i < cfg->nrules && cfg->rules[i].act_on_consequences;
        ra->top[i].semantics = tw_rule_semantics(rule) == TW_SEMANTICS_FIXED
                                   ? "fixed"
                                   : "reference";
        ra->ntop = i + 1;
        if (ra->top[i].name == NULL || tw_ra_add_sub(ra, rule, i) != TW_OK)
            goto oom;
    }
    if (results_dir != NULL && (ra->results_dir = strdup(results_dir)) == NULL)
        goto oom;
    if (tw_ra_open_ledger(ra, cfg, err, errlen) != TW_OK)
        goto fail;
    tw_actions_options opt = {.claim = ra->store ? tw_ra_claim : NULL,
                              .confirm = ra->store ? tw_ra_confirm : NULL,
                              .claim_ud = ra,
                              .capture = tw_ra_capture,
                              .capture_ud = ra};
    if (tw_actions_new(cfg, &opt, &ra->actions, err, errlen) != TW_OK)
        goto fail;
    tw_log(TW_LOG_INFO, "actions: %zu configured; ledger: %s", total,
           ra->store ? "redis (once across restarts)"
                     : "in memory (once per process)");
    *out = ra;
    return TW_OK;
oom:
    snprintf(err, errlen, "actions: out of memory");
fail:
    tw_run_actions_free(ra);
    return TW_ERR;
}

int tw_run_actions_start_capture(tw_run_actions *ra, const char *brokers,
                                 const char *const *props, size_t nprops,
                                 const char *alerts_topic, char *err,
                                 size_t errlen)
{
    const char *topics[16];
    size_t n = ra ? tw_actions_capture_topics(ra->actions, topics, 16) : 0;
    if (n == 0)
        return TW_OK;
    if (n > 16) {
        snprintf(err, errlen,
                 "capture: %zu different control topics (at most 16)", n);
        return TW_ERR;
    }
    /* a group of its own: every engine process sees every answer */
    char group[128];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(group, sizeof(group), "trainwatch-capture-%ld-%lld",
             (long)getpid(), (long long)ts.tv_nsec);
    tw_run_capture_config cc = {.brokers = brokers,
                                .props = props,
                                .nprops = nprops,
                                .alerts_topic = alerts_topic,
                                .topics = topics,
                                .ntopics = n,
                                .group = group};
    if (tw_run_capture_new(&cc, &ra->capture, err, errlen) != TW_OK)
        return TW_ERR;
    tw_log(TW_LOG_INFO,
           "actions: capture requests on '%s'%s, answers read "
           "by group %s",
           topics[0], n > 1 ? " (and more)" : "", group);
    return TW_OK;
}

/* ---- alerts -> events (consuming thread) ------------------------------- */

static int tw_ra_lookup(const tw_ra_name *v, size_t n, const char *name,
                        size_t *rule)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(v[i].name, name) == 0) {
            *rule = v[i].rule;
            return 1;
        }
    return 0;
}

/* The configured rule an alert belongs to: its parent's (a composite's
 * sub-rule) or its own. */
static int tw_ra_rule_of(const tw_run_actions *ra, const char *rule,
                         const char *parent, size_t *out)
{
    const char *name = parent ? parent : rule;
    return tw_ra_lookup(ra->top, ra->ntop, name, out) ||
           tw_ra_lookup(ra->sub, ra->nsub, name, out);
}

/* The worst (first listed) node of a finding, or "" */
static const char *tw_ra_worst(const tw_alert_facts *a)
{
    return a->has_finding && a->finding.nnames > 0 ? a->finding.names[0] : "";
}

/* The e-mail's paragraphs: the finding wrapped for a plain-text reader,
 * lines ended by CRLF (RFC 5322). NULL when out of memory. */
static char *tw_ra_mail_text(const tw_alert_facts *a)
{
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    if (m == NULL)
        return NULL;
    tw_finding_print(m, &a->finding, a->job_start_us, 72);
    if (fclose(m) != 0) {
        free(text);
        return NULL;
    }
    size_t lf = 0;
    for (size_t i = 0; i < len; i++)
        lf += text[i] == '\n';
    char *crlf = malloc(len + lf + 1);
    if (crlf != NULL) {
        size_t o = 0;
        for (size_t i = 0; i < len; i++) {
            if (text[i] == '\n')
                crlf[o++] = '\r';
            crlf[o++] = text[i];
        }
        crlf[o] = '\0';
    }
    free(text);
    return crlf;
}

/* ---- Alertmanager ------------------------------------------------------- */

/* RFC 3339 UTC with milliseconds, as Alertmanager's API takes it. */
static void tw_ra_rfc3339(int64_t us, char out[32])
{
    time_t s = (time_t)(us / 1000000);
    struct tm tm;
    gmtime_r(&s, &tm);
    size_t n = strftime(out, 32, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + n, 32 - n, ".%03dZ", (int)((us % 1000000) / 1000));
}

/* The alert object for Alertmanager (actions.h: am_alert): labels
 * alertname (the rule), job_id, node (the worst, when named), semantics,
 * parent (a sub-rule's composite); annotations summary, description,
 * recommendation, report; startsAt the first violation's event time. The
 * action adds severity and report_url. NULL when out of memory. */
static json_t *tw_ra_am_alert(const tw_run_actions *ra, size_t index,
                              const char *job, const tw_alert_facts *a,
                              const char *line, const char *report)
{
    json_t *labels =
        json_pack("{s:s, s:s, s:s}", "alertname", a->rule, "job_id", job,
                  "semantics", ra->top[index].semantics);
    json_t *ann = json_pack("{s:s}", "description", line);
    if (labels == NULL || ann == NULL) {
        json_decref(labels);
        json_decref(ann);
        return NULL;
    }
    const char *worst = tw_ra_worst(a);
    if (worst[0])
        json_object_set_new(labels, "node", json_string(worst));
    if (a->parent != NULL)
        json_object_set_new(labels, "parent", json_string(a->parent));
    if (a->has_finding) {
        json_object_set_new(ann, "summary", json_string(a->finding.summary));
        json_object_set_new(ann, "recommendation",
                            json_string(a->finding.recommendation));
    } else {
        json_object_set_new(ann, "summary", json_string(line));
    }
    if (report != NULL)
        json_object_set_new(ann, "report", json_string(report));
    int64_t start = a->has_finding && a->finding.first_us > 0
                        ? a->finding.first_us
                        : a->end_us;
    char ts[32];
    tw_ra_rfc3339(start, ts);
    return json_pack("{s:o, s:o, s:s}", "labels", labels, "annotations", ann,
                     "startsAt", ts);
}

static int tw_ra_job_ended(const tw_run_actions *ra, const char *job)
{
    for (size_t i = 0; i < ra->nended; i++)
        if (strcmp(ra->ended[i], job) == 0)
            return 1;
    return 0;
}

/* Remembers the alert posted for its labels until its job ends. */
static void tw_ra_remember(tw_run_actions *ra, const char *job, size_t index,
                           json_t *alert, int64_t end_us, int ended)
{
    json_t *labels = json_object_get(alert, "labels");
    for (size_t i = 0; i < ra->nfiring; i++) {
        tw_ra_firing *f = &ra->firing[i];
        if (strcmp(f->job, job) == 0 &&
            json_equal(json_object_get(f->alert, "labels"), labels)) {
            json_decref(f->alert);
            f->alert = json_incref(alert);
            if (end_us > f->end_us)
                f->end_us = end_us;
            f->ended |= ended;
            return;
        }
    }
    char *id = strdup(job);
    if (id == NULL ||
        tw_grow((void **)&ra->firing, &ra->capfiring, ra->nfiring + 1,
                sizeof(*ra->firing), 16) != TW_OK) {
        free(id);
        tw_log(TW_LOG_WARN,
               "actions: job %s: out of memory; its Alertmanager "
               "alert will not be resolved at its end",
               job);
        return;
    }
    ra->firing[ra->nfiring++] = (tw_ra_firing){.job = id,
                                               .rule = index,
                                               .alert = json_incref(alert),
                                               .end_us = end_us,
                                               .ended = ended};
}

/* The Alertmanager part of an event: the alert (owned by the caller, NULL
 * when the rule has no alertmanager action or out of memory). A job's
 * final alerts come after its end: they are not posted firing (a post
 * racing its own resolution could reopen it) but go out with the
 * resolution. */
static char *tw_ra_am_event(tw_run_actions *ra, size_t index, const char *job,
                            const tw_alert_facts *a, const char *line,
                            const char *report)
{
    if (!tw_actions_has_type(ra->actions, index, TW_ACTION_ALERTMANAGER))
        return NULL;
    json_t *alert = tw_ra_am_alert(ra, index, job, a, line, report);
    int ended = tw_ra_job_ended(ra, job);
    char *text = alert && !ended ? json_dumps(alert, JSON_COMPACT) : NULL;
    if (alert != NULL)
        tw_ra_remember(ra, job, index, alert, a->end_us, ended);
    json_decref(alert);
    return text;
}

void tw_run_actions_job_finished(tw_run_actions *ra, const char *job)
{
    if (ra == NULL)
        return;
    for (size_t i = 0; i < ra->nfiring; i++)
        if (strcmp(ra->firing[i].job, job) == 0)
            ra->firing[i].ended = 1;
    char *id = strdup(job);
    if (id == NULL || tw_grow((void **)&ra->ended, &ra->capended,
                              ra->nended + 1, sizeof(*ra->ended), 8) != TW_OK) {
        free(id);
        return; /* its final alerts are then posted firing, not held */
    }
    ra->ended[ra->nended++] = id;
}

void tw_run_actions_resolve_ended(tw_run_actions *ra)
{
    if (ra == NULL)
        return;
    for (size_t i = 0; i < ra->nfiring;) {
        tw_ra_firing *f = &ra->firing[i];
        if (!f->ended) {
            i++;
            continue;
        }
        int64_t end = f->end_us;
        char ts[32], key[600];
        tw_ra_rfc3339(end, ts);
        json_t *labels = json_object_get(f->alert, "labels");
        const char *node = json_string_value(json_object_get(labels, "node"));
        const char *name =
            json_string_value(json_object_get(labels, "alertname"));
        snprintf(key, sizeof(key), "resolved/%s/%s", name ? name : "",
                 node ? node : "");
        json_object_set_new(f->alert, "endsAt", json_string(ts));
        char *text = json_dumps(f->alert, JSON_COMPACT);
        tw_action_event ev = {.job_id = f->job,
                              .rule_index = f->rule,
                              .alert_id = key,
                              .am_alert = text,
                              .am_only = 1,
                              .time_us = end};
        if (text == NULL || tw_actions_fire(ra->actions, &ev) != TW_OK)
            tw_log(TW_LOG_WARN,
                   "actions: job %s: Alertmanager resolution not queued",
                   f->job);
        free(text);
        free(f->job);
        json_decref(f->alert);
        ra->firing[i] = ra->firing[--ra->nfiring];
    }
    for (size_t i = 0; i < ra->nended; i++)
        free(ra->ended[i]);
    ra->nended = 0;
}

void tw_run_actions_alert(tw_run_actions *ra, const char *job, const char *id,
                          const char *json, size_t len, const tw_alert_facts *a)
{
    /* Findings, and status changes to IssuesFound (a rule can reach it
     * without a finding, e.g. at its final scan), fire the rule's
     * actions; the module's once semantics drop the repeats. Other status
     * alerts (most of them) fire nothing. */
    if (ra == NULL || a == NULL ||
        (a->kind != TW_ALERT_FINDING && a->status != TW_STATUS_ISSUES_FOUND))
        return;
    size_t index;
    if (!tw_ra_rule_of(ra, a->rule, a->parent, &index)) {
        if (ra->bad_alerts++ < 5)
            tw_log(TW_LOG_ERROR, "actions: alert %s: no configured rule '%s'",
                   id, a->parent ? a->parent : a->rule);
        return;
    }
    if (tw_actions_count(ra->actions, index) == 0)
        return;
    /* root cause first: a finding another explains fires nothing unless
     * its configured rule says act_on_consequences */
    if (a->cause_rule != NULL && !ra->act_on_consequences[index])
        return;
    char rule[300], line[1700], sms[1400], subject[1000], report[PATH_MAX];
    char fname[TW_RESULTS_NAME_LEN];
    snprintf(rule, sizeof(rule), "%s%s%s%s", a->rule, a->parent ? " (in " : "",
             a->parent ? a->parent : "", a->parent ? ")" : "");
    char *mail = NULL;
    if (a->has_finding) {
        char what[1300];
        tw_finding_line(&a->finding, a->job_start_us, what, sizeof(what));
        snprintf(line, sizeof(line), "%s: %s", rule, what);
        const char *worst = tw_ra_worst(a);
        snprintf(subject, sizeof(subject), "trainwatch: %s in job %s%s%s%s",
                 a->rule, job, worst[0] ? " (" : "", worst,
                 worst[0] ? ")" : "");
        snprintf(sms, sizeof(sms), "trainwatch %s, job %s%s%s: %s", a->rule,
                 job, worst[0] ? ", " : "", worst, a->finding.summary);
        tw_utf8_cut(sms, 160);
        mail = tw_ra_mail_text(a);
    } else {
        snprintf(line, sizeof(line),
                 "%s: %s at scan %" PRIu64 " (violations %" PRId64
                 ", datapoints %" PRId64 ")",
                 rule, tw_rule_status_name(a->status), a->scan, a->violations,
                 a->datapoints);
        snprintf(subject, sizeof(subject), "trainwatch: %s in job %s", a->rule,
                 job);
        snprintf(sms, sizeof(sms), "trainwatch %s, job %s: %s", a->rule, job,
                 tw_rule_status_name(a->status));
        tw_utf8_cut(sms, 160);
    }
    if (ra->results_dir != NULL) {
        tw_results_file_name(job, fname);
        snprintf(report, sizeof(report), "%s/%s.json", ra->results_dir, fname);
    }
    /* the webhook body: the alert exactly as published */
    char *body = strndup(json, len);
    char *am = tw_ra_am_event(ra, index, job, a, line,
                              ra->results_dir ? report : NULL);
    tw_action_event ev = {.job_id = job,
                          .rule_index = index,
                          .alert_id = id,
                          .finding = line,
                          .subject = subject,
                          .mail_text = mail,
                          .sms_text = sms,
                          .report = ra->results_dir ? report : NULL,
                          .alert_json = body,
                          .am_alert = am,
                          .time_us = a->end_us};
    /* TW_ERR here is a full queue (counted as dropped by the module) */
    if (tw_actions_fire(ra->actions, &ev) != TW_OK)
        tw_log(TW_LOG_WARN, "actions: job %s rule %s: not queued (queue full)",
               job, a->rule);
    free(body);
    free(am);
    free(mail);
}

/* ---- counters and shutdown ---------------------------------------------- */

void tw_run_actions_format(const tw_run_actions *ra, char *buf, size_t len)
{
    if (len > 0)
        buf[0] = '\0';
    if (ra == NULL)
        return;
    tw_action_counters c;
    tw_actions_get_counters(ra->actions, &c);
    tw_action_type_counters s = {0};
    for (int t = 0; t < TW_ACTION_NTYPES; t++) {
        s.fired += c.type[t].fired;
        s.succeeded += c.type[t].succeeded;
        s.failed += c.type[t].failed;
        s.deduplicated += c.type[t].deduplicated;
        s.skipped += c.type[t].skipped;
        s.retried += c.type[t].retried;
    }
    int w =
        snprintf(buf, len,
                 " actions_fired=%" PRIu64 " actions_sent=%" PRIu64
                 " actions_failed=%" PRIu64 " actions_deduplicated=%" PRIu64
                 " actions_skipped=%" PRIu64 " actions_retried=%" PRIu64
                 " actions_dropped=%" PRIu64 " actions_ledger_errors=%" PRIu64
                 " actions_queued=%" PRIu64,
                 s.fired, s.succeeded, s.failed, s.deduplicated, s.skipped,
                 s.retried, c.dropped, c.ledger_errors, c.queued);
    if (ra->capture == NULL || w < 0 || (size_t)w >= len)
        return;
    tw_capture_counters k;
    tw_run_capture_counters(ra->capture, &k);
    snprintf(buf + w, len - (size_t)w,
             " captures_requested=%" PRIu64 " captures_captured=%" PRIu64
             " captures_unreachable=%" PRIu64 " captures_timed_out=%" PRIu64
             " captures_rate_limited=%" PRIu64,
             k.requested, k.captured, k.unreachable, k.timed_out,
             k.rate_limited);
}

void tw_run_actions_counters(const tw_run_actions *ra, tw_action_counters *out)
{
    memset(out, 0, sizeof(*out));
    if (ra != NULL)
        tw_actions_get_counters(ra->actions, out);
}

int tw_run_actions_drain(tw_run_actions *ra, int64_t timeout_ms)
{
    if (ra == NULL)
        return TW_OK;
    return tw_actions_drain(ra->actions, tw_actions_now_ms() + timeout_ms);
}

void tw_run_actions_free(tw_run_actions *ra)
{
    if (ra == NULL)
        return;
    tw_actions_free(ra->actions); /* stops the worker before the store goes */
    tw_run_capture_free(ra->capture); /* after: the worker submits to it */
    tw_store_close(ra->store);
    for (size_t i = 0; i < ra->ntop; i++)
        free(ra->top[i].name);
    for (size_t i = 0; i < ra->nsub; i++)
        free(ra->sub[i].name);
    free(ra->top);
    free(ra->act_on_consequences);
    free(ra->sub);
    for (size_t i = 0; i < ra->nfiring; i++) {
        free(ra->firing[i].job);
        json_decref(ra->firing[i].alert);
    }
    free(ra->firing);
    for (size_t i = 0; i < ra->nended; i++)
        free(ra->ended[i]);
    free(ra->ended);
    free(ra->results_dir);
    free(ra);
}
