/*
 * fuzz_state.c - checkpoint parts as read back from the state store
 * (engine/eval/job_state.c and every built-in rule's restore) on
 * arbitrary bytes: a corrupt or hostile Redis value must give an error
 * naming the part, never a crash. Input layout: fuzz_state.h. A restored
 * job must save again, and a second restore of the same bytes into a
 * fresh job must give the same verdict.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "fuzz_state.h"

static fuzz_prelude prelude; /* the segmented parts' prelude */

static fuzz_state_setup *setup_once(void)
{
    /* libFuzzer calls the target many times in one process: the registry
     * (plugins dlopen'ed once) lives for the whole run. */
    static fuzz_state_setup su;
    static int done = 0;
    if (!done) {
        if (fuzz_state_setup_init(&su) != 0 ||
            fuzz_state_prelude(&su, &prelude) != 0)
            abort();
        done = 1;
    }
    return &su;
}

static void put_le(uint8_t *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static int count_part(void *ud, const char *part, const void *data, size_t len)
{
    (void)part;
    if (data == NULL && len > 0)
        abort();
    (*(size_t *)ud)++;
    return TW_OK;
}

/* A segmented part (selector >= FUZZ_SEL_STATE) in place of its own in
 * the prelude; a restored job must finish restoring (the snapshot put
 * together, its scans run again) and save again, whole and only-dirty. */
static int restore_segment_once(fuzz_state_setup *su, const char *part,
                                const uint8_t *blob, size_t len)
{
    tw_job *j = fuzz_state_segmented_job(su);
    if (j == NULL)
        abort();
    const struct {
        const char *name;
        const fuzz_blob *b;
    } pre[] = {{"core", &prelude.core},
               {"dict.1", &prelude.dict},
               {"state.1.0", &prelude.state}};
    char err[1024];
    for (size_t i = 0; i < sizeof(pre) / sizeof(pre[0]); i++)
        if (strcmp(part, pre[i].name) != 0 &&
            tw_job_restore_part(j, pre[i].name, pre[i].b->data, pre[i].b->len,
                                err, sizeof(err)) != TW_OK) {
            fprintf(stderr, "fuzz_state: prelude: %s\n", err);
            abort();
        }
    err[0] = '\0';
    int rc = tw_job_restore_part(j, part, blob, len, err, sizeof(err));
    if (rc == TW_OK)
        rc = tw_job_restore_end(j, err, sizeof(err));
    if (rc != TW_OK && err[0] == '\0')
        abort();
    if (rc == TW_OK) {
        size_t parts = 0;
        if (tw_job_save(j, 0, count_part, &parts, err, sizeof(err)) != TW_OK)
            fprintf(stderr, "fuzz_state: save after restore: %s\n", err);
        if (tw_job_save(j, 1, count_part, &parts, err, sizeof(err)) != TW_OK)
            fprintf(stderr, "fuzz_state: dirty save after restore: %s\n", err);
    }
    tw_job_free(j);
    return rc;
}

/* The job that restores a part: the part's own rule where the input
 * names one, and in every other place the cheapest built-in rule. The
 * parts check only the rule count and their own rule, and the core
 * touches no rule, so this restores exactly what the full job would;
 * creating 31 real rules twice per input was 90 % of the time (770
 * inputs/s; a filler job does several times that). */
static int restore_once(fuzz_state_setup *su, const char *part, size_t rule,
                        const uint8_t *blob, size_t len)
{
    tw_rule_spec specs[FUZZ_STATE_MAX_RULES];
    for (size_t i = 0; i < su->nspecs; i++)
        specs[i] = su->specs[i == rule ? i : su->filler];
    tw_job *j = NULL;
    char err[1024];
    if (tw_job_new(FUZZ_STATE_JOB, &su->cfg, su->reg, specs, su->nspecs, &j,
                   err, sizeof(err)) != TW_OK) {
        fprintf(stderr, "fuzz_state: tw_job_new: %s\n", err);
        abort();
    }
    err[0] = '\0';
    int rc = tw_job_restore_part(j, part, blob, len, err, sizeof(err));
    if (rc != TW_OK && err[0] == '\0')
        abort();
    if (rc == TW_OK) {
        size_t parts = 0;
        if (tw_job_save(j, 0, count_part, &parts, err, sizeof(err)) != TW_OK)
            fprintf(stderr, "fuzz_state: save after restore: %s\n", err);
        else if (parts != 1 + su->nspecs)
            abort();
    }
    tw_job_free(j);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    fuzz_state_setup *su = setup_once();
    char part[32];
    size_t rule = SIZE_MAX; /* the core: no rule of its own */
    uint32_t magic = data[0] == 0 ? 0x434a5754u : 0x524a5754u;
    int segment = data[0] >= FUZZ_SEL_STATE;
    if (data[0] == 0) {
        snprintf(part, sizeof(part), "core");
    } else if (segment) {
        snprintf(part, sizeof(part), "%s",
                 data[0] == FUZZ_SEL_STATE  ? "state.1.0"
                 : data[0] == FUZZ_SEL_DICT ? "dict.1"
                                            : "chunks.1");
        magic = data[0] == FUZZ_SEL_STATE  ? 0x534a5754u
                : data[0] == FUZZ_SEL_DICT ? 0x444a5754u
                                           : 0x424a5754u;
    } else {
        rule = (size_t)(data[0] - 1) % su->nspecs;
        snprintf(part, sizeof(part), "rule.%zu", rule);
    }
    const uint8_t *body = data + 2;
    size_t n = size - 2;
    uint8_t *blob;
    size_t len;
    if (data[1] & 1) {
        len = 20 + n;
        blob = malloc(len);
        if (blob == NULL)
            return 0;
        put_le(blob, magic, 4);
        put_le(blob + 4,
               data[0] == FUZZ_SEL_STATE ? 6u
               : segment                 ? 5u
                                         : 1u + ((data[1] >> 1) & 3u),
               2);
        put_le(blob + 6, 0, 2);
        put_le(blob + 8, n, 8);
        put_le(blob + 16, (uint32_t)crc32_z(crc32_z(0L, Z_NULL, 0), body, n),
               4);
        if (n > 0)
            memcpy(blob + 20, body, n);
    } else {
        /* exactly the stored bytes on the heap, so ASan sees an overread */
        len = n;
        blob = malloc(n == 0 ? 1 : n);
        if (blob == NULL)
            return 0;
        if (n > 0)
            memcpy(blob, body, n);
    }
    if (segment) {
        int first = restore_segment_once(su, part, blob, len);
        if (restore_segment_once(su, part, blob, len) != first)
            abort();
        free(blob);
        return 0;
    }
    int first = restore_once(su, part, rule, blob, len);
    if (restore_once(su, part, rule, blob, len) != first)
        abort();
    free(blob);
    return 0;
}
