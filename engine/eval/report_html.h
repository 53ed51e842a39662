/*
 * report_html.h - `trainwatch report`: one self-contained HTML page from a
 * job's results (the object `eval --json` prints and `run` writes) and,
 * when the folder is at hand, its statistics (`stats --json`). The page
 * loads nothing: a Content-Security-Policy of default-src 'none', inline
 * CSS, charts as inline SVG (report_svg.h). Tables show the numbers as
 * computed; only histograms are drawn from the rules' own bins.
 *
 * Ownership: nothing is kept; the caller owns every argument.
 */
#ifndef TW_REPORT_HTML_H
#define TW_REPORT_HTML_H

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>

typedef struct tw_report_input {
    const json_t *results; /* required: {"job":..,"rules":[..],..}        */
    const json_t *stats;   /* NULL when only a results file is at hand    */
    /* A rule's description (its descriptor's), or NULL when unknown. */
    const char *(*describe)(void *ud, const char *rule);
    void *describe_ud;
    const char *timeline_href; /* relative link to a merged timeline, or NULL */
} tw_report_input;

/* tw_report_input.describe over a tw_registry (ud): the descriptor's
 * description of a built-in rule, NULL when none is found. */
const char *tw_report_describe_registry(void *registry, const char *rule);

/* The section ids, in page order (the tests look for each). */
extern const char *const tw_report_sections[];

/* Writes the page. TW_ERR with a sentence in err when the results are not
 * an object with a "rules" array, or the write fails. */
int tw_report_html_write(FILE *out, const tw_report_input *in, char *err,
                         size_t errlen);

#endif /* TW_REPORT_HTML_H */
