/* job_loss.c - a job's record of missing input (job_loss.h). */
#include "job_loss.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "log.h"

void tw_job_loss_init(tw_job_loss *l)
{
    memset(l, 0, sizeof(*l));
}

void tw_job_loss_free(tw_job_loss *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->ranges[i].where);
    free(l->ranges);
    tw_job_loss_init(l);
}

const char *tw_loss_kind_name(tw_loss_kind k)
{
    switch (k) {
    case TW_LOSS_SEQ:
        return "sequence_gap";
    case TW_LOSS_OFFSETS:
        return "offsets_lost";
    case TW_LOSS_JOINED:
        return "joined_mid_stream";
    }
    return "unknown";
}

static int tw_job_loss_keep(tw_job_loss *l, tw_loss_kind kind,
                            const char *where, size_t wlen, uint64_t from,
                            uint64_t to)
{
    if (tw_grow((void **)&l->ranges, &l->cap, l->n + 1, sizeof(*l->ranges),
                4) != TW_OK) {
        return TW_ERR;
    }
    char *copy = malloc(wlen + 1);
    if (copy == NULL)
        return TW_ERR;
    memcpy(copy, where, wlen);
    copy[wlen] = 0;
    l->ranges[l->n++] =
        (tw_loss_range){.kind = kind, .where = copy, .from = from, .to = to};
    return TW_OK;
}

int tw_job_loss_add(tw_job_loss *l, const char *job, tw_loss_kind kind,
                    const char *where, uint64_t from, uint64_t to)
{
    if (to < from)
        return TW_OK; /* nothing missing */
    l->missing += to - from + 1;
    if (l->n >= TW_LOSS_MAX_RANGES) {
        l->more++;
        return TW_OK;
    }
    switch (kind) {
    case TW_LOSS_SEQ:
        tw_log(TW_LOG_WARN,
               "job %s: node %s: batches %" PRIu64 "..%" PRIu64
               " never arrived (sequence gap): the job is partial",
               job, where, from, to);
        break;
    case TW_LOSS_OFFSETS:
        tw_log(TW_LOG_WARN,
               "job %s: partition %s offsets %" PRIu64 "..%" PRIu64
               " were lost while the job was in flight: the job is partial",
               job, where, from, to);
        break;
    case TW_LOSS_JOINED:
        tw_log(TW_LOG_WARN,
               "job %s: first met at partition %s offset %" PRIu64
               " without its start, and nothing proves a previous owner "
               "finished it: its beginning was lost, the job is partial",
               job, where, to);
        break;
    }
    return tw_job_loss_keep(l, kind, where, strlen(where), from, to);
}

void tw_job_loss_json(const tw_job_loss *l, tw_json *j)
{
    tw_json_object_begin(j);
    tw_json_key(j, "missing");
    tw_json_int(j, (int64_t)l->missing);
    tw_json_key(j, "ranges");
    tw_json_array_begin(j);
    for (size_t i = 0; i < l->n; i++) {
        const tw_loss_range *r = &l->ranges[i];
        tw_json_object_begin(j);
        tw_json_key(j, "kind");
        tw_json_string(j, tw_loss_kind_name(r->kind));
        if (r->kind == TW_LOSS_SEQ) {
            tw_json_key(j, "node");
            tw_json_string(j, r->where);
        } else {
            tw_json_key(j, "partition");
            tw_json_int(j, strtoll(r->where, NULL, 10));
        }
        tw_json_key(j, "from");
        tw_json_int(j, (int64_t)r->from);
        tw_json_key(j, "to");
        tw_json_int(j, (int64_t)r->to);
        tw_json_object_end(j);
    }
    tw_json_array_end(j);
    if (l->more > 0) {
        tw_json_key(j, "more_ranges");
        tw_json_int(j, (int64_t)l->more);
    }
    tw_json_object_end(j);
}

void tw_job_loss_save(const tw_job_loss *l, tw_ckw *w)
{
    tw_ckw_uv(w, l->n);
    for (size_t i = 0; i < l->n; i++) {
        tw_ckw_u8(w, (uint8_t)l->ranges[i].kind);
        tw_ckw_str(w, l->ranges[i].where);
        tw_ckw_uv(w, l->ranges[i].from);
        tw_ckw_uv(w, l->ranges[i].to);
    }
    tw_ckw_uv(w, l->more);
    tw_ckw_uv(w, l->missing);
}

int tw_job_loss_restore(tw_job_loss *l, tw_ckr *r, int apply)
{
    size_t n = tw_ckr_count(r, 4);
    if (r->why == NULL && n > TW_LOSS_MAX_RANGES)
        tw_ckr_fail(r, "more data-loss ranges than an engine keeps");
    for (size_t i = 0; i < n && r->why == NULL; i++) {
        uint8_t kind = tw_ckr_u8(r);
        const char *where;
        size_t wlen;
        tw_ckr_str(r, &where, &wlen);
        uint64_t from = tw_ckr_uv(r), to = tw_ckr_uv(r);
        if (r->why != NULL)
            break;
        if (kind < TW_LOSS_SEQ || kind > TW_LOSS_JOINED || where == NULL ||
            to < from) {
            tw_ckr_fail(r, "malformed data-loss range");
            break;
        }
        if (apply && tw_job_loss_keep(l, (tw_loss_kind)kind, where, wlen, from,
                                      to) != TW_OK)
            return TW_ERR;
    }
    uint64_t more = tw_ckr_uv(r), missing = tw_ckr_uv(r);
    if (apply && r->why == NULL) {
        l->more = more;
        l->missing = missing;
    }
    return TW_OK;
}
