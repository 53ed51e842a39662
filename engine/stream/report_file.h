/*
 * report_file.h - `run` writes <results_dir>/<name>.html, the job's HTML
 * report (report_html.h), next to its results file when the job finishes
 * (engine.report_html). <name> is the results file's (results_file.h), so
 * /jobs/<id>/report finds it. Written to a temporary file (".<name>.html.tmp",
 * the same for every write of the job), fsync'ed and renamed, so a reader
 * never sees half a page; a job finished again replaces it.
 *
 * Ownership: nothing is kept.
 */
#ifndef TW_REPORT_FILE_H
#define TW_REPORT_FILE_H

#include <stddef.h>

#include "plugin_host.h"

/* Renders results_json (one job's results object) into dir. TW_ERR with a
 * sentence naming the file in err. */
int tw_report_file_write(const char *dir, const char *id,
                         const char *results_json, tw_registry *reg, char *err,
                         size_t errlen);

#endif /* TW_REPORT_FILE_H */
