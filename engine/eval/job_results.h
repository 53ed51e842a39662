/*
 * job_results.h - a job's rule results as JSON: one writer shared by
 * `trainwatch eval --json` and the daemon's per-job results files, so the
 * two print byte-identical results for the same event stream.
 *
 * Each rule is one object (name, status, input ("received" or "none":
 * whether its input ever arrived, plugin_host.h), semantics, scans,
 * conditions_met, datapoints, violations, rule_triggered, error when
 * failed, report);
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

#include "job.h"
#include "json_writer.h"

/* Writes the array of every rule's (and sub-rule's) result as the next
 * value of j. `scratch` is a second writer used for reports (reset here). */
void tw_job_results_rules(tw_json *j, tw_json *scratch, tw_job *job);

/* Writes the job's results object as the next value of j:
 * {"job", "first_timestamp_us", "latest_timestamp_us", "scans",
 *  "input": {samples, events, late_samples, late_events,
 *  duplicate_batches}, "rules": [...]}. TW_ERR on out-of-memory. */
int tw_job_results_write(tw_json *j, tw_job *job);

#endif /* TW_JOB_RESULTS_H */
