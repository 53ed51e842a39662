/*
 * io_bottleneck.c - IOBottleneck (RULES.md §3.3): moments (20 ms snapshots)
 * where a GPU's utilisation is below gpu_threshold while a core's I/O wait is
 * above io_threshold; fires when such snapshots exceed `threshold` % of all
 * snapshots (once there are more than `patience`). On firing, the
 * framework events around each new bottleneck instant are aggregated
 * (RULES.md §4) into Details.
 *
 * The logic is shared with the other bottleneck rule in
 * rules/common/bottleneck.c; see bottleneck.h for the details of state,
 * memory and semantics. In short:
 *  - same in both semantics: snapshots over the stream in reference order
 *    (cross-node snapshots, quirk 1), boundary double counting (2),
 *    patience in snapshots (3), whole-history ratio (4), the reset of the
 *    bottleneck count at 10^6 entries keeping the denominator (5), the
 *    "else if" (a GPU sample is never tested as a high sample),
 *    and the misleading "CPUs" key of each entry (reproduced: the notebook
 *    reads it);
 *  - different: Details["bottlenecks"] holds every entry in `reference`
 *    and the newest max_report_entries (default 10 000) in `fixed`
 *    (quirk 6; Violations is the true count in both); the §4 ratio is
 *    swapped in `reference` and correctly paired in `fixed`.
 *
 * Memory (fixed): ~200 B + 16 B x max_report_entries (160 KB by default)
 * + per-scan anchor maps (~40 B per snapshot of the current scan) + the
 * §4 buffer (vocabulary of phases and operator names); independent of
 * nodes N, GPUs G, cores C and the job's length. Reference: ~56 B per
 * bottleneck in history (<= 10^6).
 */
#include "bottleneck.h"
#include "trainwatch/plugin.h"

static const tw_param_spec params[TW_BNECK_P_COUNT] = TW_BNECK_PARAMS_INIT(
    "io_threshold", "50", "% - a core's I/O wait sample above this is high");

static const tw_bneck_kind kind = {"IOBottleneck", TW_METRIC_CPU_IOWAIT,
                                   "io_threshold"};

static int create(const tw_host *host, const tw_params *p, void **state,
                  char *err, size_t errlen)
{
    return tw_bneck_create(&kind, host, p, state, err, errlen);
}

static const tw_rule_descriptor descriptor = {
    TW_PLUGIN_ABI_VERSION,
    "IOBottleneck",
    "GPU utilisation low while I/O wait is high in more than threshold % of "
    "the system snapshots",
    params,
    TW_BNECK_P_COUNT,
    create,
    tw_bneck_scan,
    NULL, /* report: ABI 1 only */
    tw_bneck_save,
    tw_bneck_restore,
    tw_bneck_destroy,
    0,
    tw_bneck_finding,
    "The GPUs wait for storage: in many moments a GPU was nearly idle while "
    "cores were blocked on I/O. Stage the data on local NVMe or in memory, "
    "read a few large sequential shards instead of many small files, and "
    "read ahead with parallel reads or prefetching.",
    tw_bneck_details,
    tw_bneck_parameters_text,
};

TW_PLUGIN_EXPORT const tw_rule_descriptor *trainwatch_rule(void)
{
    return &descriptor;
}

/* What "its input arrived" means for this rule (plugin.h). */
TW_PLUGIN_EXPORT uint32_t trainwatch_rule_inputs(void)
{
    return TW_INPUT_SYSTEM;
}
