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

/* Longest line / event the readers buffer (bytes). */
#define TW_READER_MAX_RECORD (64u << 20)

#endif /* TW_READER_INTERNAL_H */
