/* reader.c - tw_folder_read_file() (reader.h): dispatch to the system-lines
 * or trace reader, and what both share. */
#include "reader.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "reader_internal.h"

void tw_reader_report(const tw_read_ctx *c, uint64_t line, const char *fmt, ...)
{
    if (c->on_error == NULL)
        return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    c->on_error(c->err_ud, c->file->path, line, msg);
}

tw_batch *tw_reader_batch_new(const tw_read_ctx *c, const char *node,
                              size_t node_len)
{
    tw_batch *b = tw_batch_new();
    if (b == NULL)
        return NULL;
    b->job = tw_arena_strdup(&b->arena, c->job);
    b->node = tw_arena_strndup(&b->arena, node, node_len);
    b->file_path = tw_arena_strdup(&b->arena, c->file->path);
    b->file_ts_us = c->file->file_ts_us;
    if ((c->job != NULL && b->job == NULL) || b->node == NULL ||
        b->file_path == NULL) {
        tw_batch_free(b);
        return NULL;
    }
    return b;
}

int tw_reader_emit(const tw_read_ctx *c, tw_batch *b)
{
    c->stats->samples += b->nsamples;
    c->stats->events += b->nevents;
    return c->sink(c->sink_ud, b);
}

int tw_folder_read_file(const tw_agent_file *file, const char *job,
                        tw_trace_state *ts, tw_batch_sink_fn sink, void *ud,
                        tw_reader_error_fn on_error, void *err_ud,
                        tw_reader_stats *stats)
{
    tw_reader_stats scratch;
    if (stats == NULL) {
        memset(&scratch, 0, sizeof(scratch));
        stats = &scratch;
    }
    tw_read_ctx c = {file, job, sink, ud, on_error, err_ud, stats};
    stats->files++;
    if (file->kind == TW_FILE_SYSTEM)
        return tw_reader_read_system(&c);
    return tw_reader_read_trace(&c, ts);
}
