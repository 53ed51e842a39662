/* folder_pass.c - one reading pass over a folder (folder_pass.h). */
#include "folder_pass.h"

#include <stdio.h>
#include <string.h>

typedef struct pass_errors {
    const char *what;
    int quiet;
    uint64_t reported;
} pass_errors;

#define TW_PASS_MAX_MESSAGES 20

static void on_bad_input(void *ud, const char *path, uint64_t line,
                         const char *reason)
{
    pass_errors *e = ud;
    e->reported++;
    if (e->quiet || e->reported > TW_PASS_MAX_MESSAGES + 1)
        return;
    if (e->reported == TW_PASS_MAX_MESSAGES + 1) {
        fprintf(stderr, "%s: more bad input; only counted from here\n",
                e->what);
        return;
    }
    if (line > 0)
        fprintf(stderr, "%s: %s:%llu: %s\n", e->what, path,
                (unsigned long long)line, reason);
    else
        fprintf(stderr, "%s: %s: %s\n", e->what, path, reason);
}

int tw_folder_pass(const tw_folder *folder, unsigned kinds, const char *what,
                   int quiet, tw_batch_sink_fn sink, void *ud,
                   tw_reader_stats *stats, char *err, size_t errlen)
{
    tw_trace_state *ts = tw_trace_state_new();
    if (ts == NULL) {
        snprintf(err, errlen, "out of memory (trace state)");
        return TW_ERR;
    }
    pass_errors pe = {what, quiet, 0};
    int rc = TW_OK;
    for (size_t i = 0; i < folder->nfiles && rc == TW_OK; i++) {
        const tw_agent_file *f = &folder->files[i];
        unsigned kind =
            f->kind == TW_FILE_SYSTEM ? TW_PASS_SYSTEM : TW_PASS_FRAMEWORK;
        if ((kinds & kind) == 0)
            continue;
        if (tw_folder_read_file(f, NULL, ts, sink, ud, on_bad_input, &pe,
                                stats) != TW_OK) {
            snprintf(err, errlen, "reading %s failed (out of memory?)",
                     f->path);
            rc = TW_ERR;
        }
    }
    tw_trace_state_free(ts);
    return rc;
}
