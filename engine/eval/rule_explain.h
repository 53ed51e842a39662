/*
 * rule_explain.h - `trainwatch explain`: a rule described from its
 * descriptor alone (plugin.h): what it checks, its parameters with type,
 * default and bounds, what a finding means and what to try. The same
 * descriptor validates configurations, so the text cannot drift from
 * what the engine accepts.
 *
 * Ownership: nothing is kept.
 */
#ifndef TW_RULE_EXPLAIN_H
#define TW_RULE_EXPLAIN_H

#include <stdio.h>

#include "trainwatch/plugin.h"

/* The full description of one rule. */
void tw_rule_explain(FILE *out, const tw_rule_descriptor *d);

/* "  NAME  TYPE, default D, from MIN to MAX" (no newline; bounds as %g,
 * only for numbers with min <= max). */
void tw_rule_explain_param(FILE *out, const tw_param_spec *p);

#endif /* TW_RULE_EXPLAIN_H */
