/*
 * fuzz_checkpoint.c - a partition's checkpoint as read back from the state
 * store on assignment (engine/stream/checkpoint.c, then every part into a
 * job as the router restores it: engine/eval/job_state.c and the rules'
 * restore). The input fills a memory store with hostile keys and values:
 * records of u8 kind, u16 length (little-endian), bytes:
 *   kind % 4 == 0: the partition's offset value
 *           1: a job id added to the partition's job set
 *           2: a part name added to the last job's part set
 *           3: the value of the last job's last part name
 * then tw_checkpoint_load runs with a callback restoring each job's parts
 * into a fresh job (fuzz_state.h's). Errors must name what failed; nothing
 * may crash, leak or trip a sanitizer.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "config.h"
#include "fuzz_state.h"
#include "log.h"

#define TOPIC "metrics"
#define PARTITION 3

typedef struct loader {
    fuzz_state_setup *su;
    char job_id[256];
    tw_job *job;
    /* the rules some part of the input names; the others are the filler */
    unsigned char named[FUZZ_STATE_MAX_RULES];
} loader;

static fuzz_state_setup *setup_once(void)
{
    /* libFuzzer calls the target many times in one process: the registry
     * (plugins dlopen'ed once) lives for the whole run. */
    static fuzz_state_setup su;
    static int done = 0;
    if (!done) {
        if (fuzz_state_setup_init(&su) != 0)
            abort();
        tw_log_set_level(TW_LOG_ERROR);
        done = 1;
    }
    return &su;
}

static int restore_part(void *ud, const char *job, const char *part,
                        const uint8_t *data, size_t len)
{
    loader *l = ud;
    char err[1024];
    if (l->job == NULL || strcmp(l->job_id, job) != 0) {
        tw_job_free(l->job);
        l->job = NULL;
        snprintf(l->job_id, sizeof(l->job_id), "%s", job);
        /* As in fuzz_state.c: a part checks only the rule count and its
         * own rule, so the rules no part names can be the cheapest one.
         * Creating 31 real rules per job was most of the time. */
        tw_rule_spec specs[FUZZ_STATE_MAX_RULES];
        for (size_t i = 0; i < l->su->nspecs; i++)
            specs[i] = l->su->specs[l->named[i] ? i : l->su->filler];
        if (tw_job_new(job, &l->su->cfg, l->su->reg, specs, l->su->nspecs,
                       &l->job, err, sizeof(err)) != TW_OK) {
            fprintf(stderr, "fuzz_checkpoint: tw_job_new: %s\n", err);
            abort();
        }
    }
    err[0] = '\0';
    /* a part that does not restore is the router's error too; go on */
    if (tw_job_restore_part(l->job, part, data, len, err, sizeof(err)) !=
            TW_OK &&
        err[0] == '\0')
        abort();
    return 0;
}

/* The record's bytes as a C string (NUL bytes end it, as they would in a
 * key name). */
static void cstr(char *out, size_t size, const uint8_t *p, size_t n)
{
    if (n >= size)
        n = size - 1;
    memcpy(out, p, n);
    out[n] = '\0';
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_state_setup *su = setup_once();
    tw_setting items[] = {{"store", "memory", 2}};
    tw_settings state = {"fuzz.yaml", "state", 1, items, 1};
    tw_store *s = NULL;
    char err[1024];
    if (tw_store_open(&state, &s, err, sizeof(err)) != TW_OK) {
        fprintf(stderr, "fuzz_checkpoint: open: %s\n", err);
        abort();
    }
    char key[1024], job[256] = "job", part[256] = "core";
    loader l = {.su = su};
    const uint8_t *offset = NULL; /* the offset value last put */
    size_t noffset = 0;
    tw_store_txn_begin(s);
    size_t off = 0;
    while (off + 3 <= size) {
        uint8_t kind = data[off];
        size_t n = (size_t)data[off + 1] | (size_t)data[off + 2] << 8;
        off += 3;
        if (n > size - off)
            n = size - off;
        const uint8_t *p = data + off;
        off += n;
        switch (kind % 4) {
        case 0:
            if (tw_checkpoint_key_partition(key, sizeof(key), TOPIC, PARTITION,
                                            "offset") == TW_OK) {
                tw_store_txn_put(s, key, p, n);
                offset = p;
                noffset = n;
            }
            break;
        case 1:
            cstr(job, sizeof(job), p, n);
            if (tw_checkpoint_key_partition(key, sizeof(key), TOPIC, PARTITION,
                                            "jobs") == TW_OK)
                tw_store_txn_sadd(s, key, job);
            break;
        case 2:
            cstr(part, sizeof(part), p, n);
            if (strncmp(part, "rule.", 5) == 0) {
                /* lenient on purpose: naming too many only costs time */
                unsigned long k = strtoul(part + 5, NULL, 10);
                if (k < FUZZ_STATE_MAX_RULES)
                    l.named[k] = 1;
            }
            if (tw_checkpoint_key_part(key, sizeof(key), job, "parts") == TW_OK)
                tw_store_txn_sadd(s, key, part);
            break;
        default:
            if (tw_checkpoint_key_part(key, sizeof(key), job, part) == TW_OK)
                tw_store_txn_put(s, key, p, n);
            break;
        }
    }
    err[0] = '\0';
    if (tw_store_txn_commit(s, err, sizeof(err)) != TW_OK) {
        /* e.g. a part named "parts": its value and the part set share a
         * key, which the store refuses */
        if (err[0] == '\0')
            abort();
        tw_store_close(s);
        return 0;
    }
    int64_t next = 0;
    err[0] = '\0';
    int rc = tw_checkpoint_load(s, TOPIC, PARTITION, &next, restore_part, &l,
                                err, sizeof(err));
    /* an offset accepted must be what was stored: decimal digits only */
    int digits = noffset > 0;
    for (size_t i = 0; i < noffset; i++)
        digits = digits && offset[i] >= '0' && offset[i] <= '9';
    if ((rc != TW_OK && err[0] == '\0') ||
        (rc == TW_OK && (offset == NULL ? next != -1 : !digits))) {
        fprintf(stderr, "fuzz_checkpoint: load: rc %d, offset %lld, '%s'\n", rc,
                (long long)next, err);
        abort();
    }
    tw_job_free(l.job);
    tw_store_close(s);
    return 0;
}
