/* results_router_util.h - for the results-file regression tests (04xx,
 * 07xx): a job router (no store, no Kafka) writing results into a folder,
 * jobs made of a JOB_START and a JOB_END marker (their results file is
 * written at the end marker), and file helpers. Include after cmocka.h. */
#ifndef TW_RESULTS_ROUTER_UTIL_H
#define TW_RESULTS_ROUTER_UTIL_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "job_router.h"
#include "wire.h"

typedef struct rr {
    tw_registry *reg;
    tw_router *r;
    int64_t offset; /* next offset on partition 0 */
} rr;

static int rr_on_alert(void *ud, const char *job, const char *id,
                       const char *json, size_t len, int32_t partition,
                       int64_t offset, const tw_alert_facts *facts)
{
    (void)facts;
    (void)ud, (void)job, (void)id, (void)json, (void)len, (void)partition,
        (void)offset;
    return 0;
}

static void rr_open(rr *x, const char *dir)
{
    static const tw_rule_spec rules[] = {{.rule = "LowGPUUtilization"}};
    memset(x, 0, sizeof(*x));
    x->reg = tw_registry_new();
    assert_non_null(x->reg);
    tw_router_config c = {.reg = x->reg,
                          .rules = rules,
                          .nrules = 1,
                          .job_idle_us = 600000000LL,
                          .results_dir = dir};
    tw_job_config_default(&c.job);
    char err[512];
    if (tw_router_new(&c, rr_on_alert, NULL, &x->r, err, sizeof(err)) != 0)
        fail_msg("tw_router_new: %s", err);
}

static void rr_close(rr *x)
{
    tw_router_free(x->r);
    tw_registry_free(x->reg);
}

/* One marker of job `id` from node "replay", routed at the next offset. */
static void rr_marker(rr *x, const char *id, tw_marker_kind kind, uint64_t seq)
{
    tw_marker m = {.kind = kind,
                   .time_us = 1700000000000000LL,
                   .latest_us =
                       kind == TW_MARKER_JOB_END ? 1700000060000000LL : 0};
    tw_batch b;
    memset(&b, 0, sizeof(b));
    b.job = id;
    b.node = "replay";
    b.seq = seq;
    b.file_ts_us = m.time_us;
    b.markers = &m;
    b.nmarkers = 1;
    uint8_t *buf = NULL;
    size_t len = 0;
    assert_int_equal(tw_wire_encode(&b, &buf, &len), TW_WIRE_OK);
    tw_batch *d = NULL;
    char err[256];
    if (tw_wire_decode(buf, len, &d, err, sizeof(err)) != TW_WIRE_OK)
        fail_msg("decode: %s", err);
    free(buf);
    assert_int_equal(tw_router_batch(x->r, 0, x->offset++, d, 1000000), 0);
}

/* Job `id` from its start to its end: its results file is due. */
static void rr_job(rr *x, const char *id)
{
    rr_marker(x, id, TW_MARKER_JOB_START, 1);
    rr_marker(x, id, TW_MARKER_JOB_END, 2);
}

/* The whole of file `path` (NUL-terminated, malloc'd), or NULL. */
static char *rr_slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    char *s = NULL;
    size_t len = 0, cap = 0, n;
    char buf[4096];
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0) {
        if (len + n + 1 > cap) {
            cap = 2 * (len + n + 1);
            s = realloc(s, cap);
            assert_non_null(s);
        }
        memcpy(s + len, buf, n);
        len += n;
    }
    fclose(f);
    if (s == NULL)
        s = calloc(1, 1);
    else
        s[len] = '\0';
    return s;
}

/* The "*.json" files of dir: how many, and the first one's name in first
 * (when not NULL, at most firstlen bytes). */
static int rr_json_files(const char *dir, char *first, size_t firstlen)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t l = strlen(e->d_name);
        if (l > 5 && strcmp(e->d_name + l - 5, ".json") == 0) {
            if (n++ == 0 && first != NULL)
                snprintf(first, firstlen, "%s", e->d_name);
        }
    }
    closedir(d);
    return n;
}

/* Nonzero when some "*.json" file of dir holds `"job": "<id>"`. */
static int rr_results_of(const char *dir, const char *id)
{
    char *pat = malloc(strlen(id) + 16);
    assert_non_null(pat);
    sprintf(pat, "\"job\": \"%s\"", id);
    DIR *d = opendir(dir);
    assert_non_null(d);
    int found = 0;
    struct dirent *e;
    while (!found && (e = readdir(d)) != NULL) {
        size_t l = strlen(e->d_name);
        if (l <= 5 || strcmp(e->d_name + l - 5, ".json") != 0)
            continue;
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        char *s = rr_slurp(path);
        found = s != NULL && strstr(s, pat) != NULL;
        free(s);
    }
    closedir(d);
    free(pat);
    return found;
}

/* Fixture: a fresh results folder in *state, removed even when a check
 * failed. */
static inline int rr_dir_setup(void **state)
{
    char *dir = strdup("/tmp/tw_results_regress_XXXXXX");
    assert_non_null(dir);
    assert_non_null(mkdtemp(dir));
    *state = dir;
    return 0;
}

static inline int rr_dir_teardown(void **state)
{
    char *dir = *state;
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    int rc = system(cmd);
    free(dir);
    return rc == 0 ? 0 : -1;
}

#endif /* TW_RESULTS_ROUTER_UTIL_H */
