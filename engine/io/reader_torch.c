/* reader_torch.c - PyTorch profiler traces (torch.profiler /
 * export_chrome_trace, reader.h): what the survey pass keeps, how a file's
 * ts become absolute time, and how its events map onto the names and
 * phases the rules consume (RULES.md §1.3). The scanning itself is
 * reader_trace.c's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "reader_internal.h"
#include "reader_json.h"

/* ts at or above this are µs since the epoch (2001-09-09), not relative
 * to a profiler start: older Kineto builds write them so. */
#define TW_TORCH_EPOCH_MIN_US 1000000000000000LL

static int tw_torch_str_is(tw_json_str s, const char *lit)
{
    size_t n = strlen(lit);
    return s.ptr != NULL && s.len == n && memcmp(s.ptr, lit, n) == 0;
}

void tw_torch_survey_event(tw_torch_survey *s, const tw_json_event *ev)
{
    if (!tw_torch_str_is(ev->ph, "X") || !ev->ts.present || !ev->dur.present ||
        tw_torch_ignored(ev))
        return;
    double ts = ev->ts.d, end = ev->ts.d + ev->dur.d;
    if (!(ts > -9.0e18 && ts < 9.0e18 && end > -9.0e18 && end < 9.0e18))
        return;
    int64_t a = llround(ts), b = llround(end);
    if (s->nevents == 0 || a < s->min_ts_us)
        s->min_ts_us = a;
    if (s->nevents == 0 || b > s->max_end_us)
        s->max_end_us = b;
    s->nevents++;
}

void tw_torch_survey_member(tw_torch_survey *s, tw_json_parser *jp,
                            const char *key, size_t keylen, const char *val,
                            size_t vlen, size_t cap)
{
    tw_json_str k = {key, keylen};
    if (tw_torch_str_is(k, "deviceProperties")) {
        s->has_devices = 1;
    } else if (tw_torch_str_is(k, "baseTimeNanoseconds")) {
        char buf[32];
        if (vlen == 0 || vlen >= sizeof(buf))
            return;
        memcpy(buf, val, vlen);
        buf[vlen] = '\0';
        char *end = NULL;
        long long x = strtoll(buf, &end, 10);
        if (*end == '\0' && x >= 0) {
            s->has_base = 1;
            s->base_ns = x;
        }
    } else if (tw_torch_str_is(k, "distributedInfo")) {
        int64_t rank = 0;
        if (tw_json_object_int(jp, val, vlen, cap, "rank", &rank) &&
            rank >= 0) {
            s->has_rank = 1;
            s->rank = rank;
        }
    }
}

int tw_torch_step(const char *name, size_t len, const char **digits,
                  size_t *ndigits)
{
    static const char prefix[] = "ProfilerStep#";
    size_t p = sizeof(prefix) - 1;
    if (len <= p || len > p + 18 || memcmp(name, prefix, p) != 0)
        return 0;
    for (size_t i = p; i < len; i++)
        if (name[i] < '0' || name[i] > '9')
            return 0;
    *digits = name + p;
    *ndigits = len - p;
    return 1;
}

/* Kineto categories of events that run on a device. */
static int tw_torch_on_device(const tw_json_event *ev)
{
    static const char *const gpu_cats[] = {"kernel", "gpu_memcpy",
                                           "gpu_memset"};
    for (size_t i = 0; i < sizeof(gpu_cats) / sizeof(*gpu_cats); i++)
        if (tw_torch_str_is(ev->cat, gpu_cats[i]))
            return 1;
    /* export_chrome_trace without Kineto: pid "CUDA functions" */
    return tw_torch_str_is(ev->pid_str, "CUDA functions");
}

int tw_torch_ignored(const tw_json_event *ev)
{
    /* the profiler's own span over the whole trace, and the device-side
     * copies of annotations (a GPU "ProfilerStep#N" would be a second
     * step N; its kernels are events of their own) */
    return tw_torch_str_is(ev->cat, "Trace") ||
           tw_torch_str_is(ev->cat, "gpu_user_annotation");
}

void tw_torch_phase(const tw_json_event *ev, char *buf, size_t n)
{
    if (!tw_torch_on_device(ev)) {
        snprintf(buf, n, "cpu_functions");
        return;
    }
    /* Kineto: args.device; else the pid, which Kineto sets to the device */
    long long dev = ev->has_pid ? (long long)ev->pid : 0;
    for (size_t i = 0; ev->has_args && i < ev->nargs; i++) {
        const tw_json_arg *a = &ev->args[i];
        if (tw_torch_str_is(a->key, "device") && a->kind == TW_ARG_NUMBER &&
            a->value.len < 20) {
            char num[24];
            memcpy(num, a->value.ptr, a->value.len);
            num[a->value.len] = '\0';
            dev = strtoll(num, NULL, 10);
        }
    }
    snprintf(buf, n, "gpu_functions-dev:%lld", dev);
}

/* offset + raw, 0 when it does not fit (the file then has no timestamp). */
static int64_t tw_torch_abs(int64_t offset, int64_t raw)
{
    int64_t t;
    return __builtin_add_overflow(offset, raw, &t) ? 0 : t;
}

static void tw_torch_set_ts(tw_agent_file *af, const tw_torch_survey *s)
{
    af->file_ts_us =
        s == NULL || s->nevents > 0
            ? tw_torch_abs(af->torch_offset_us, af->torch_max_end_us)
            : 0;
}

int tw_torch_describe(tw_agent_file *af, const char *base)
{
    tw_torch_survey s;
    if (tw_trace_survey(af->path, &s) != TW_OK)
        return TW_ERR;
    struct stat st;
    if (stat(af->path, &st) == 0)
        af->torch_mtime_us =
            (int64_t)st.st_mtim.tv_sec * 1000000 + st.st_mtim.tv_nsec / 1000;
    af->kind = TW_FILE_FRAMEWORK;
    af->source = TW_SOURCE_PYTHONTIMELINE;
    af->torch = 1;
    af->torch_min_ts_us = s.min_ts_us;
    af->torch_max_end_us = s.max_end_us;
    if (s.has_base) {
        af->torch_anchor = TW_TORCH_BASE;
        af->torch_offset_us = s.base_ns / 1000;
    } else if (s.nevents > 0 && s.min_ts_us >= TW_TORCH_EPOCH_MIN_US) {
        af->torch_anchor = TW_TORCH_EPOCH;
        af->torch_offset_us = 0;
    } else {
        af->torch_anchor = TW_TORCH_MTIME;
        af->torch_offset_us = tw_torch_abs(af->torch_mtime_us, -s.max_end_us);
    }
    if (s.nevents > 0)
        tw_torch_set_ts(af, &s);
    char node[256];
    if (s.has_rank) {
        snprintf(node, sizeof(node), "rank-%lld", (long long)s.rank);
    } else {
        size_t n = strcspn(base, ".");
        snprintf(node, sizeof(node), "%.*s", (int)(n < 200 ? n : 200), base);
    }
    free(af->node);
    af->node = strdup(node);
    return af->node == NULL ? TW_ERR : TW_OK;
}

void tw_torch_anchor_at(tw_agent_file *af, int64_t start_us)
{
    if (!af->torch || (af->torch_anchor != TW_TORCH_MTIME &&
                       af->torch_anchor != TW_TORCH_GIVEN))
        return;
    af->torch_anchor = TW_TORCH_GIVEN;
    af->torch_offset_us = start_us;
    if (af->file_ts_us != 0)
        tw_torch_set_ts(af, NULL);
}

int64_t tw_torch_first_us(const tw_agent_file *af)
{
    return af->file_ts_us == 0
               ? 0
               : tw_torch_abs(af->torch_offset_us, af->torch_min_ts_us);
}
