/*
 * rules_expect.h - one expectation of a rule unit test (`rules test`): a
 * rule's expected status, counters and finding texts, read from the tests
 * file and compared with `eval --json` results.
 *
 * Ownership: a tw_rule_expect borrows its strings from the JSON tree it
 * was parsed from, which must outlive it.
 */
#ifndef TW_RULES_EXPECT_H
#define TW_RULES_EXPECT_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

/* The counters an expectation may name, in this order. */
enum {
    TW_EXPECT_VIOLATIONS,
    TW_EXPECT_DATAPOINTS,
    TW_EXPECT_TRIGGERED,
    TW_EXPECT_NCOUNTERS
};

typedef struct tw_rule_expect {
    const char *rule;   /* required */
    const char *status; /* NULL: not checked */
    int has[TW_EXPECT_NCOUNTERS];
    uint64_t want[TW_EXPECT_NCOUNTERS];
    json_t *texts; /* array of strings the finding must contain; or NULL */
} tw_rule_expect;

/* Reads {rule, status, violations, datapoints, triggered, finding} (an
 * unknown key, a missing rule, a count that is not a whole number, a
 * finding that is not a text or list of texts: -1 with a sentence starting
 * with `where`). */
int tw_rule_expect_parse(json_t *obj, const char *where, tw_rule_expect *out,
                         char *err, size_t errlen);

/* Compares with eval's results ({"rules": [...]}); writes each
 * disagreement to diff as "-  expected" / "+  got" lines under the rule's
 * name. Returns the number of disagreements. */
int tw_rule_expect_compare(const tw_rule_expect *e, json_t *results,
                           FILE *diff);

/* A whole number written in decimal digits only ("12"; not "-1", "1e3",
 * "0x10"): 0, or -1. Tests files keep every value as text (yaml_json.h). */
int tw_expect_whole_number(const char *text, uint64_t *out);

#endif /* TW_RULES_EXPECT_H */
