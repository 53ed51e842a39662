/*
 * fwagg.h - the shared framework-metrics aggregation of RULES.md §4
 * (`aggregate_framework_metrics` + `filter_events`), used by CPUBottleneck,
 * IOBottleneck (instant selector, one call per bottleneck snapshot) and
 * StepOutlier (interval selector, one call per outlier step).
 *
 * State: the persistent buffer of seven insertion-ordered µs-total maps
 * (cpu_ops[phase][name], gpu_ops[phase][name], step_phases[phase],
 * forward[name], backward[name], general[phase], horovod[name]). It is
 * never cleared; every call adds each selected event once, so an event
 * that overlaps several instants/steps is added several times (reproduced
 * in both semantics).
 *
 * Classification of a selected event (first match wins, §3.11 as modified
 * by §4): phase lower-cased contains "cpu" -> cpu_ops; contains "gpu" ->
 * gpu_ops; phase contains "Step" -> step_phases (no "others"); phase ==
 * "Forward-SubModuleInternal" -> forward; == "Backward-SubModuleInternal"
 * -> backward; phase has neither ":CPU" nor ":GPU" and the source is not
 * Horovod -> general[phase]; Horovod (file_type "") -> horovod[name].
 *
 * Derived Details keys. The reference recomputes them into the rule's
 * Details after every call; they are a pure function of the buffer, so
 * here a call only records (in the rule's tw_keyorder) which keys the
 * reference would have set, in the order it sets them, and report() writes
 * their values from the buffer:
 *   ratio            always (after the first call)
 *   CPU, CPU_total   once there is a CPU phase
 *   GPU, GPU_total   once there is a GPU phase
 *   phase            always; phase_time always (always {})
 *   general          once non-empty
 *   forward_backward once forward and backward are both non-empty
 *   horovod          once non-empty
 * A key whose total is zero (division by zero in the reference) is not
 * set by that call; if written later while its total is still zero it is
 * written as {}.
 *
 * Semantics: `reference` pairs the ratio labels (CPU phases then GPU
 * phases) with the totals in the swapped order (GPU then CPU), the §4
 * quirk; `fixed` pairs each label with its own total (same label order).
 * Everything else is identical in both.
 *
 * Numbers: totals are int64 µs (Python ints); shares are
 * (double)part / (double)sum * 100.0 with integer sums, and the
 * re-normalisation of filter_events sums the kept shares left to right
 * (Python's built-in sum before 3.12).
 *
 * Memory: tw_fwagg_memory(); bounded by the vocabulary of phases and
 * operator names (~40 bytes + the name per distinct (phase, name)), never
 * by the number of events or calls.
 *
 * Ownership: tw_fwagg is embedded by the rule (init/free); events passed
 * to the add functions are borrowed for the call only.
 */
#ifndef TW_RULES_FWAGG_H
#define TW_RULES_FWAGG_H

#include <stddef.h>
#include <stdint.h>

#include "trainwatch/plugin.h"
#include "trainwatch/ser.h"
#include "trainwatch/smap.h"

/* ---- Details key order -------------------------------------------------
 * The reference's Details is a dict: a key keeps the position of its first
 * assignment. A rule notes each of its own keys (ids 0 .. 31) when the
 * reference would first assign it; fwagg notes its keys (TW_FWKEY_*) the
 * same way. report() then walks the order (tw_fwagg_write_details). */
#define TW_KEYORDER_MAX 48

typedef struct tw_keyorder {
    uint8_t n;
    uint8_t id[TW_KEYORDER_MAX];
} tw_keyorder;

void tw_keyorder_init(tw_keyorder *ko);
/* Appends `id` (< 256) unless already present. */
void tw_keyorder_note(tw_keyorder *ko, unsigned id);
int tw_keyorder_has(const tw_keyorder *ko, unsigned id);
void tw_keyorder_save(const tw_keyorder *ko, tw_ser *s);
int tw_keyorder_restore(tw_keyorder *ko, tw_deser *d);

/* Ids of the derived keys; rule-owned ids must be < TW_FWKEY_FIRST. */
enum {
    TW_FWKEY_FIRST = 32,
    TW_FWKEY_RATIO = TW_FWKEY_FIRST, /* "ratio"            */
    TW_FWKEY_CPU,                    /* "CPU"              */
    TW_FWKEY_CPU_TOTAL,              /* "CPU_total"        */
    TW_FWKEY_GPU,                    /* "GPU"              */
    TW_FWKEY_GPU_TOTAL,              /* "GPU_total"        */
    TW_FWKEY_PHASE,                  /* "phase"            */
    TW_FWKEY_PHASE_TIME,             /* "phase_time"       */
    TW_FWKEY_GENERAL,                /* "general"          */
    TW_FWKEY_FORWARD_BACKWARD,       /* "forward_backward" */
    TW_FWKEY_HOROVOD,                /* "horovod"          */
    TW_FWKEY_END
};

typedef struct tw_fwagg {
    tw_semantics semantics;
    tw_smap cpu_ops; /* phase -> name -> µs */
    tw_smap gpu_ops; /* phase -> name -> µs */
    tw_smap step_phases;
    tw_smap forward;
    tw_smap backward;
    tw_smap general;
    tw_smap horovod;
} tw_fwagg;

void tw_fwagg_init(tw_fwagg *a, tw_semantics semantics);
void tw_fwagg_free(tw_fwagg *a);

/* Instant selector: events with start_us < begin_us < end_us (strict;
 * begin_us is the reference's double `anchor*1000*1000`). Notes the
 * derived keys in `ko`. TW_OK, or TW_ERR when memory runs out. */
int tw_fwagg_instant(tw_fwagg *a, const tw_fw_event *ev, size_t n,
                     double begin_us, tw_keyorder *ko);
/* Interval selector: events with end_us >= begin_us and start_us <= end_us
 * (inclusive). */
/* tw_fwagg_instant for each of begin_us[0..nb) in turn, with the same
 * result (sums and key order), in O(n log nb + matches) instead of
 * O(n * nb): bottleneck rules aggregate at every bottleneck instant. */
int tw_fwagg_instants(tw_fwagg *a, const tw_fw_event *ev, size_t n,
                      const double *begin_us, size_t nb, tw_keyorder *ko);
int tw_fwagg_interval(tw_fwagg *a, const tw_fw_event *ev, size_t n,
                      int64_t begin_us, int64_t end_us, tw_keyorder *ko);

/* Writes `"<key>": {...}` for a derived key id. TW_ERR for another id. */
int tw_fwagg_write_key(const tw_fwagg *a, unsigned id, const tw_host *h,
                       tw_json *j);

/* Writes every key of `ko` in order, inside an object the caller opened:
 * derived keys by fwagg (a may be NULL only if ko holds none), the rule's
 * own ids through `own(ctx, id, j)`, which writes key and value. */
typedef void (*tw_details_own_fn)(void *ctx, unsigned id, tw_json *j);
void tw_fwagg_write_details(const tw_fwagg *a, const tw_keyorder *ko,
                            const tw_host *h, tw_json *j, tw_details_own_fn own,
                            void *ctx);

size_t tw_fwagg_memory(const tw_fwagg *a);
void tw_fwagg_save(const tw_fwagg *a, tw_ser *s);
int tw_fwagg_restore(tw_fwagg *a, tw_deser *d);

#endif /* TW_RULES_FWAGG_H */
