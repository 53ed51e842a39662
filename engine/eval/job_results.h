/*
 * job_results.h - a job's rule results as JSON: one writer shared by
 * `trainwatch eval --json` and the daemon's per-job results files, so the
 * two print byte-identical results for the same event stream.
 *
 * Each rule is one object (name, status, input ("received" or "none":
 * whether its input ever arrived, plugin_host.h), semantics, scans,
 * conditions_met, datapoints, violations, rule_triggered, error when
 * failed, finding when IssuesFound (finding_text.h's JSON form),
 * caused_by {"rule"[, "parent"]} when another rule's finding explains it
 * (finding_cause.h), report);
 * sub-rules of a composite rule follow their parent with a "parent" key
 * and the composite's own report (which would repeat them) is left out.
 *
 * The output is strict JSON (RFC 8259) for any parser: both writers are
 * switched to strict mode, so a report's NaN or ±Infinity is written as
 * null and its rule object gets "nonfinite_nulls": <how many> after
 * "report" (absent when there were none).
 *
 * Ownership: nothing is kept; the caller owns the writers it passes.
 */
#ifndef TW_JOB_RESULTS_H
#define TW_JOB_RESULTS_H

#include "finding_cause.h"
#include "job.h"
#include "json_writer.h"

/* Writes the array of every rule's (and sub-rule's) result as the next
 * value of j. `scratch` is a second writer used for reports (reset here). */
void tw_job_results_rules(tw_json *j, tw_json *scratch, tw_job *job);

/* A rule's counters as keys of the object j is in: "datapoints",
 * "violations", "rule_triggered" and, when it failed, "error" (the
 * results files and the alerts' details write them alike). */
void tw_job_results_counters(tw_json *j, tw_rule *rule);
/* One configured rule's object and its sub-rules' (as consecutive values
 * of the array j is in), as tw_job_results_rules writes them. */
void tw_job_results_rule(tw_json *j, tw_json *scratch, tw_job *job,
                         tw_rule *rule);
/* A cause as the value {"rule"[, "parent"]} (results and alerts). */
void tw_job_results_cause(tw_json *j, const tw_rule_cause *cause);

/* What the offline reader adds to a job's results (eval --json). */
typedef struct tw_results_source {
    const char *folder;
    uint64_t files, bad_files, unreadable_dirs, skipped_dirs, lines, bad_lines;
    double seconds; /* evaluation wall time */
} tw_results_source;

/* Writes the job's results object as the next value of j:
 * {"job", ["folder",] "first_timestamp_us", "latest_timestamp_us",
 *  "scans", "input": {[files, bad_files, unreadable_dirs, skipped_dirs,
 *  lines, bad_lines,] samples, events, late_samples, late_events,
 *  duplicate_batches, skewed_samples, skewed_events, skewed_markers
 *  [, seconds]}, ["partial", "data_loss",] "rules": [...]}; the bracketed
 * parts only with a source (src != NULL) or, for partial, when input is
 * known missing. TW_ERR on out-of-memory. */
int tw_job_results_write_from(tw_json *j, tw_job *job,
                              const tw_results_source *src);
/* The daemon's results file: no source. */
int tw_job_results_write(tw_json *j, tw_job *job);

#endif /* TW_JOB_RESULTS_H */
