/*
 * finding_cause.h - root cause first (fixed semantics): which finding of
 * a job explains another. A CPUBottleneck, IOBottleneck, Dataloader or
 * Straggler finding explains the LowGPUUtilization and BatchSize findings
 * of the same node (a Straggler: of any node, the others wait for it)
 * whose time ranges overlap its own, and a FailSlow finding explains the
 * Straggler finding of the same rank (slower than the others because it
 * became slower than itself); such a finding is reported `caused_by` that
 * cause instead of as a problem of its own.
 *
 * Computed on demand from the rules' current findings, in the eval layer:
 * `eval` (table, --json) and `run` (results files, alerts, actions) ask
 * the same function after the same scans and get the same answer, and
 * there is no state of its own to checkpoint.
 *
 * Ownership: nothing is kept; the cause borrows the job's rules.
 */
#ifndef TW_FINDING_CAUSE_H
#define TW_FINDING_CAUSE_H

#include "job.h"
#include "plugin_host.h"

typedef struct tw_rule_cause {
    tw_rule *rule;      /* the cause (a rule without sub-rules) */
    const char *parent; /* its composite rule's name; NULL if configured */
} tw_rule_cause;

/* 1 with *out filled when `rule` (IssuesFound, fixed semantics) has a
 * finding that another rule's finding explains (the first such rule in
 * results order); 0 when it stands on its own. */
int tw_job_rule_cause(tw_job *job, const tw_rule *rule, tw_rule_cause *out);

#endif /* TW_FINDING_CAUSE_H */
