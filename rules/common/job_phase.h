/*
 * job_phase.h - the job's initialization phase as rules in `fixed`
 * semantics see it (docs/rules.md, "Phases"): from the job's start to the
 * start of its first step event (a framework event with a Step:ModeKeys
 * mode). Rules that judge a running training (LowGPUUtilization,
 * BatchSize, GPUMemoryIncrease) skip system samples of that phase: idle,
 * empty GPUs before the first step are MaxInitializationTime's concern.
 *
 * Until the first step event arrives, a sample counts as initialization
 * only within `grace_us` of the job's first timestamp: a job without the
 * framework hook, or whose traces hold no step events (a Horovod or
 * TF-profiler timeline only), is evaluated from then on, and an
 * initialization longer than that finds its later samples counted.
 * (GPUMemoryIncrease keeps its own rule for that case, its header says.)
 *
 * The finalization phase (after the last step to the job's end: saving
 * the model, uploading, tearing down) is skipped too: a sample more than
 * TW_JOB_PHASE_FINAL_GAP_US after the end of the newest step event seen
 * so far (this scan's included) lies outside the training. Streaming, a
 * rule cannot know which step is the last, so a pause of the training
 * longer than that (no step running) whose steps resume only in a later
 * scan is skipped the same way up to the scan's end. The hook's steps are
 * contiguous (a step ends where the next begins, docs/rules.md
 * "Phases"), so the gap only absorbs the instants between them.
 */
#ifndef TW_RULES_JOB_PHASE_H
#define TW_RULES_JOB_PHASE_H

#include <stdint.h>

#include "trainwatch/plugin.h"
#include "trainwatch/ser.h"

/* How far after the newest step's end the finalization begins. */
#define TW_JOB_PHASE_FINAL_GAP_US (10 * 1000000LL)

typedef struct tw_job_phase {
    int fw_seen;           /* any framework event so far (GPUMemoryIncrease) */
    int step_seen;         /* any step event so far */
    int64_t first_step_us; /* the earliest step start seen */
    int64_t last_step_end_us; /* the latest step end seen */
} tw_job_phase;

/* Notes the scan's framework events (call before its samples). */
void tw_job_phase_note(tw_job_phase *p, const tw_scan *scan);

/* Whether a sample at ts (seconds since the epoch) of a job whose first
 * timestamp is first_us lies in the initialization, as far as the events
 * seen so far tell. */
int tw_job_phase_in_init(const tw_job_phase *p, double ts, int64_t first_us,
                         int64_t grace_us);

/* Whether a sample at ts lies in the finalization (after the newest step
 * seen, by more than TW_JOB_PHASE_FINAL_GAP_US). */
int tw_job_phase_in_final(const tw_job_phase *p, double ts);

/* In the initialization or the finalization: not the training. */
int tw_job_phase_outside(const tw_job_phase *p, double ts, int64_t first_us,
                         int64_t grace_us);

/* RuleParameters without the phase's own parameters: "name:value" lines
 * of the first n parameters (those the reference has; init_grace comes
 * after them), None ones left out as the host's default text does, so the
 * report stays equal to the reference's. TW_ERR if buf is too small. */
int tw_job_phase_params_text(const tw_param_spec *specs, const tw_params *p,
                             size_t n, char *buf, size_t cap);

/* Checkpoint: u8 fw_seen, u8 step_seen, i64 first_step_us,
 * i64 last_step_end_us. */
void tw_job_phase_save(const tw_job_phase *p, tw_ser *s);
void tw_job_phase_load(tw_job_phase *p, tw_deser *d);

#endif
