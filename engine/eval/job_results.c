/* job_results.c - a job's rule results as JSON (job_results.h). */
#include "job_results.h"

#include <stdint.h>

#include "finding_cause.h"
#include "finding_text.h"

void tw_job_results_counters(tw_json *j, tw_rule *rule)
{
    const tw_scan_result *res = tw_rule_last_result(rule);
    tw_json_key(j, "datapoints");
    tw_json_int(j, res->datapoints);
    tw_json_key(j, "violations");
    tw_json_int(j, res->violations);
    tw_json_key(j, "rule_triggered");
    tw_json_int(j, res->rule_triggered);
    if (tw_rule_error(rule)[0] != '\0') {
        tw_json_key(j, "error");
        tw_json_string(j, tw_rule_error(rule));
    }
}

static void tw_results_rule(tw_json *j, tw_json *scratch, tw_job *job,
                            tw_rule *rule, const char *parent)
{
    tw_json_object_begin(j);
    tw_json_key(j, "name");
    tw_json_string(j, tw_rule_name(rule));
    if (parent != NULL) {
        tw_json_key(j, "parent");
        tw_json_string(j, parent);
    }
    tw_json_key(j, "status");
    tw_json_string(j, tw_rule_status_name(tw_rule_get_status(rule)));
    tw_json_key(j, "input");
    tw_json_string(j, tw_rule_received_input(rule) ? "received" : "none");
    tw_json_key(j, "semantics");
    tw_json_string(j, tw_rule_semantics(rule) == TW_SEMANTICS_REFERENCE
                          ? "reference"
                          : "fixed");
    tw_json_key(j, "scans");
    tw_json_int(j, (int64_t)tw_rule_scans(rule));
    tw_json_key(j, "conditions_met");
    tw_json_int(j, (int64_t)tw_rule_conditions_met(rule));
    tw_job_results_counters(j, rule);
    /* what a person reads (plugin.h tw_finding); IssuesFound leaves only */
    tw_finding f;
    if (tw_rule_nchildren(rule) == 0 && tw_rule_finding(rule, &f) == TW_OK) {
        tw_json_key(j, "finding");
        tw_finding_json(j, &f);
    }
    tw_rule_cause cause;
    if (tw_job_rule_cause(job, rule, &cause)) {
        tw_json_key(j, "caused_by");
        tw_job_results_cause(j, &cause);
    }
    tw_json_reset(scratch);
    if (tw_rule_nchildren(rule) == 0 &&
        tw_rule_report(rule, scratch) == TW_OK && !tw_json_failed(scratch) &&
        tw_json_len(scratch) > 0) {
        tw_json_key(j, "report");
        tw_json_raw(j, tw_json_str(scratch));
        /* Strict JSON has no NaN/Infinity: say that some became null. */
        if (tw_json_nonfinite(scratch) > 0) {
            tw_json_key(j, "nonfinite_nulls");
            tw_json_int(j, (int64_t)tw_json_nonfinite(scratch));
        }
    }
    tw_json_object_end(j);
    for (size_t i = 0; i < tw_rule_nchildren(rule); i++)
        tw_results_rule(j, scratch, job, tw_rule_child(rule, i),
                        tw_rule_name(rule));
}

void tw_job_results_cause(tw_json *j, const tw_rule_cause *cause)
{
    tw_json_object_begin(j);
    tw_json_key(j, "rule");
    tw_json_string(j, tw_rule_name(cause->rule));
    if (cause->parent != NULL) {
        tw_json_key(j, "parent");
        tw_json_string(j, cause->parent);
    }
    tw_json_object_end(j);
}

void tw_job_results_rule(tw_json *j, tw_json *scratch, tw_job *job,
                         tw_rule *rule)
{
    tw_results_rule(j, scratch, job, rule, NULL);
}

void tw_job_results_rules(tw_json *j, tw_json *scratch, tw_job *job)
{
    tw_json_set_strict(j, 1);
    tw_json_set_strict(scratch, 1);
    tw_json_array_begin(j);
    for (size_t i = 0; i < tw_job_nrules(job); i++)
        tw_results_rule(j, scratch, job, tw_job_rule(job, i), NULL);
    tw_json_array_end(j);
}

int tw_job_results_write(tw_json *j, tw_job *job)
{
    return tw_job_results_write_from(j, job, NULL);
}

int tw_job_results_write_from(tw_json *j, tw_job *job,
                              const tw_results_source *src)
{
    tw_json *scratch = tw_json_new();
    if (scratch == NULL)
        return TW_ERR;
    tw_job_stats js;
    tw_job_get_stats(job, &js);
    tw_json_set_strict(j, 1);
    tw_json_object_begin(j);
    tw_json_key(j, "job");
    tw_json_string(j, tw_job_id(job));
    if (src != NULL) {
        tw_json_key(j, "folder");
        tw_json_string(j, src->folder);
    }
    tw_json_key(j, "first_timestamp_us");
    tw_json_int(j, tw_job_first_timestamp(job));
    tw_json_key(j, "latest_timestamp_us");
    tw_json_int(j, tw_job_latest_timestamp(job));
    tw_json_key(j, "scans");
    tw_json_int(j, (int64_t)js.scans);
    tw_json_key(j, "input");
    tw_json_object_begin(j);
    if (src != NULL) {
        const char *keys[] = {"files",        "bad_files", "unreadable_dirs",
                              "skipped_dirs", "lines",     "bad_lines"};
        const uint64_t vals[] = {src->files,           src->bad_files,
                                 src->unreadable_dirs, src->skipped_dirs,
                                 src->lines,           src->bad_lines};
        for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
            tw_json_key(j, keys[i]);
            tw_json_int(j, (int64_t)vals[i]);
        }
    }
    tw_json_key(j, "samples");
    tw_json_int(j, (int64_t)js.samples);
    tw_json_key(j, "events");
    tw_json_int(j, (int64_t)js.events);
    tw_json_key(j, "late_samples");
    tw_json_int(j, (int64_t)js.late_samples);
    tw_json_key(j, "late_events");
    tw_json_int(j, (int64_t)js.late_events);
    tw_json_key(j, "duplicate_batches");
    tw_json_int(j, (int64_t)js.duplicate_batches);
    tw_json_key(j, "skewed_samples");
    tw_json_int(j, (int64_t)js.skewed_samples);
    tw_json_key(j, "skewed_events");
    tw_json_int(j, (int64_t)js.skewed_events);
    tw_json_key(j, "skewed_markers");
    tw_json_int(j, (int64_t)js.skewed_markers);
    /* only jobs with debugging tensors: other results keep their bytes */
    if (js.tensors + js.late_tensors + js.skewed_tensors > 0) {
        const char *keys[] = {"tensors", "late_tensors", "skewed_tensors"};
        const uint64_t vals[] = {js.tensors, js.late_tensors,
                                 js.skewed_tensors};
        for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
            tw_json_key(j, keys[i]);
            tw_json_int(j, (int64_t)vals[i]);
        }
    }
    if (src != NULL) {
        tw_json_key(j, "seconds");
        tw_json_double(j, src->seconds);
    }
    tw_json_object_end(j);
    /* only when input is known missing: complete jobs keep eval's bytes */
    const tw_job_loss *loss = tw_job_loss_of(job);
    if (tw_job_loss_any(loss)) {
        tw_json_key(j, "partial");
        tw_json_bool(j, 1);
        tw_json_key(j, "data_loss");
        tw_job_loss_json(loss, j);
    }
    tw_json_key(j, "rules");
    tw_job_results_rules(j, scratch, job);
    tw_json_object_end(j);
    int failed = tw_json_failed(j) || tw_json_failed(scratch);
    tw_json_free(scratch);
    return failed ? TW_ERR : TW_OK;
}
