/*
 * eval_results.h - an offline evaluation of a folder (what `trainwatch
 * eval DIR --json` prints) as a string, for commands that render it
 * (`trainwatch report DIR`).
 *
 * Ownership: *json is the caller's (free()).
 */
#ifndef TW_EVAL_RESULTS_H
#define TW_EVAL_RESULTS_H

/* Evaluates dir with the rule file rules_path (NULL: the default set),
 * quietly. 0 with the results object in *json; -1 after a message on
 * stderr. */
int tw_eval_results_json(const char *dir, const char *rules_path, char **json);

#endif /* TW_EVAL_RESULTS_H */
