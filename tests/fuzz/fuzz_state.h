/*
 * fuzz_state.h - what fuzz_state.c and corpus_gen_state.c share: the job
 * whose checkpoint parts are fuzzed (every built-in rule on its own, in the
 * registry's order) and the input layout
 *
 *   u8 part selector (0: "core", k > 0: "rule.<(k-1) mod rule count>")
 *   u8 mode: bit 0 set: the rest is a payload that the target seals with a
 *            correct header and CRC (version 1 + bit 1), so mutations reach
 *            the payload parsers; clear: the rest is the whole stored value
 *   bytes
 */
#ifndef TW_FUZZ_STATE_H
#define TW_FUZZ_STATE_H

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "job.h"

#define FUZZ_STATE_JOB "fuzz-job"
#define FUZZ_STATE_MAX_RULES 64

typedef struct fuzz_state_setup {
    tw_registry *reg;
    tw_job_config cfg;
    tw_rule_spec specs[FUZZ_STATE_MAX_RULES];
    size_t nspecs;
} fuzz_state_setup;

/* 0 when the registry found at least one built-in rule. */
static inline int fuzz_state_setup_init(fuzz_state_setup *su)
{
    su->reg = tw_registry_new();
    if (su->reg == NULL)
        return -1;
    tw_job_config_default(&su->cfg);
    const char *const *names;
    size_t n = tw_registry_list(su->reg, &names);
    su->nspecs = 0;
    for (size_t i = 0; i < n && su->nspecs < FUZZ_STATE_MAX_RULES; i++) {
        tw_rule_spec s = {0};
        s.rule = names[i];
        su->specs[su->nspecs++] = s;
    }
    if (su->nspecs == 0) {
        fprintf(stderr, "fuzz_state: no built-in rules found; set "
                        "TRAINWATCH_RULES_DIR\n");
        return -1;
    }
    return 0;
}

#endif /* TW_FUZZ_STATE_H */
