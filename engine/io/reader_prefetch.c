/* reader_prefetch.c - files of a listing read ahead on worker threads, fed
 * in listing order (reader_prefetch.h). */
#include "reader_prefetch.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "tw_assert.h"

/* One bad-input report, kept until the consumer replays it. */
typedef struct tw_prefetch_report {
    uint64_t line;
    char *reason;
} tw_prefetch_report;

typedef enum tw_slot_state {
    TW_SLOT_WAITING = 0, /* not claimed by a worker yet */
    TW_SLOT_READING,
    TW_SLOT_READ,
    TW_SLOT_FED
} tw_slot_state;

/* What the read of one file gave. Written by the worker that claimed it,
 * then (after TW_SLOT_READ, under the lock) only by the consumer. */
typedef struct tw_prefetch_slot {
    tw_slot_state state;
    tw_batch **batches;
    size_t nbatches, batches_cap;
    tw_prefetch_report *reports;
    size_t nreports, reports_cap;
    tw_reader_stats stats;
    int failed; /* out of memory while reading or keeping */
    /* the framework file listed before this one (SIZE_MAX: none): trace
     * state passes from file to file in listing order */
    size_t prev_trace;
} tw_prefetch_slot;

struct tw_prefetch {
    const tw_folder *folder;
    char *job;
    tw_trace_state *trace_state;
    tw_prefetch_slot *slots;
    size_t window;
    pthread_mutex_t lock;
    pthread_cond_t work;  /* a file may be claimed, or stop */
    pthread_cond_t ready; /* a file was read */
    size_t next;          /* no file below it is left to claim */
    size_t fed;           /* files handed to the consumer */
    int stop;
    pthread_t *threads;
    unsigned nthreads;
};

static void slot_clear(tw_prefetch_slot *s)
{
    for (size_t i = 0; i < s->nbatches; i++)
        tw_batch_free(s->batches[i]);
    for (size_t i = 0; i < s->nreports; i++)
        free(s->reports[i].reason);
    free(s->batches);
    free(s->reports);
    s->batches = NULL;
    s->reports = NULL;
    s->nbatches = s->nreports = 0;
}

static int keep_batch(void *ud, tw_batch *b)
{
    tw_prefetch_slot *s = ud;
    if (tw_grow((void **)&s->batches, &s->batches_cap, s->nbatches + 1,
                sizeof(*s->batches), 16) != TW_OK) {
        tw_batch_free(b);
        s->failed = 1;
        return TW_ERR;
    }
    s->batches[s->nbatches++] = b;
    return TW_OK;
}

static void keep_report(void *ud, const char *path, uint64_t line,
                        const char *reason)
{
    (void)path; /* always the slot's file */
    tw_prefetch_slot *s = ud;
    char *copy = strdup(reason);
    if (copy == NULL ||
        tw_grow((void **)&s->reports, &s->reports_cap, s->nreports + 1,
                sizeof(*s->reports), 8) != TW_OK) {
        free(copy);
        s->failed = 1;
        return;
    }
    s->reports[s->nreports].line = line;
    s->reports[s->nreports].reason = copy;
    s->nreports++;
}

/* Under the lock: the index of the next file this worker may read, or
 * SIZE_MAX when it should end. That is the first file of the window not
 * claimed yet that can be read now: a system file, or a trace file whose
 * trace file before it is read (trace state passes from file to file in
 * listing order). A trace file waiting for the one before it so no longer
 * holds up the system files behind it. */
static size_t claim(tw_prefetch *p)
{
    for (;;) {
        while (p->next < p->folder->nfiles &&
               p->slots[p->next].state != TW_SLOT_WAITING)
            p->next++;
        if (p->stop || p->next >= p->folder->nfiles)
            return SIZE_MAX;
        size_t end = p->fed + p->window;
        if (end > p->folder->nfiles)
            end = p->folder->nfiles;
        for (size_t i = p->next; i < end; i++) {
            tw_prefetch_slot *s = &p->slots[i];
            if (s->state != TW_SLOT_WAITING)
                continue;
            size_t prev = s->prev_trace;
            if (prev != SIZE_MAX && p->slots[prev].state != TW_SLOT_READ &&
                p->slots[prev].state != TW_SLOT_FED)
                continue;
            s->state = TW_SLOT_READING;
            return i;
        }
        /* the window is claimed, or its first trace file waits for the
         * one before it: a read or a feed wakes us */
        pthread_cond_wait(&p->work, &p->lock);
    }
}

static void *worker(void *arg)
{
    tw_prefetch *p = arg;
    pthread_mutex_lock(&p->lock);
    for (size_t i; (i = claim(p)) != SIZE_MAX;) {
        pthread_mutex_unlock(&p->lock);
        tw_prefetch_slot *s = &p->slots[i];
        if (tw_folder_read_file(&p->folder->files[i], p->job, p->trace_state,
                                keep_batch, s, keep_report, s,
                                &s->stats) != TW_OK)
            s->failed = 1;
        pthread_mutex_lock(&p->lock);
        s->state = TW_SLOT_READ;
        pthread_cond_broadcast(&p->ready);
        pthread_cond_broadcast(&p->work); /* may unblock a trace file */
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

static void stop_workers(tw_prefetch *p)
{
    pthread_mutex_lock(&p->lock);
    p->stop = 1;
    pthread_cond_broadcast(&p->work);
    pthread_cond_broadcast(&p->ready);
    pthread_mutex_unlock(&p->lock);
    for (unsigned t = 0; t < p->nthreads; t++)
        pthread_join(p->threads[t], NULL);
    p->nthreads = 0;
}

void tw_prefetch_free(tw_prefetch *p)
{
    if (p == NULL)
        return;
    stop_workers(p);
    for (size_t i = 0; p->slots != NULL && i < p->folder->nfiles; i++)
        slot_clear(&p->slots[i]);
    pthread_cond_destroy(&p->ready);
    pthread_cond_destroy(&p->work);
    pthread_mutex_destroy(&p->lock);
    tw_trace_state_free(p->trace_state);
    free(p->threads);
    free(p->slots);
    free(p->job);
    free(p);
}

int tw_prefetch_start(const tw_folder *folder, const char *job,
                      unsigned nthreads, size_t window, tw_prefetch **out,
                      char *err, size_t errlen)
{
    TW_ASSERT(nthreads >= 1 && window >= 1);
    *out = NULL;
    tw_prefetch *p = calloc(1, sizeof(*p));
    if (p == NULL) {
        snprintf(err, errlen, "read-ahead: out of memory");
        return TW_ERR;
    }
    p->folder = folder;
    p->window = window;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->work, NULL);
    pthread_cond_init(&p->ready, NULL);
    p->slots =
        calloc(folder->nfiles > 0 ? folder->nfiles : 1, sizeof(*p->slots));
    p->threads = calloc(nthreads, sizeof(*p->threads));
    p->trace_state = tw_trace_state_new();
    p->job = job != NULL ? strdup(job) : NULL;
    if (p->slots == NULL || p->threads == NULL || p->trace_state == NULL ||
        (job != NULL && p->job == NULL)) {
        snprintf(err, errlen, "read-ahead: out of memory");
        tw_prefetch_free(p);
        return TW_ERR;
    }
    size_t prev = SIZE_MAX;
    for (size_t i = 0; i < folder->nfiles; i++) {
        p->slots[i].prev_trace = SIZE_MAX;
        if (folder->files[i].kind == TW_FILE_SYSTEM)
            continue;
        p->slots[i].prev_trace = prev;
        prev = i;
    }
    for (unsigned t = 0; t < nthreads; t++) {
        int rc = pthread_create(&p->threads[t], NULL, worker, p);
        if (rc != 0) {
            snprintf(err, errlen,
                     "read-ahead: cannot start thread %u of %u: %s", t + 1,
                     nthreads, strerror(rc));
            tw_prefetch_free(p);
            return TW_ERR;
        }
        p->nthreads = t + 1;
    }
    *out = p;
    return TW_OK;
}

int tw_prefetch_feed(tw_prefetch *p, size_t i, tw_batch_sink_fn sink, void *ud,
                     tw_reader_error_fn on_error, void *err_ud,
                     tw_reader_stats *stats)
{
    TW_ASSERT(i == p->fed && i < p->folder->nfiles);
    tw_prefetch_slot *s = &p->slots[i];
    pthread_mutex_lock(&p->lock);
    while (s->state != TW_SLOT_READ)
        pthread_cond_wait(&p->ready, &p->lock);
    s->state = TW_SLOT_FED;
    pthread_mutex_unlock(&p->lock);

    const char *path = p->folder->files[i].path;
    for (size_t k = 0; on_error != NULL && k < s->nreports; k++)
        on_error(err_ud, path, s->reports[k].line, s->reports[k].reason);
    stats->files += s->stats.files;
    stats->bad_files += s->stats.bad_files;
    stats->lines += s->stats.lines;
    stats->bad_lines += s->stats.bad_lines;
    stats->samples += s->stats.samples;
    stats->events += s->stats.events;
    stats->bytes += s->stats.bytes;
    stats->incomplete_files += s->stats.incomplete_files;
    int rc = s->failed ? TW_ERR : TW_OK;
    size_t k = 0;
    for (; rc == TW_OK && k < s->nbatches; k++) {
        tw_batch *b = s->batches[k];
        s->batches[k] = NULL; /* the sink owns it now */
        rc = sink(ud, b);
    }
    for (; k < s->nbatches; k++)
        tw_batch_free(s->batches[k]);
    s->nbatches = 0;
    slot_clear(s);

    pthread_mutex_lock(&p->lock);
    p->fed = i + 1;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->lock);
    return rc;
}
