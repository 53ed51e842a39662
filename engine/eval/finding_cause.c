/*
 * finding_cause.c - which finding explains another (finding_cause.h).
 */
#include "finding_cause.h"

#include <string.h>

#include "tw_assert.h"

/* A rule's kind: its plugin's name (a configured display name may differ). */
static const char *rule_kind(const tw_rule *r)
{
    const tw_rule_descriptor *d = tw_rule_descriptor_of(r);
    return d != NULL && d->name != NULL ? d->name : "";
}

static int kind_in(const char *kind, const char *const *list)
{
    for (; *list != NULL; list++)
        if (strcmp(kind, *list) == 0)
            return 1;
    return 0;
}

/* What a starved or waiting GPU shows; and a straggler, which a rank that
 * became slower than itself (FailSlow) explains. */
static const char *const consequence_kinds[] = {"LowGPUUtilization",
                                                "BatchSize", "Straggler", NULL};
/* What starves a GPU on its node. */
static const char *const node_cause_kinds[] = {"CPUBottleneck", "IOBottleneck",
                                               "Dataloader", NULL};

/* The node part of a finding's name: "algo-1/gpu0" -> "algo-1". */
static size_t node_len(const char *name)
{
    const char *slash = strchr(name, '/');
    return slash != NULL ? (size_t)(slash - name) : strlen(name);
}

static int share_node(const tw_finding *a, const tw_finding *b)
{
    for (uint32_t i = 0; i < a->nnames; i++)
        for (uint32_t k = 0; k < b->nnames; k++) {
            size_t la = node_len(a->names[i]), lb = node_len(b->names[k]);
            if (la == lb && memcmp(a->names[i], b->names[k], la) == 0)
                return 1;
        }
    return 0;
}

/* Rules date a violation differently (a sample's time, the end of the
 * window it closed): ranges this close still overlap. */
#define TW_CAUSE_SLACK_US (60 * 1000000LL)

/* Closed ranges; the host fills an unknown range from the scans' windows
 * (plugin.h), so 0 here means the rule and the host both had nothing. */
static int overlap(const tw_finding *a, const tw_finding *b)
{
    if (a->first_us == 0 || b->first_us == 0)
        return 1;
    return a->first_us <= b->last_us + TW_CAUSE_SLACK_US &&
           b->first_us <= a->last_us + TW_CAUSE_SLACK_US;
}

/* A rule with IssuesFound and a finding, in fixed semantics. */
static int fixed_finding(const tw_rule *r, tw_finding *f)
{
    return tw_rule_nchildren(r) == 0 &&
           tw_rule_semantics(r) == TW_SEMANTICS_FIXED &&
           tw_rule_get_status(r) == TW_STATUS_ISSUES_FOUND &&
           tw_rule_finding(r, f) == TW_OK;
}

static int explains(const tw_rule *cause, const char *effect_kind,
                    const tw_finding *effect)
{
    const char *kind = rule_kind(cause);
    if (strcmp(effect_kind, "Straggler") == 0) {
        /* the same rank, slower than the others because slower than itself */
        tw_finding c;
        return strcmp(kind, "FailSlow") == 0 && fixed_finding(cause, &c) &&
               overlap(&c, effect) && share_node(&c, effect);
    }
    int straggler = strcmp(kind, "Straggler") == 0;
    if (!straggler && !kind_in(kind, node_cause_kinds))
        return 0;
    tw_finding c;
    if (!fixed_finding(cause, &c) || !overlap(&c, effect))
        return 0;
    /* a straggler's names are ranks; every other node waits for it */
    return straggler || share_node(&c, effect);
}

int tw_job_rule_cause(tw_job *job, const tw_rule *rule, tw_rule_cause *out)
{
    TW_ASSERT(job != NULL && rule != NULL && out != NULL);
    tw_finding effect;
    const char *effect_kind = rule_kind(rule);
    if (!kind_in(effect_kind, consequence_kinds) ||
        !fixed_finding(rule, &effect))
        return 0;
    for (size_t i = 0; i < tw_job_nrules(job); i++) {
        tw_rule *top = tw_job_rule(job, i);
        size_t n = tw_rule_nchildren(top);
        for (size_t k = 0; k < (n > 0 ? n : 1); k++) {
            tw_rule *r = n > 0 ? tw_rule_child(top, k) : top;
            if (r != rule && explains(r, effect_kind, &effect)) {
                out->rule = r;
                out->parent = n > 0 ? tw_rule_name(top) : NULL;
                return 1;
            }
        }
    }
    return 0;
}
