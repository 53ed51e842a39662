/*
 * pystats_job.c - reads job J's PythonProfile tables from the metrics
 * topic (topic_read.h, wire_pyprofile.h), turns each into a pystats
 * interval and runs the analysis of pystats.c over them.
 */
#include "pystats_job.h"

#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "topic_read.h"
#include "trainwatch/plugin.h"
#include "tw_assert.h"
#include "wire_pyprofile.h"

/* What the read keeps: the decoded messages of J (they own the profiles'
 * statistics), one interval per profile, and the counts for messages. */
typedef struct job_read {
    const tw_pystats_job_opts *jo;
    const tw_pystats_opts *o;
    tw_wire_pyprofiles **batches;
    size_t nbatches, cap_batches;
    tw_pystats_interval *iv;
    char **where; /* parallel to iv: "TOPIC:PARTITION@OFFSET" */
    size_t niv, cap_iv, cap_where;
    size_t skipped;
    int64_t of_job; /* messages keyed with J */
} job_read;

static void skip(job_read *r, const tw_topic_msg *m, const char *why)
{
    r->skipped++;
    if (!r->o->quiet)
        fprintf(stderr,
                "trainwatch pystats: topic '%s' partition %d offset %lld: "
                "skipped: %s\n",
                r->jo->topic, (int)m->partition, (long long)m->offset, why);
}

static int phase(const char *name, tw_step_phase *out)
{
    int k = tw_step_phase_parse(name, strlen(name));
    if (k < 0)
        return -1;
    *out = (tw_step_phase)k;
    return 0;
}

/* The profiles of one decoded message of J as intervals; a profile with an
 * unknown phase is skipped alone. */
static int add_profiles(job_read *r, const tw_topic_msg *m,
                        const tw_wire_pyprofiles *b)
{
    for (size_t i = 0; i < b->n; i++) {
        const tw_wire_pyprofile *p = &b->items[i];
        tw_pystats_interval iv = {.node = b->node,
                                  .mode = p->mode,
                                  .start_us = p->start_us,
                                  .end_us = p->end_us,
                                  .start_step = p->start_step,
                                  .end_step = p->end_step,
                                  .stats = p->stats};
        if (phase(p->start_phase, &iv.start_phase) != 0 ||
            phase(p->end_phase, &iv.end_phase) != 0) {
            char why[256];
            snprintf(why, sizeof(why),
                     "python_profiles[%zu]: phases '%.40s'-'%.40s' are not "
                     "START, STEP_START, FORWARD_PASS_END, STEP_END or END",
                     i, p->start_phase, p->end_phase);
            skip(r, m, why);
            continue;
        }
        char *where = NULL;
        if (asprintf(&where, "%s:%d@%lld[%zu]", r->jo->topic, (int)m->partition,
                     (long long)m->offset, i) < 0)
            return TW_ERR;
        if (tw_grow((void **)&r->iv, &r->cap_iv, r->niv + 1, sizeof(*r->iv),
                    64) != TW_OK ||
            tw_grow((void **)&r->where, &r->cap_where, r->niv + 1,
                    sizeof(*r->where), 64) != TW_OK) {
            free(where);
            return TW_ERR;
        }
        iv.where = where;
        r->where[r->niv] = where;
        r->iv[r->niv++] = iv;
    }
    return TW_OK;
}

static int on_message(void *ud, const tw_topic_msg *m, char *err, size_t errlen)
{
    job_read *r = ud;
    size_t jl = strlen(r->jo->job);
    /* the hook keys each message with its job id; a keyless message is
     * decoded and matched on Batch.job */
    if (m->key != NULL &&
        (m->key_len != jl || memcmp(m->key, r->jo->job, jl) != 0))
        return 0;
    if (m->key != NULL)
        r->of_job++;
    char why[512];
    tw_wire_pyprofiles *b = NULL;
    tw_wire_status st =
        tw_wire_decode_pyprofiles(m->value, m->len, &b, why, sizeof(why));
    if (st != TW_WIRE_OK) {
        char line[600];
        snprintf(line, sizeof(line), "%s: %s", tw_wire_status_name(st), why);
        skip(r, m, line);
        return 0;
    }
    if (strcmp(b->job, r->jo->job) != 0) {
        if (m->key != NULL) { /* keyed J but another job's batch */
            snprintf(why, sizeof(why), "key '%s' but Batch.job '%.80s'",
                     r->jo->job, b->job);
            skip(r, m, why);
        }
        tw_wire_pyprofiles_free(b);
        return 0;
    }
    if (m->key == NULL)
        r->of_job++;
    if (b->n == 0) {
        tw_wire_pyprofiles_free(b);
        return 0;
    }
    if (tw_grow((void **)&r->batches, &r->cap_batches, r->nbatches + 1,
                sizeof(*r->batches), 16) != TW_OK) {
        tw_wire_pyprofiles_free(b);
        snprintf(err, errlen, "out of memory keeping the profiles");
        return -1;
    }
    r->batches[r->nbatches++] = b;
    if (add_profiles(r, m, b) != TW_OK) {
        snprintf(err, errlen, "out of memory keeping the profiles");
        return -1;
    }
    return 0;
}

static void job_read_free(job_read *r)
{
    for (size_t i = 0; i < r->nbatches; i++)
        tw_wire_pyprofiles_free(r->batches[i]);
    free(r->batches);
    for (size_t i = 0; i < r->niv; i++)
        free(r->where[i]);
    free(r->where);
    free(r->iv);
}

int tw_pystats_job_run(const tw_pystats_job_opts *jo, const tw_pystats_opts *o,
                       FILE *out, char *err, size_t errlen)
{
    TW_ASSERT(jo->job != NULL && jo->brokers != NULL && jo->topic != NULL);
    job_read r = {.jo = jo, .o = o};
    tw_topic_read_opts to = {.brokers = jo->brokers,
                             .topic = jo->topic,
                             .props = jo->props,
                             .nprops = jo->nprops,
                             .timeout_ms = jo->timeout_ms,
                             .progress = jo->progress,
                             .who = "trainwatch pystats"};
    tw_topic_read_stats st;
    int rc = tw_topic_read(&to, on_message, &r, &st, err, errlen);
    if (rc == TW_OK && r.niv == 0) {
        snprintf(err, errlen,
                 "job '%s' has no Python profiles on topic '%s' (brokers %s): "
                 "%d partitions read, %lld messages seen, %lld of the job, "
                 "%zu skipped",
                 jo->job, jo->topic, jo->brokers, (int)st.partitions,
                 (long long)st.messages, (long long)r.of_job, r.skipped);
        rc = TW_ERR;
    }
    if (rc == TW_OK)
        rc = tw_pystats_run_intervals(r.iv, r.niv, r.skipped, o, out, err,
                                      errlen);
    job_read_free(&r);
    return rc;
}
