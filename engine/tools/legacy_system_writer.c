/* legacy_system_writer.c - the agent's samples as legacy system files
 * (legacy_system_writer.h). */
#include "legacy_system_writer.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "tw_assert.h"

/* The kinds of failure, each logged once. */
enum {
    TW_LSW_E_OPEN,
    TW_LSW_E_WRITE,
    TW_LSW_E_RENAME,
    TW_LSW_E_CAP,
    TW_LSW_NE
};

struct tw_legacy_sys {
    char *dir;
    char *node;
    char *claim; /* DIR/.writers/agent-<pid>: ours while open */
    uint64_t max_bytes;
    FILE *f;          /* the open minute's file, or NULL after an error */
    int64_t minute_s; /* its minute */
    int64_t name_s;   /* its name's seconds: minute_s but for the first */
    int64_t first_s;  /* the first file's minute: nothing goes before */
    char open_path[4096];
    int said[TW_LSW_NE];
    tw_legacy_sys_stats st;
};

int tw_legacy_sys_node_ok(const char *node)
{
    if (strncmp(node, "algo-", 5) != 0 || node[5] == '\0')
        return 0;
    for (const char *p = node + 5; *p != '\0'; p++)
        if (*p < '0' || *p > '9')
            return 0;
    return 1;
}

static void tw_lsw_fail(tw_legacy_sys *w, int kind, const char *what,
                        const char *path, int err)
{
    w->st.errors += kind != TW_LSW_E_CAP;
    if (w->said[kind])
        return;
    w->said[kind] = 1;
    if (kind == TW_LSW_E_CAP)
        tw_log(TW_LOG_WARN,
               "agent: --profiler-output %s: the cap of %" PRIu64 " bytes is "
               "reached: further samples are not written (still streamed)",
               w->dir, w->max_bytes);
    else
        tw_log(TW_LOG_WARN,
               "agent: --profiler-output: cannot %s %s: %s: its samples are "
               "dropped and counted (still streamed; said once)",
               what, path, strerror(err));
}

static int tw_lsw_mkdir(const char *path)
{
    return mkdir(path, 0777) == 0 || errno == EEXIST ? 0 : -1;
}

/* DIR/system/incremental/<hour>, created. */
static int tw_lsw_hour_dir(const tw_legacy_sys *w, int64_t minute_s, char *out,
                           size_t outlen)
{
    time_t t = (time_t)minute_s;
    struct tm tm;
    char hour[16];
    if (gmtime_r(&t, &tm) == NULL ||
        strftime(hour, sizeof(hour), "%Y%m%d%H", &tm) == 0)
        return -1;
    snprintf(out, outlen, "%s/system/incremental", w->dir);
    if (tw_lsw_mkdir(out) != 0)
        return -1;
    snprintf(out, outlen, "%s/system/incremental/%s", w->dir, hour);
    return tw_lsw_mkdir(out);
}

/* Closes the open file and renames it into place. */
static void tw_lsw_finish(tw_legacy_sys *w)
{
    if (w->f == NULL)
        return;
    int bad = ferror(w->f) != 0;
    if (fclose(w->f) != 0)
        bad = 1;
    w->f = NULL;
    if (bad) {
        tw_lsw_fail(w, TW_LSW_E_WRITE, "write", w->open_path, errno);
        unlink(w->open_path);
        return;
    }
    char folder[4096], final[4608];
    if (tw_lsw_hour_dir(w, w->minute_s, folder, sizeof(folder)) != 0) {
        tw_lsw_fail(w, TW_LSW_E_RENAME, "create", folder, errno);
        unlink(w->open_path);
        return;
    }
    snprintf(final, sizeof(final), "%s/%010" PRId64 ".%s.json", folder,
             w->name_s, w->node);
    if (rename(w->open_path, final) != 0) {
        tw_lsw_fail(w, TW_LSW_E_RENAME, "rename into place", final, errno);
        unlink(w->open_path);
        return;
    }
    w->st.files++;
}

/* Starts the file of minute_s (named name_s) under DIR/system/.open. */
static void tw_lsw_start(tw_legacy_sys *w, int64_t minute_s, int64_t name_s)
{
    w->minute_s = minute_s;
    w->name_s = name_s;
    snprintf(w->open_path, sizeof(w->open_path),
             "%s/system/.open/%010" PRId64 ".%s.json.part", w->dir, minute_s,
             w->node);
    w->f = fopen(w->open_path, "w");
    if (w->f == NULL)
        tw_lsw_fail(w, TW_LSW_E_OPEN, "create", w->open_path, errno);
}

/* DIR/framework/pevents/<hour>/<start_us>_<node>_pythontimeline.json,
 * holding only the time base. */
static int tw_lsw_opening(tw_legacy_sys *w, int64_t start_us, char *err,
                          size_t errlen)
{
    time_t t = (time_t)(start_us / 1000000);
    struct tm tm;
    char hour[16], path[4096];
    if (gmtime_r(&t, &tm) == NULL ||
        strftime(hour, sizeof(hour), "%Y%m%d%H", &tm) == 0) {
        snprintf(err, errlen, "--profiler-output: bad start time %" PRId64,
                 start_us);
        return -1;
    }
    const char *sub[] = {"/framework", "/framework/pevents",
                         "/framework/pevents/"};
    for (size_t i = 0; i < sizeof(sub) / sizeof(sub[0]); i++) {
        snprintf(path, sizeof(path), "%s%s%s", w->dir, sub[i],
                 i == 2 ? hour : "");
        if (tw_lsw_mkdir(path) != 0) {
            snprintf(err, errlen, "--profiler-output: cannot create %s: %s",
                     path, strerror(errno));
            return -1;
        }
    }
    snprintf(path, sizeof(path),
             "%s/framework/pevents/%s/%" PRId64 "_%s_pythontimeline.json",
             w->dir, hour, start_us, w->node);
    FILE *f = fopen(path, "w");
    int ok = f != NULL &&
             fprintf(f,
                     "[{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":0,"
                     "\"args\":{\"start_time_since_epoch_in_micros\":%" PRId64
                     "}}]\n",
                     start_us) > 0;
    if (f != NULL && fclose(f) != 0)
        ok = 0;
    if (!ok) {
        snprintf(err, errlen, "--profiler-output: cannot write %s: %s", path,
                 strerror(errno));
        return -1;
    }
    w->st.files++;
    return 0;
}

int tw_legacy_sys_open(const char *dir, const char *node, int64_t start_us,
                       uint64_t max_bytes, tw_legacy_sys **out, char *err,
                       size_t errlen)
{
    TW_ASSERT(tw_legacy_sys_node_ok(node));
    *out = NULL;
    tw_legacy_sys *w = calloc(1, sizeof(*w));
    char path[4096];
    if (w == NULL || (w->dir = strdup(dir)) == NULL ||
        (w->node = strdup(node)) == NULL) {
        snprintf(err, errlen, "--profiler-output %s: out of memory", dir);
        goto fail;
    }
    w->max_bytes = max_bytes;
    const char *sub[] = {"", "/system", "/system/.open", "/.writers"};
    for (size_t i = 0; i < sizeof(sub) / sizeof(sub[0]); i++) {
        snprintf(path, sizeof(path), "%s%s", dir, sub[i]);
        if (tw_lsw_mkdir(path) != 0) {
            snprintf(err, errlen, "--profiler-output: cannot create %s: %s",
                     path, strerror(errno));
            goto fail;
        }
    }
    snprintf(path, sizeof(path), "%s/.writers/agent-%ld", dir, (long)getpid());
    FILE *claim = fopen(path, "w");
    if (claim == NULL || fclose(claim) != 0 ||
        (w->claim = strdup(path)) == NULL) {
        snprintf(err, errlen, "--profiler-output: cannot create %s: %s", path,
                 strerror(errno));
        goto fail;
    }
    /* The folder's first timestamp must be the stream's, the JOB_START
     * time: an opening framework file without events is named with it,
     * and the first system file with the JOB_START second rounded up
     * (a minute start would come before it; its samples all come after
     * the JOB_START). */
    if (tw_lsw_opening(w, start_us, err, errlen) != 0)
        goto fail;
    int64_t up = (start_us + 999999) / 1000000;
    w->first_s = up - up % 60;
    tw_lsw_start(w, w->first_s, up);
    if (w->f == NULL) {
        snprintf(err, errlen, "--profiler-output: cannot create %s: %s",
                 w->open_path, strerror(errno));
        goto fail;
    }
    *out = w;
    return 0;
fail:
    if (w != NULL && w->claim != NULL)
        unlink(w->claim);
    if (w != NULL && w->f != NULL) {
        fclose(w->f);
        unlink(w->open_path);
    }
    if (w != NULL) {
        free(w->claim);
        free(w->node);
        free(w->dir);
    }
    free(w);
    return -1;
}

/* The plain characters a series field may hold (the sampler's names):
 * nothing to escape in JSON. */
static int tw_lsw_plain(const char *s)
{
    for (; s != NULL && *s != '\0'; s++)
        if (*s == '"' || *s == '\\' || (unsigned char)*s < 0x20)
            return 0;
    return 1;
}

void tw_legacy_sys_write(tw_legacy_sys *w, const tw_batch_series *series,
                         const tw_sample *samples, size_t n)
{
    char line[1024];
    for (size_t i = 0; i < n; i++) {
        const tw_sample *s = &samples[i];
        const tw_batch_series *se = &series[s->series];
        TW_ASSERT(tw_lsw_plain(se->type) && tw_lsw_plain(se->name) &&
                  tw_lsw_plain(se->dimension));
        int64_t minute = (int64_t)floor(s->ts / 60.0) * 60;
        if (minute < w->first_s) /* the first file's, up to its name */
            minute = w->first_s;
        if (minute != w->minute_s) {
            tw_lsw_finish(w);
            tw_lsw_start(w, minute, minute);
        }
        if (w->f == NULL || !isfinite(s->value) || !isfinite(s->ts)) {
            w->st.dropped++;
            continue;
        }
        /* %.17g: the very double the stream carries, read back. */
        int len = snprintf(line, sizeof(line),
                           "{\"Type\":\"%s\",\"Name\":%s%s%s,\"Dimension\":"
                           "\"%s\",\"Value\":%.17g,\"NodeId\":\"%s\","
                           "\"Timestamp\":%.17g}\n",
                           se->type, se->name != NULL ? "\"" : "",
                           se->name != NULL ? se->name : "null",
                           se->name != NULL ? "\"" : "",
                           se->dimension != NULL ? se->dimension : "", s->value,
                           w->node, s->ts);
        TW_ASSERT(len > 0 && (size_t)len < sizeof(line));
        if (w->st.bytes + (uint64_t)len > w->max_bytes) {
            tw_lsw_fail(w, TW_LSW_E_CAP, NULL, NULL, 0);
            w->st.dropped++;
            continue;
        }
        if (fwrite(line, 1, (size_t)len, w->f) != (size_t)len) {
            tw_lsw_fail(w, TW_LSW_E_WRITE, "write", w->open_path, errno);
            w->st.dropped++;
            continue;
        }
        w->st.lines++;
        w->st.bytes += (uint64_t)len;
    }
    if (w->f != NULL && fflush(w->f) != 0)
        tw_lsw_fail(w, TW_LSW_E_WRITE, "write", w->open_path, errno);
}

/* 1 when DIR/.writers holds no claim (or cannot be read). */
static int tw_lsw_last(const char *dir)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/.writers", dir);
    DIR *d = opendir(path);
    if (d == NULL)
        return 1;
    int others = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            others++;
    closedir(d);
    if (others == 0)
        rmdir(path); /* a later writer creates it again */
    return others == 0;
}

void tw_legacy_sys_close(tw_legacy_sys *w, int64_t end_us,
                         tw_legacy_sys_stats *stats)
{
    if (w == NULL)
        return;
    tw_lsw_finish(w);
    char path[4096];
    snprintf(path, sizeof(path), "%s/system/.open", w->dir);
    rmdir(path); /* fails when a file could not be renamed: kept for a look */
    /* Leave first, then look: of two writers closing at once, at least
     * one sees the folder empty. */
    if (unlink(w->claim) != 0)
        tw_lsw_fail(w, TW_LSW_E_RENAME, "remove", w->claim, errno);
    if (tw_lsw_last(w->dir)) {
        snprintf(path, sizeof(path), "%s/system/training_job_end.ts", w->dir);
        FILE *f = fopen(path, "w");
        int ok = f != NULL && fprintf(f, "%.6f\n", (double)end_us / 1e6) > 0;
        if (f != NULL && fclose(f) != 0)
            ok = 0;
        if (!ok)
            tw_lsw_fail(w, TW_LSW_E_OPEN, "write", path, errno);
    }
    if (stats != NULL)
        *stats = w->st;
    free(w->claim);
    free(w->node);
    free(w->dir);
    free(w);
}
