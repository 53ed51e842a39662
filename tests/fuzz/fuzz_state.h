/*
 * fuzz_state.h - what fuzz_state.c and corpus_gen_state.c share: the job
 * whose checkpoint parts are fuzzed (every built-in rule on its own, in the
 * registry's order) and the input layout
 *
 *   u8 part selector (0: "core", k > 0: "rule.<(k-1) mod rule count>")
 *   u8 mode: bit 0 set: the rest is a payload that the target seals with a
 *            correct header and CRC (version 1 + bits 1-2), so mutations reach
 *            the payload parsers; clear: the rest is the whole stored value
 *   bytes
 */
#ifndef TW_FUZZ_STATE_H
#define TW_FUZZ_STATE_H

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "job.h"

#define FUZZ_STATE_JOB "fuzz-job"
#define FUZZ_STATE_MAX_RULES 64

typedef struct fuzz_state_setup {
    tw_registry *reg;
    tw_job_config cfg;
    tw_rule_spec specs[FUZZ_STATE_MAX_RULES];
    size_t nspecs;
    size_t filler; /* the spec cheapest to create (fuzz_state.c) */
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
    su->filler = 0;
    /* Debugging rules that need a tensor selection get one: every rule
     * must be creatable from this table alone. */
    static const char *const sel_key[] = {"collection_names"};
    static const char *const sel_val[] = {"weights"};
    for (size_t i = 0; i < n && su->nspecs < FUZZ_STATE_MAX_RULES; i++) {
        tw_rule_spec s = {0};
        s.rule = names[i];
        const tw_plugin *p;
        char why[256];
        if (tw_registry_find(su->reg, names[i], &p, why, sizeof(why)) ==
            TW_OK) {
            const tw_rule_descriptor *d = tw_plugin_descriptor(p);
            for (size_t k = 0; k < d->nparams; k++)
                if (strcmp(d->params[k].name, sel_key[0]) == 0) {
                    s.keys = sel_key;
                    s.values = sel_val;
                    s.nparams = 1;
                }
        }
        if (strcmp(names[i], "MaxInitializationTime") == 0)
            su->filler = su->nspecs; /* small state, two parameters */
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
