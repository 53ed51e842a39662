/* quarantine.c - failure ledger and quarantined results (quarantine.h). */
#include "quarantine.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "grow.h"
#include "job_results.h"
#include "log.h"
#include "tw_assert.h"

typedef struct tw_failure {
    int32_t partition;
    int64_t offset;
    unsigned attempts;
} tw_failure;

struct tw_quarantine {
    char *path; /* NULL: in memory only */
    unsigned max_attempts;
    tw_failure *f; /* few: only messages that failed */
    size_t n, cap;
};

static tw_failure *tw_quarantine_find(const tw_quarantine *q, int32_t partition,
                                      int64_t offset)
{
    for (size_t i = 0; i < q->n; i++)
        if (q->f[i].partition == partition && q->f[i].offset == offset)
            return &q->f[i];
    return NULL;
}

static int tw_quarantine_add(tw_quarantine *q, int32_t partition,
                             int64_t offset, unsigned attempts)
{
    if (tw_grow((void **)&q->f, &q->cap, q->n + 1, sizeof(*q->f), 8) != TW_OK) {
        return TW_ERR;
    }
    q->f[q->n++] = (tw_failure){partition, offset, attempts};
    return TW_OK;
}

static int tw_quarantine_load(tw_quarantine *q, char *err, size_t errlen)
{
    FILE *f = fopen(q->path, "r");
    if (f == NULL) {
        if (errno == ENOENT)
            return TW_OK;
        snprintf(err, errlen, "failure ledger '%s': %s", q->path,
                 strerror(errno));
        return TW_ERR;
    }
    char line[128];
    int lineno = 0, rc = TW_OK;
    while (rc == TW_OK && fgets(line, sizeof(line), f) != NULL) {
        lineno++;
        int32_t p;
        int64_t o;
        unsigned a;
        char extra;
        if (sscanf(line, "%" SCNd32 " %" SCNd64 " %u %c", &p, &o, &a, &extra) !=
                3 ||
            p < 0 || o < 0 || a == 0) {
            snprintf(err, errlen,
                     "failure ledger '%s':%d: expected 'partition offset "
                     "attempts'",
                     q->path, lineno);
            rc = TW_ERR;
        } else if (tw_quarantine_add(q, p, o, a) != TW_OK) {
            snprintf(err, errlen, "failure ledger '%s': out of memory",
                     q->path);
            rc = TW_ERR;
        }
    }
    if (rc == TW_OK && ferror(f)) {
        snprintf(err, errlen, "failure ledger '%s': %s", q->path,
                 strerror(errno));
        rc = TW_ERR;
    }
    fclose(f);
    return rc;
}

/* Rewrites the ledger: temporary file, fsync, rename. */
static void tw_quarantine_save(const tw_quarantine *q)
{
    if (q->path == NULL)
        return;
    char tmp[4096];
    if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp", q->path) >= sizeof(tmp)) {
        tw_log(TW_LOG_ERROR, "failure ledger '%s': path too long", q->path);
        return;
    }
    FILE *f = fopen(tmp, "w");
    int bad = f == NULL;
    for (size_t i = 0; !bad && i < q->n; i++)
        bad = fprintf(f, "%" PRId32 " %" PRId64 " %u\n", q->f[i].partition,
                      q->f[i].offset, q->f[i].attempts) < 0;
    if (f != NULL) {
        bad |= fflush(f) != 0 || fsync(fileno(f)) != 0;
        bad |= fclose(f) != 0;
    }
    if (bad || rename(tmp, q->path) != 0) {
        tw_log(TW_LOG_ERROR,
               "failure ledger '%s': cannot write it: %s (failure counts "
               "kept in memory only)",
               q->path, strerror(errno));
        unlink(tmp);
    }
}

int tw_quarantine_new(const char *path, unsigned max_attempts,
                      tw_quarantine **out, char *err, size_t errlen)
{
    *out = NULL;
    tw_quarantine *q = calloc(1, sizeof(*q));
    if (q == NULL || (path != NULL && (q->path = strdup(path)) == NULL)) {
        free(q);
        snprintf(err, errlen, "out of memory");
        return TW_ERR;
    }
    q->max_attempts = max_attempts > 0 ? max_attempts : 1;
    if (q->path != NULL && tw_quarantine_load(q, err, errlen) != TW_OK) {
        tw_quarantine_free(q);
        return TW_ERR;
    }
    *out = q;
    return TW_OK;
}

void tw_quarantine_free(tw_quarantine *q)
{
    if (q == NULL)
        return;
    free(q->f);
    free(q->path);
    free(q);
}

unsigned tw_quarantine_max_attempts(const tw_quarantine *q)
{
    return q->max_attempts;
}

int tw_quarantine_last_attempt(const tw_quarantine *q, int32_t partition,
                               int64_t offset)
{
    const tw_failure *f = tw_quarantine_find(q, partition, offset);
    unsigned before = f != NULL ? f->attempts : 0;
    return before + 1 >= q->max_attempts;
}

unsigned tw_quarantine_failed(tw_quarantine *q, int32_t partition,
                              int64_t offset)
{
    tw_failure *f = tw_quarantine_find(q, partition, offset);
    unsigned attempts;
    if (f != NULL) {
        attempts = ++f->attempts;
    } else if (tw_quarantine_add(q, partition, offset, 1) == TW_OK) {
        attempts = 1;
    } else {
        /* out of memory: count it as the last one, never loop forever */
        return q->max_attempts;
    }
    tw_quarantine_save(q);
    return attempts;
}

void tw_quarantine_forget(tw_quarantine *q, int32_t partition, int64_t offset)
{
    tw_failure *f = tw_quarantine_find(q, partition, offset);
    if (f == NULL)
        return;
    *f = q->f[--q->n];
    tw_quarantine_save(q);
}

int tw_quarantine_results_write(tw_json *out, tw_job *job,
                                const tw_quarantine_mark *mark)
{
    tw_json *res = tw_json_new(), *m = tw_json_new();
    int rc = TW_ERR;
    if (res == NULL || m == NULL || tw_job_results_write(res, job) != TW_OK ||
        tw_json_failed(res))
        goto out;
    tw_json_set_compact(m, 1);
    tw_json_set_strict(m, 1);
    tw_json_object_begin(m);
    tw_json_key(m, "reason");
    tw_json_string(m, mark->reason);
    tw_json_key(m, "partition");
    tw_json_int(m, mark->partition);
    tw_json_key(m, "offset");
    tw_json_int(m, mark->offset);
    tw_json_key(m, "attempts");
    tw_json_int(m, mark->attempts);
    tw_json_object_end(m);
    if (tw_json_failed(m))
        goto out;
    /* The results object with one more key before its closing brace. */
    const char *s = tw_json_str(res);
    size_t len = tw_json_len(res);
    while (len > 0 && s[len - 1] != '}')
        len--;
    TW_ASSERT(len > 1); /* tw_job_results_write writes an object */
    size_t body = len - 1;
    while (body > 0 && (s[body - 1] == '\n' || s[body - 1] == ' '))
        body--;
    const char *key = ",\n  \"quarantined\": ";
    size_t total = body + strlen(key) + tw_json_len(m) + 3;
    char *text = malloc(total);
    if (text == NULL)
        goto out;
    snprintf(text, total, "%.*s%s%s\n}", (int)body, s, key, tw_json_str(m));
    tw_json_raw(out, text);
    free(text);
    rc = tw_json_failed(out) ? TW_ERR : TW_OK;
out:
    tw_json_free(res);
    tw_json_free(m);
    return rc;
}
