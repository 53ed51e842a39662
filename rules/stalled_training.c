/*
 * stalled_training.c - StalledTrainingRule (DEBUG_RULES.md §4.18, §7): the
 * job made no progress for `threshold` seconds, on the engine's wall
 * clock (plugin.h, `_wallclock`), since a stalled job sends nothing.
 *
 * Progress: the arrival of any framework event of the job (the hook's
 * step, forward/backward and dataloader events are per-step activity), so
 * the save interval of the reference's tensor files no longer limits it.
 * Before the first event, t_last is the rule's first call (as the
 * reference measures a hang in the first step from its own start).
 *
 * Decisions (DEBUG_RULES.md §8.3 leaves them open):
 *  - Arrival time, not the events' own times: robust to a skewed clock on
 *    the training host (§7 "Clock choice"). Offline, event time stands in.
 *  - One violation per stall: it fires when now - t_last first exceeds
 *    threshold and again only after progress resumed and stopped again.
 *  - No firing while a rank is inside a declared pause (its newest event
 *    is "Section:checkpoint...:begin" from hook.section("checkpoint")).
 *  - stop_training_on_fire: the finding says the rule asks for a stop;
 *    the stop itself is the rule's configured StopTraining action (the
 *    engine's actions fire on findings). training_job_name_prefix is
 *    accepted and shown (the engine already knows the job: the alert's).
 *
 * Memory: O(1).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainwatch/finding.h"
#include "trainwatch/plugin.h"
#include "trainwatch/ser.h"

enum { P_THRESHOLD = 0, P_STOP, P_PREFIX, P_COUNT };

static const tw_param_spec st_params[P_COUNT] = {
    {"threshold", TW_PARAM_DOUBLE, "1800", 0.001, 604800.0,
     "seconds without progress (any new step activity of the job) before "
     "the rule fires"},
    {"stop_training_on_fire", TW_PARAM_BOOL, "false", 0, 0,
     "ask for the job to be stopped when it fires (configure a "
     "StopTraining action on the rule to carry it out)"},
    {"training_job_name_prefix", TW_PARAM_STRING, NULL, 0, 0,
     "the reference's selector of the job to stop; accepted and shown"},
};

typedef struct st_state {
    const tw_host *host;
    double threshold_s;
    int stop;
    char prefix[64];
    int64_t triggered, violations, datapoints;
    int64_t start_us;      /* the first call's now: t_last before any event */
    int64_t last_us;       /* arrival of the newest activity (t_last)      */
    int64_t last_step;     /* newest step number seen; -1 none             */
    int64_t last_event_us; /* event time of the newest activity            */
    char last_node[64];
    int32_t stalled; /* inside a stall already reported */
    int64_t fired_us, fired_silent_ms, resumed_us;
    int64_t fired_step;
} st_state;

static int st_create(const tw_host *host, const tw_params *params, void **state,
                     char *err, size_t errlen)
{
    if (params->nvalues != P_COUNT) {
        snprintf(err, errlen,
                 "StalledTrainingRule: expected %d parameters, got %zu",
                 P_COUNT, params->nvalues);
        return TW_ERR;
    }
    st_state *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        snprintf(err, errlen, "StalledTrainingRule: out of memory");
        return TW_ERR;
    }
    s->host = host;
    s->threshold_s = params->values[P_THRESHOLD].d;
    s->stop = params->values[P_STOP].i != 0;
    if (!params->values[P_PREFIX].is_none)
        snprintf(s->prefix, sizeof(s->prefix), "%s",
                 params->values[P_PREFIX].s);
    s->last_step = -1;
    s->fired_step = -1;
    *state = s;
    return TW_OK;
}

static void st_destroy(void *state)
{
    free(state);
}

static int64_t step_arg(const tw_fw_event *e)
{
    for (uint32_t i = 0; i < e->nargs; i++)
        if (strcmp(e->args[i].key, "step_num") == 0)
            return strtoll(e->args[i].value, NULL, 10);
    return -1;
}

static int st_scan(void *state, const tw_scan *scan, tw_scan_result *out,
                   char *err, size_t errlen)
{
    (void)err, (void)errlen;
    st_state *s = state;
    for (size_t i = 0; i < scan->nevents; i++) {
        const tw_fw_event *e = &scan->events[i];
        if (e->name == NULL || strncmp(e->name, "Step:ModeKeys.", 14) != 0 ||
            (e->flags & TW_EVENT_REPEAT))
            continue;
        s->datapoints++;
        int64_t step = step_arg(e);
        if (step > s->last_step)
            s->last_step = step;
    }
    out->condition_met = 0;
    out->rule_triggered = s->triggered;
    out->violations = s->violations;
    out->datapoints = s->datapoints;
    return TW_OK;
}

static int st_wallclock(void *state, const tw_wallclock *wc,
                        tw_scan_result *out, char *err, size_t errlen)
{
    (void)err, (void)errlen;
    st_state *s = state;
    if (s->start_us == 0)
        s->start_us = wc->now_us;
    int paused = 0;
    for (size_t i = 0; i < wc->nnodes; i++) {
        const tw_wallclock_node *n = &wc->nodes[i];
        if (n->last_event == NULL)
            continue;
        if (n->last_event_arrival_us > s->last_us) {
            s->last_us = n->last_event_arrival_us;
            s->last_event_us = n->last_event_end_us;
            snprintf(s->last_node, sizeof(s->last_node), "%s", n->node);
        }
        if (n->last_event_step > s->last_step &&
            strncmp(n->last_event, "Step:ModeKeys.", 14) == 0)
            s->last_step = n->last_event_step;
        paused |= strncmp(n->last_event, "Section:checkpoint", 18) == 0 &&
                  strstr(n->last_event, ":begin") != NULL;
    }
    int64_t t_last = s->last_us > 0 ? s->last_us : s->start_us;
    double silent = (double)(wc->now_us - t_last) / 1e6;
    out->condition_met = 0;
    if (silent > s->threshold_s && !paused) {
        if (!s->stalled) {
            s->stalled = 1;
            s->violations++;
            s->triggered++;
            s->fired_us = wc->now_us;
            s->fired_silent_ms = (int64_t)(silent * 1000);
            s->fired_step = s->last_step;
            s->resumed_us = 0;
            out->condition_met = 1;
        }
    } else if (s->stalled && silent <= s->threshold_s) {
        s->stalled = 0;
        s->resumed_us = wc->now_us;
    }
    out->rule_triggered = s->triggered;
    out->violations = s->violations;
    out->datapoints = s->datapoints;
    return TW_OK;
}

static int st_details(void *state, tw_json *j)
{
    st_state *s = state;
    const tw_host *h = s->host;
    h->json_object_begin(j);
    h->json_key(j, "stalled");
    h->json_bool(j, s->stalled);
    h->json_key(j, "last_step");
    h->json_int(j, s->last_step);
    h->json_key(j, "last_activity_us");
    h->json_int(j, s->last_us);
    h->json_key(j, "fired_us");
    h->json_int(j, s->fired_us);
    h->json_key(j, "fired_step");
    h->json_int(j, s->fired_step);
    h->json_key(j, "resumed_us");
    h->json_int(j, s->resumed_us);
    h->json_key(j, "stop_training_on_fire");
    h->json_bool(j, s->stop);
    h->json_object_end(j);
    return TW_OK;
}

#define ST_MAGIC 0x53545231u /* "STR1" */

static int st_save(void *state, tw_buf *out)
{
    st_state *s = state;
    tw_ser w;
    tw_ser_init(&w, s->host, out);
    tw_ser_u32(&w, ST_MAGIC);
    tw_ser_i64(&w, s->triggered);
    tw_ser_i64(&w, s->violations);
    tw_ser_i64(&w, s->datapoints);
    tw_ser_i64(&w, s->start_us);
    tw_ser_i64(&w, s->last_us);
    tw_ser_i64(&w, s->last_step);
    tw_ser_i64(&w, s->last_event_us);
    tw_ser_str(&w, s->last_node);
    tw_ser_u32(&w, (uint32_t)s->stalled);
    tw_ser_i64(&w, s->fired_us);
    tw_ser_i64(&w, s->fired_silent_ms);
    tw_ser_i64(&w, s->resumed_us);
    tw_ser_i64(&w, s->fired_step);
    return tw_ser_ok(&w) ? TW_OK : TW_ERR;
}

static int st_restore(void *state, const void *data, size_t len, char *err,
                      size_t errlen)
{
    st_state *s = state;
    tw_deser d;
    tw_deser_init(&d, data, len);
    if (tw_deser_u32(&d) != ST_MAGIC) {
        snprintf(err, errlen,
                 "StalledTrainingRule: checkpoint is not from this rule");
        return TW_ERR;
    }
    s->triggered = tw_deser_i64(&d);
    s->violations = tw_deser_i64(&d);
    s->datapoints = tw_deser_i64(&d);
    s->start_us = tw_deser_i64(&d);
    s->last_us = tw_deser_i64(&d);
    s->last_step = tw_deser_i64(&d);
    s->last_event_us = tw_deser_i64(&d);
    char *node = tw_deser_str(&d);
    if (node != NULL && strlen(node) < sizeof(s->last_node))
        memcpy(s->last_node, node, strlen(node) + 1);
    else
        tw_deser_fail(&d);
    free(node);
    s->stalled = (int32_t)tw_deser_u32(&d);
    s->fired_us = tw_deser_i64(&d);
    s->fired_silent_ms = tw_deser_i64(&d);
    s->resumed_us = tw_deser_i64(&d);
    s->fired_step = tw_deser_i64(&d);
    if (!tw_deser_done(&d)) {
        snprintf(err, errlen,
                 "StalledTrainingRule: checkpoint of %zu bytes is truncated "
                 "or corrupt",
                 len);
        return TW_ERR;
    }
    return TW_OK;
}

static int st_finding(void *state, const tw_finding_ctx *ctx, tw_finding *f,
                      char *err, size_t errlen)
{
    (void)ctx, (void)err, (void)errlen;
    st_state *s = state;
    if (s->last_node[0] != '\0')
        tw_finding_add_name(f, s->last_node);
    f->first_us = s->last_us > 0 ? s->last_us : s->start_us;
    f->last_us = s->fired_us;
    f->value = (double)s->fired_silent_ms / 1000.0;
    f->limit = s->threshold_s;
    snprintf(f->unit, sizeof(f->unit), "s");
    char silent[32], limit[32];
    tw_finding_duration(f->value, silent, sizeof(silent));
    tw_finding_duration(s->threshold_s, limit, sizeof(limit));
    if (s->fired_step >= 0)
        tw_finding_text(f->summary,
                        "Training stalled: no progress for %s after step "
                        "%" PRId64 " (threshold %s)%s.",
                        silent, s->fired_step, limit,
                        s->stop ? "; the rule asks for the job to be stopped"
                                : "");
    else
        tw_finding_text(f->summary,
                        "Training stalled before its first step: no progress "
                        "for %s (threshold %s)%s.",
                        silent, limit,
                        s->stop ? "; the rule asks for the job to be stopped"
                                : "");
    tw_finding_text(f->magnitude, "%s without a new step%s; %lld stall(s)",
                    silent, s->stalled ? ", still stalled" : ", resumed since",
                    (long long)s->violations);
    tw_finding_text(f->recommendation,
                    "Find where the processes wait: their Python stacks "
                    "(py-spy dump), a collective that never completes, a "
                    "deadlocked data loader or stuck I/O; the Progress rule "
                    "names the ranks behind.");
    tw_finding_text(
        f->parameters, "threshold %g s, stop_training_on_fire %s%s%s",
        s->threshold_s, s->stop ? "True" : "False",
        s->prefix[0] ? ", training_job_name_prefix " : "", s->prefix);
    return TW_OK;
}

static const tw_rule_descriptor st_descriptor = {
    .abi_version = TW_PLUGIN_ABI_VERSION,
    .name = "StalledTrainingRule",
    .description = "Flags a job that made no progress (no new step "
                   "activity) for `threshold` seconds of the engine's wall "
                   "clock.",
    .params = st_params,
    .nparams = P_COUNT,
    .create = st_create,
    .scan = st_scan,
    .details = st_details,
    .save = st_save,
    .restore = st_restore,
    .destroy = st_destroy,
    .finding = st_finding,
    .finding_help =
        "The job sent no step activity for longer than the threshold. Look "
        "at where its processes wait (stacks, collectives, the data loader, "
        "I/O); the Progress rule tells which ranks are behind.",
};

TW_PLUGIN_EXPORT const tw_rule_descriptor *trainwatch_rule(void)
{
    return &st_descriptor;
}

TW_PLUGIN_EXPORT uint32_t trainwatch_rule_inputs(void)
{
    return TW_INPUT_FRAMEWORK;
}

TW_PLUGIN_EXPORT int trainwatch_rule_wallclock(void *state,
                                               const tw_wallclock *wc,
                                               tw_scan_result *out, char *err,
                                               size_t errlen)
{
    return st_wallclock(state, wc, out, err, errlen);
}
