/*
 * job_statistics_ctx.h - the state of one `trainwatch stats` computation
 * (job_statistics.c reads the folder into it; job_statistics_summary.c
 * turns it into the tw_statistics). Not a public interface. Everything
 * is owned by the context and freed with it (job_statistics.c).
 */
#ifndef TW_JOB_STATISTICS_CTX_H
#define TW_JOB_STATISTICS_CTX_H

#include <stddef.h>
#include <stdint.h>

#include "job_statistics_internal.h"
#include "strmap.h"

/* Strings interned to small indexes; the map owns the copies. */
typedef struct interned {
    tw_strmap map;
    const char **str;
    size_t n, cap;
} interned;

/* A Step:ModeKeys.* event as pass 1 keeps it. */
typedef struct step_event {
    int64_t start_us, end_us, step;
    uint32_t name, node;
    int has_step;
    int train; /* TRAIN or GLOBAL */
} step_event;

/* The (type, metric, node, device name) of a series. */
typedef struct series_key {
    uint32_t type, metric, node;
    int usage; /* CPUUtilization or GPUUtilization: counted in buckets */
} series_key;

typedef struct sample_rec {
    int64_t ts_us;
    double value;
    uint32_t key; /* index into keys */
} sample_rec;

/* An event group's span within one step. */
typedef struct group_step {
    uint32_t group;
    int64_t start_us, end_us;
} group_step;

/* A GPU of a node, a row of the utilization heat map. */
typedef struct heat_key {
    uint32_t node, gpu; /* interned */
} heat_key;

typedef struct stats_ctx {
    const tw_stats_opts *o;
    interned str;
    step_event *steps;
    size_t nsteps, cap_steps;
    /* per node (index = node string), TRAIN/GLOBAL steps with a step
     * number sorted by start: offsets into train_sorted */
    step_event *train_sorted;
    size_t ntrain;
    size_t *node_first, *node_count;
    size_t nnode_slots;

    int has_sel;
    int64_t from_us, to_us;

    series_key *keys;
    size_t nkeys, cap_keys;
    tw_strmap key_map; /* "type\x1fmetric\x1fnode" -> keys index */
    sample_rec *samples;
    size_t nsamples, cap_samples;

    /* GPUUtilization samples per (node, GPU) for the heat map */
    heat_key *heat_keys;
    size_t nheat_keys, cap_heat_keys;
    tw_strmap heat_map; /* "node\x1fgpu" -> heat_keys index */
    sample_rec *heat;   /* key: index into heat_keys */
    size_t nheat, cap_heat;

    tw_strmap gs_map; /* "group\x1fstep" -> gsteps index */
    group_step *gsteps;
    size_t ngsteps, cap_gsteps;

    int has_ev;
    int64_t ev_min_us, ev_max_us;
    uint64_t selected_events;
    int oom;
} stats_ctx;

/* Within the selection (always, without one). */
static inline int tw_stats_in_selection(const stats_ctx *c, int64_t from,
                                        int64_t to)
{
    return !c->has_sel || (from >= c->from_us && to <= c->to_us);
}

/* The summaries, in this order (job_statistics_summary.c); each TW_ERR on
 * out-of-memory. s->start_us/end_us/has_job must be set first. */
int tw_stats_phase_intervals(stats_ctx *c, tw_statistics *s);
int tw_stats_step_statistics(const stats_ctx *c, tw_statistics *s);
int tw_stats_utilization(const stats_ctx *c, tw_statistics *s, int per_phase);
int tw_stats_usage_buckets(const stats_ctx *c, tw_statistics *s);
/* job_statistics_heatmap.c */
int tw_stats_heatmap(const stats_ctx *c, tw_statistics *s);

#endif /* TW_JOB_STATISTICS_CTX_H */
