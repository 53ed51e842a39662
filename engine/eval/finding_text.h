/*
 * finding_text.h - a rule's finding (plugin.h, tw_finding) as the engine's
 * outputs show it: the one JSON form (alerts, results files, eval --json),
 * the wrapped lines of eval's table, the short line of SMS/SNS, and the
 * time formats they share. Locale-independent: numbers are formatted by
 * the C locale the engine runs in (it never calls setlocale).
 *
 * Ownership: nothing is kept; callers own every buffer they pass.
 */
#ifndef TW_FINDING_TEXT_H
#define TW_FINDING_TEXT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "json_writer.h"
#include "trainwatch/plugin.h"

/* "2026-11-24T07:52:32Z" (UTC, ISO 8601, whole seconds). */
void tw_format_utc(int64_t us, char *out, size_t n);

/* "+00:12:31" from the job's start (hours grow past 99 as needed; a time
 * before the start prints "-00:00:04"). */
void tw_format_offset(int64_t us, int64_t start_us, char *out, size_t n);

/* The finding as the next JSON value of j:
 * {"summary", "nodes": {"listed": [..], "count": N},
 *  "time_range": {"first_us", "last_us"} (absent when unknown),
 *  "magnitude": {"text", "value", "limit", "unit"},
 *  "recommendation", "parameters"}. */
void tw_finding_json(tw_json *j, const tw_finding *f);

/* "algo-1, algo-2 (+3 more)" or "job-wide" when no name is listed. */
void tw_finding_nodes_text(const tw_finding *f, char *out, size_t n);

/* eval's table: the summary, nodes, time range (offsets from
 * job_start_us and UTC), magnitude and recommendation, each wrapped to
 * `width` columns under a two-space indent. */
void tw_finding_print(FILE *out, const tw_finding *f, int64_t job_start_us,
                      int width);

/* The whole finding on one line: "summary Where: nodes. Since +hh:mm:ss
 * (UTC). magnitude. Try: recommendation" cut to fit n (UTF-8 safe). */
void tw_finding_line(const tw_finding *f, int64_t job_start_us, char *out,
                     size_t n);

/* Cuts s to at most max bytes at a UTF-8 character boundary, and drops
 * a last character that an earlier truncation left incomplete. */
void tw_utf8_cut(char *s, size_t max);

#endif /* TW_FINDING_TEXT_H */
