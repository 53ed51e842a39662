/*
 * reader_internal.h - what the parts of the agent-file reader (reader.c,
 * reader_system.c, reader_trace.c) share. Not a public interface.
 */
#ifndef TW_READER_INTERNAL_H
#define TW_READER_INTERNAL_H

#include "reader.h"

/* One tw_folder_read_file() call. Nothing here is owned by the context. */
typedef struct tw_read_ctx {
    const tw_agent_file *file;
    const char *job;
    tw_batch_sink_fn sink;
    void *sink_ud;
    tw_reader_error_fn on_error;
    void *err_ud;
    tw_reader_stats *stats; /* never NULL inside the reader */
} tw_read_ctx;

/* Reports through on_error (if any); the message is formatted. */
void tw_reader_report(const tw_read_ctx *c, uint64_t line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A new batch stamped with the file's job, node, file_ts_us and path.
 * NULL on out-of-memory. */
tw_batch *tw_reader_batch_new(const tw_read_ctx *c, const char *node,
                              size_t node_len);

/* Hands b to the sink (which owns it from then on). */
int tw_reader_emit(const tw_read_ctx *c, tw_batch *b);

int tw_reader_read_system(const tw_read_ctx *c);
int tw_reader_read_trace(const tw_read_ctx *c, tw_trace_state *ts);

/* What one pass over a PyTorch profiler trace finds before it is read
 * (reader_trace.c reads, reader_torch.c interprets). */
typedef struct tw_torch_survey {
    int object_form; /* {"traceEvents": [...], ...} (Kineto) */
    int has_base;    /* a "baseTimeNanoseconds" number member */
    int64_t base_ns;
    int has_rank; /* "distributedInfo": {"rank": R, ...} */
    int64_t rank;
    int has_devices;   /* a "deviceProperties" member */
    uint64_t nevents;  /* timed X events (min/max below valid when > 0) */
    int64_t min_ts_us; /* raw, as written (rounded) */
    int64_t max_end_us;
} tw_torch_survey;

/* Reads path once without keeping events: fills *out. Bad or unreadable
 * content only leaves fields unset (the read reports it). TW_ERR on
 * out-of-memory. */
int tw_trace_survey(const char *path, tw_torch_survey *out);

/* reader_torch.c: the survey's per-event and per-member parts, and the
 * mapping of torch events to the rules' names and phases. */
struct tw_json_event;
struct tw_json_parser;
void tw_torch_survey_event(tw_torch_survey *s, const struct tw_json_event *ev);
void tw_torch_survey_member(tw_torch_survey *s, struct tw_json_parser *jp,
                            const char *key, size_t keylen, const char *val,
                            size_t vlen, size_t cap);
/* "ProfilerStep#N": 1 and N's digits; 0 for any other name. */
int tw_torch_step(const char *name, size_t len, const char **digits,
                  size_t *ndigits);
/* 1 for X events that are neither step, operator nor kernel: the
 * profiler's own span (cat "Trace"), GPU copies of annotations. */
int tw_torch_ignored(const struct tw_json_event *ev);
/* The phase of another X event (cpu_functions, gpu_functions-dev:<n>)
 * into buf. */
void tw_torch_phase(const struct tw_json_event *ev, char *buf, size_t n);

/* Lists a torch trace: surveys it, finds its anchor (tw_torch_anchor),
 * file_ts_us (the absolute end of its newest event; 0 without events) and
 * node ("rank-R" from distributedInfo, else base up to its first '.').
 * TW_ERR on out-of-memory. */
int tw_torch_describe(tw_agent_file *af, const char *base);
/* tw_folder_anchor_traces for one file. */
void tw_torch_anchor_at(tw_agent_file *af, int64_t start_us);
/* Absolute start of the file's oldest event; 0 when it has none. */
int64_t tw_torch_first_us(const tw_agent_file *af);

/* Longest line / event the readers buffer (bytes). */
#define TW_READER_MAX_RECORD (64u << 20)

#endif /* TW_READER_INTERNAL_H */
