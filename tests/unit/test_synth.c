/*
 * test_synth.c - the generator of profiler-output folders
 * (engine/tools/synth.c): determinism, layout and file names per RULES.md §1.1,
 * line and trace formats, trace rotation, CPU-only jobs, option checking, the
 * CLI, and per preset the statistical properties its planted rule depends on,
 * measured from the written files.
 */
/* cmocka needs these first, in this order */
// clang-format off
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four above first */
#include <cmocka.h>

// clang-format on

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <math.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "commands.h"
#include "synth.h"

/* ------------------------------------------------------------------ */
/* Helpers: temp dirs, file lists                                     */

static char *tmpdir_new(void)
{
    const char *base = getenv("TMPDIR");
    char tmpl[4096];
    snprintf(tmpl, sizeof(tmpl), "%s/tw_synth_XXXXXX",
             base && *base ? base : "/tmp");
    char *d = mkdtemp(tmpl);
    assert_non_null(d);
    return strdup(d);
}

static int rm_cb(const char *p, const struct stat *sb, int flag,
                 struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(p);
}

static void tmpdir_free(char *d)
{
    nftw(d, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    free(d);
}

typedef struct flist {
    char **v;
    size_t n, cap;
} flist;

static flist *g_list;
static size_t g_root_len;

static int list_cb(const char *p, const struct stat *sb, int flag,
                   struct FTW *ftw)
{
    (void)sb;
    (void)ftw;
    if (flag != FTW_F)
        return 0;
    if (g_list->n == g_list->cap) {
        g_list->cap = g_list->cap ? 2 * g_list->cap : 64;
        g_list->v = realloc(g_list->v, g_list->cap * sizeof(char *));
    }
    g_list->v[g_list->n++] = strdup(p + g_root_len + 1);
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Relative paths of all files under root, sorted. */
static flist list_files(const char *root)
{
    flist l = {0};
    g_list = &l;
    g_root_len = strlen(root);
    assert_int_equal(nftw(root, list_cb, 16, FTW_PHYS), 0);
    qsort(l.v, l.n, sizeof(char *), cmp_str);
    return l;
}

static void flist_free(flist *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
}

static char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
    b[n] = '\0';
    fclose(f);
    if (len)
        *len = (size_t)n;
    return b;
}

static int starts_with(const char *s, const char *p)
{
    return strncmp(s, p, strlen(p)) == 0;
}

static void gen(const char *dir, const char *preset, uint32_t nodes,
                uint32_t cores, uint32_t gpus, double dur, uint64_t seed,
                tw_synth_stats *st)
{
    tw_synth_opts o;
    tw_synth_opts_default(&o);
    o.out_dir = dir;
    o.preset = preset;
    o.nodes = nodes;
    o.cores = cores;
    o.gpus = gpus;
    o.duration_s = dur;
    o.seed = seed;
    char err[512] = "";
    tw_synth_stats local;
    int rc = tw_synth_write(&o, st ? st : &local, err, sizeof(err));
    if (rc != 0)
        fail_msg("tw_synth_write(%s): %s", preset, err);
}

/* ------------------------------------------------------------------ */
/* Loading what was written                                           */

#define MAXG 8
#define MAXC 32

typedef struct round_s {
    int node;      /* 1-based */
    double t;      /* GPU group timestamp (or CPU for CPU-only) */
    double t_last; /* latest timestamp of the round */
    int ng, nc;
    double gpu[MAXG], mem[MAXG], cpu[MAXC], wait[MAXC];
} round_s;

typedef struct sysdata {
    round_s *r;
    size_t n, cap;
    size_t gpu_lines;
} sysdata;

typedef struct fwev {
    int node; /* 1-based, from the file name */
    char phase[40];
    char name[64];
    int64_t start, end;
    int has_pid;
    int64_t pid;
    char step[16];   /* step_num, "" if none */
    int pin_memory;  /* -1 unset */
    int num_workers; /* -1 unset */
} fwev;

typedef struct fwdata {
    fwev *e;
    size_t n, cap;
} fwdata;

static void sys_load(const char *root, sysdata *sd)
{
    memset(sd, 0, sizeof(*sd));
    flist l = list_files(root);
    for (size_t i = 0; i < l.n; i++) {
        if (!starts_with(l.v[i], "system/incremental/"))
            continue;
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s", root, l.v[i]);
        char *buf = read_all(path, NULL);
        char *save = NULL;
        round_s *cur = NULL;
        for (char *line = strtok_r(buf, "\n", &save); line;
             line = strtok_r(NULL, "\n", &save)) {
            json_error_t je;
            json_t *o = json_loads(line, 0, &je);
            assert_non_null(o);
            const char *type = json_string_value(json_object_get(o, "Type"));
            const char *name = json_string_value(json_object_get(o, "Name"));
            const char *dim =
                json_string_value(json_object_get(o, "Dimension"));
            const char *node = json_string_value(json_object_get(o, "NodeId"));
            json_t *v = json_object_get(o, "Value");
            double ts = json_number_value(json_object_get(o, "Timestamp"));
            double val = json_number_value(v);
            int nodei = atoi(node + 5);
            int starts =
                (strcmp(dim, "GPUUtilization") == 0 &&
                 strcmp(name, "gpu0") == 0) ||
                (cur == NULL && strcmp(dim, "CPUUtilization") == 0 &&
                 strcmp(name, "cpu0") == 0) ||
                (cur && cur->ng == 0 && strcmp(dim, "CPUUtilization") == 0 &&
                 strcmp(name, "cpu0") == 0);
            if (starts) {
                if (sd->n == sd->cap) {
                    sd->cap = sd->cap ? 2 * sd->cap : 1024;
                    sd->r = realloc(sd->r, sd->cap * sizeof(round_s));
                }
                cur = &sd->r[sd->n++];
                memset(cur, 0, sizeof(*cur));
                cur->node = nodei;
                cur->t = ts;
            }
            assert_non_null(cur);
            assert_int_equal(cur->node, nodei);
            if (ts > cur->t_last)
                cur->t_last = ts;
            if (strcmp(type, "gpu") == 0) {
                sd->gpu_lines++;
                int g = atoi(name + 3);
                assert_true(g < MAXG);
                if (strcmp(dim, "GPUUtilization") == 0) {
                    cur->gpu[g] = val;
                    if (g + 1 > cur->ng)
                        cur->ng = g + 1;
                } else {
                    cur->mem[g] = val;
                }
            } else if (strcmp(type, "cpu") == 0) {
                int c = atoi(name + 3);
                assert_true(c < MAXC);
                if (strcmp(dim, "CPUUtilization") == 0) {
                    cur->cpu[c] = val;
                    if (c + 1 > cur->nc)
                        cur->nc = c + 1;
                } else {
                    cur->wait[c] = val;
                }
            }
            json_decref(o);
        }
        free(buf);
    }
    flist_free(&l);
}

static void fw_load(const char *root, fwdata *fd)
{
    memset(fd, 0, sizeof(*fd));
    flist l = list_files(root);
    for (size_t i = 0; i < l.n; i++) {
        if (!starts_with(l.v[i], "framework/pevents/"))
            continue;
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s", root, l.v[i]);
        const char *base = strrchr(l.v[i], '/') + 1;
        int node = atoi(strstr(base, "-algo-") + 6);
        json_error_t je;
        json_t *arr = json_load_file(path, 0, &je);
        assert_non_null(arr);
        int64_t tbase = 0;
        char phases[16][40];
        memset(phases, 0, sizeof(phases));
        size_t k;
        json_t *e;
        json_array_foreach(arr, k, e)
        {
            const char *ph = json_string_value(json_object_get(e, "ph"));
            int pid = (int)json_integer_value(json_object_get(e, "pid"));
            json_t *args = json_object_get(e, "args");
            if (strcmp(ph, "M") == 0) {
                json_t *st =
                    json_object_get(args, "start_time_since_epoch_in_micros");
                if (st)
                    tbase = json_integer_value(st);
                json_t *nm = json_object_get(args, "name");
                if (nm && pid < 16)
                    snprintf(phases[pid], sizeof(phases[pid]), "%s",
                             json_string_value(nm));
                continue;
            }
            if (fd->n == fd->cap) {
                fd->cap = fd->cap ? 2 * fd->cap : 1024;
                fd->e = realloc(fd->e, fd->cap * sizeof(fwev));
            }
            fwev *x = &fd->e[fd->n++];
            memset(x, 0, sizeof(*x));
            x->node = node;
            snprintf(x->phase, sizeof(x->phase), "%s", phases[pid]);
            snprintf(x->name, sizeof(x->name), "%s",
                     json_string_value(json_object_get(e, "name")));
            x->start = tbase + json_integer_value(json_object_get(e, "ts"));
            x->end = x->start + json_integer_value(json_object_get(e, "dur"));
            json_t *p = json_object_get(args, "pid");
            x->has_pid = p != NULL;
            x->pid = json_integer_value(p);
            json_t *sn = json_object_get(args, "step_num");
            if (sn) {
                assert_true(json_is_string(sn));
                snprintf(x->step, sizeof(x->step), "%s", json_string_value(sn));
            }
            json_t *pm = json_object_get(args, "pin_memory");
            x->pin_memory = pm ? json_is_true(pm) : -1;
            json_t *nw = json_object_get(args, "num_workers");
            x->num_workers = nw ? (int)json_integer_value(nw) : -1;
        }
        json_decref(arr);
    }
    flist_free(&l);
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* numpy's default quantile (RULES.md §3.0) of an unsorted copy. */
static double quantile(const double *v, size_t n, double q)
{
    double *s = malloc(n * sizeof(double));
    memcpy(s, v, n * sizeof(double));
    qsort(s, n, sizeof(double), cmp_dbl);
    double h = (n - 1) * q;
    double r;
    if (h >= n - 1) {
        r = s[n - 1];
    } else {
        size_t i = (size_t)h;
        double t = h - i, a = s[i], d = s[i + 1] - a;
        r = t < 0.5 ? a + d * t : s[i + 1] - d * (1 - t);
    }
    free(s);
    return r;
}

/* Values of one series over rounds of a node (0 = all nodes) after the
 * job's first `skip_s` seconds. what: 'g' util, 'm' memory, 'c' node CPU
 * average. */
static double *series(const sysdata *sd, int node, int gpu, char what,
                      double skip_s, size_t *n)
{
    double t0 = sd->r[0].t;
    for (size_t i = 0; i < sd->n; i++)
        if (sd->r[i].t < t0)
            t0 = sd->r[i].t;
    double *v = malloc((sd->n + 1) * sizeof(double));
    size_t k = 0;
    for (size_t i = 0; i < sd->n; i++) {
        const round_s *r = &sd->r[i];
        if ((node && r->node != node) || r->t - t0 < skip_s)
            continue;
        if (what == 'g')
            v[k++] = r->gpu[gpu];
        else if (what == 'm')
            v[k++] = r->mem[gpu];
        else {
            double s = 0;
            for (int c = 0; c < r->nc; c++)
                s += r->cpu[c];
            v[k++] = s / r->nc;
        }
    }
    *n = k;
    return v;
}

/* ------------------------------------------------------------------ */
/* Determinism                                                        */

static int same_tree(const char *a, const char *b)
{
    flist la = list_files(a), lb = list_files(b);
    int same = la.n == lb.n;
    for (size_t i = 0; same && i < la.n; i++) {
        same = strcmp(la.v[i], lb.v[i]) == 0;
        if (!same)
            break;
        char pa[4096], pb[4096];
        snprintf(pa, sizeof(pa), "%s/%s", a, la.v[i]);
        snprintf(pb, sizeof(pb), "%s/%s", b, lb.v[i]);
        size_t na, nb;
        char *ba = read_all(pa, &na), *bb = read_all(pb, &nb);
        same = na == nb && memcmp(ba, bb, na) == 0;
        free(ba);
        free(bb);
    }
    flist_free(&la);
    flist_free(&lb);
    return same;
}

static void test_determinism(void **state)
{
    (void)state;
    char *a = tmpdir_new(), *b = tmpdir_new(), *c = tmpdir_new();
    gen(a, "cpu_bottleneck", 2, 4, 2, 200, 42, NULL);
    gen(b, "cpu_bottleneck", 2, 4, 2, 200, 42, NULL);
    gen(c, "cpu_bottleneck", 2, 4, 2, 200, 43, NULL);
    assert_true(same_tree(a, b));
    assert_false(same_tree(a, c));
    tmpdir_free(a);
    tmpdir_free(b);
    tmpdir_free(c);
}

/* ------------------------------------------------------------------ */
/* Layout, names, formats                                             */

static void hour_of(int64_t epoch_s, char out[11])
{
    time_t t = (time_t)epoch_s;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, 11, "%Y%m%d%H", &tm);
}

static void check_layout(const char *root, uint32_t nodes, int framework,
                         const tw_synth_stats *st)
{
    regex_t sys_re, fw_re, reader_re;
    /* The reference reader's test (§1.1) on the full path ... */
    assert_int_equal(regcomp(&reader_re,
                             ".+/system/.+/([0-9]{10}).algo-[0-9]+.json$",
                             REG_EXTENDED),
                     0);
    /* ... and the agent's exact names. */
    assert_int_equal(
        regcomp(&sys_re,
                "^system/incremental/([0-9]{10})/([0-9]{10})\\.algo-([0-9]+)"
                "\\.json$",
                REG_EXTENDED),
        0);
    assert_int_equal(regcomp(&fw_re,
                             "^framework/pevents/([0-9]{10})/([0-9]{16})_([0-"
                             "9]+)-algo-([0-9]+)_pythontimeline\\.json$",
                             REG_EXTENDED),
                     0);
    flist l = list_files(root);
    size_t nsys = 0, nfw = 0, nend = 0;
    uint64_t bytes = 0;
    for (size_t i = 0; i < l.n; i++) {
        const char *p = l.v[i];
        char full[4096];
        snprintf(full, sizeof(full), "%s/%s", root, p);
        struct stat sb;
        assert_int_equal(stat(full, &sb), 0);
        bytes += (uint64_t)sb.st_size;
        regmatch_t m[5];
        char hour[11], want[11];
        if (regexec(&sys_re, p, 4, m, 0) == 0) {
            assert_int_equal(regexec(&reader_re, full, 0, NULL, 0), 0);
            int64_t s = atoll(p + m[2].rm_so);
            assert_int_equal(s % 60, 0); /* minute start */
            memcpy(hour, p + m[1].rm_so, 10);
            hour[10] = '\0';
            hour_of(s, want);
            assert_string_equal(hour, want);
            int n = atoi(p + m[3].rm_so);
            assert_true(n >= 1 && (uint32_t)n <= nodes);
            nsys++;
        } else if (regexec(&fw_re, p, 5, m, 0) == 0) {
            int64_t end_us = atoll(p + m[2].rm_so);
            memcpy(hour, p + m[1].rm_so, 10);
            hour[10] = '\0';
            hour_of(end_us / 1000000, want);
            assert_string_equal(hour, want);
            int rank = atoi(p + m[3].rm_so), n = atoi(p + m[4].rm_so);
            assert_int_equal(rank, n - 1);
            nfw++;
        } else if (strcmp(p, "system/training_job_end.ts") == 0 ||
                   strcmp(p, "framework/training_job_end.ts") == 0) {
            char *b = read_all(full, NULL);
            assert_true(atoll(b) >= 1000000000LL);
            free(b);
            nend++;
        } else {
            fail_msg("unexpected file %s", p);
        }
    }
    assert_true(nsys > 0);
    assert_int_equal(nend, framework ? 2 : 1);
    if (framework)
        assert_true(nfw > 0);
    else
        assert_int_equal(nfw, 0);
    if (st) {
        assert_int_equal(st->files, l.n);
        assert_int_equal(st->bytes, bytes);
    }
    flist_free(&l);
    regfree(&sys_re);
    regfree(&fw_re);
    regfree(&reader_re);
}

/* Checks every system line: key order, types, integer GPU values, at most
 * two decimals elsewhere, timestamps inside the file's minute, groups of
 * a round within 20 ms of its GPU group, counts per round. */
static void check_system_lines(const char *root, uint32_t cores, uint32_t gpus,
                               uint64_t *nlines)
{
    flist l = list_files(root);
    uint64_t total = 0;
    for (size_t i = 0; i < l.n; i++) {
        if (!starts_with(l.v[i], "system/incremental/"))
            continue;
        char full[4096];
        snprintf(full, sizeof(full), "%s/%s", root, l.v[i]);
        const char *base = strrchr(l.v[i], '/') + 1;
        double minute = (double)atoll(base);
        char *buf = read_all(full, NULL);
        char *save = NULL;
        double anchor = -1;
        uint64_t lines = 0;
        for (char *line = strtok_r(buf, "\n", &save); line;
             line = strtok_r(NULL, "\n", &save)) {
            lines++;
            const char *keys[] = {
                "{\"Type\":",  ",\"Name\":",   ",\"Dimension\":",
                ",\"Value\":", ",\"NodeId\":", ",\"Timestamp\":"};
            const char *prev = line;
            for (int k = 0; k < 6; k++) {
                const char *at = strstr(prev, keys[k]);
                assert_non_null(at);
                prev = at;
            }
            json_error_t je;
            json_t *o = json_loads(line, 0, &je);
            if (o == NULL)
                fail_msg("%s: bad JSON line: %s", l.v[i], je.text);
            assert_int_equal(json_object_size(o), 6);
            const char *type = json_string_value(json_object_get(o, "Type"));
            const char *dim =
                json_string_value(json_object_get(o, "Dimension"));
            const char *name = json_string_value(json_object_get(o, "Name"));
            assert_non_null(type);
            assert_non_null(dim);
            assert_non_null(name);
            json_t *v = json_object_get(o, "Value");
            assert_true(json_is_number(v));
            json_t *ts = json_object_get(o, "Timestamp");
            assert_true(json_is_real(ts));
            double t = json_real_value(ts);
            assert_true(t >= minute && t < minute + 60);
            /* ~7 decimals, at most 7 */
            const char *tt = strstr(line, "\"Timestamp\":") + 12;
            const char *dot = strchr(tt, '.');
            assert_non_null(dot);
            assert_true(strlen(dot + 1) - 1 <= 7); /* minus the '}' */
            const char *vt = strstr(line, "\"Value\":") + 8;
            const char *vend = strchr(vt, ',');
            const char *vdot = memchr(vt, '.', (size_t)(vend - vt));
            if (strcmp(type, "gpu") == 0) {
                assert_true(json_is_integer(v));
                assert_true(strcmp(dim, "GPUUtilization") == 0 ||
                            strcmp(dim, "GPUMemoryUtilization") == 0);
                assert_true(json_integer_value(v) >= 0 &&
                            json_integer_value(v) <= 100);
                if (strcmp(dim, "GPUUtilization") == 0 &&
                    strcmp(name, "gpu0") == 0)
                    anchor = t;
            } else {
                if (vdot)
                    assert_true(vend - vdot - 1 <= 2);
                if (strcmp(type, "cpu") == 0) {
                    assert_true(strcmp(dim, "CPUUtilization") == 0 ||
                                strcmp(dim, "I/OWaitPercentage") == 0);
                    double x = json_number_value(v);
                    assert_true(x >= 0 && x <= 100);
                    if (gpus == 0 && strcmp(name, "cpu0") == 0 &&
                        strcmp(dim, "CPUUtilization") == 0)
                        anchor = t;
                } else if (strcmp(type, "memory") == 0) {
                    assert_string_equal(name, "MemoryUsedPercent");
                    assert_string_equal(dim, "");
                } else if (strcmp(type, "network") == 0) {
                    assert_string_equal(dim, "Algorithm");
                    assert_true(strcmp(name, "ReceiveBytesPerSecond") == 0 ||
                                strcmp(name, "TransmitBytesPerSecond") == 0);
                } else if (strcmp(type, "i/o") == 0) {
                    assert_string_equal(dim, "");
                } else {
                    fail_msg("unexpected Type %s", type);
                }
            }
            assert_true(anchor >= 0);
            assert_true(t - anchor >= 0 && t - anchor < 0.02);
            json_decref(o);
        }
        assert_int_equal(lines % (2 * cores + 2 * gpus + 6), 0);
        total += lines;
        free(buf);
    }
    flist_free(&l);
    if (nlines)
        *nlines = total;
}

static void check_traces(const char *root, uint64_t *nevents)
{
    flist l = list_files(root);
    uint64_t total = 0;
    for (size_t i = 0; i < l.n; i++) {
        if (!starts_with(l.v[i], "framework/pevents/"))
            continue;
        char full[4096];
        snprintf(full, sizeof(full), "%s/%s", root, l.v[i]);
        size_t len;
        char *raw = read_all(full, &len);
        assert_true(starts_with(raw, "[\n{\"name\": \"process_name\", \"ph\": "
                                     "\"M\", \"pid\": 0, \"args\": "
                                     "{\"start_time_since_epoch_in_micros\":"));
        assert_true(len > 3 && strcmp(raw + len - 3, "\n]\n") == 0);
        free(raw);
        json_error_t je;
        json_t *arr = json_load_file(full, 0, &je);
        if (arr == NULL)
            fail_msg("%s: %s (line %d)", l.v[i], je.text, je.line);
        int64_t base = json_integer_value(
            json_object_get(json_object_get(json_array_get(arr, 0), "args"),
                            "start_time_since_epoch_in_micros"));
        assert_true(base > 1000000000LL * 1000000);
        int64_t max_end = 0, min_end = INT64_MAX;
        char phase_of[16][40];
        memset(phase_of, 0, sizeof(phase_of));
        size_t k;
        json_t *e;
        json_array_foreach(arr, k, e)
        {
            const char *ph = json_string_value(json_object_get(e, "ph"));
            const char *name = json_string_value(json_object_get(e, "name"));
            int pid = (int)json_integer_value(json_object_get(e, "pid"));
            assert_true(pid >= 0 && pid < 16);
            json_t *args = json_object_get(e, "args");
            if (strcmp(ph, "M") == 0) {
                if (strcmp(name, "process_name") == 0 && pid > 0)
                    snprintf(phase_of[pid], 40, "%s",
                             json_string_value(json_object_get(args, "name")));
                continue;
            }
            assert_string_equal(ph, "X");
            assert_true(phase_of[pid][0] != '\0'); /* metadata first */
            int64_t ts = json_integer_value(json_object_get(e, "ts"));
            int64_t dur = json_integer_value(json_object_get(e, "dur"));
            assert_true(ts >= 0 && dur >= 0);
            int64_t end = base + ts + dur;
            if (end > max_end)
                max_end = end;
            if (end < min_end)
                min_end = end;
            if (starts_with(name, "Step:ModeKeys.")) {
                assert_string_equal(name, phase_of[pid]);
                assert_true(json_is_string(json_object_get(args, "step_num")));
                assert_true(json_is_integer(json_object_get(args, "pid")));
            } else if (strcmp(phase_of[pid], "DataLoaderIterInitialize") == 0) {
                assert_true(
                    json_is_boolean(json_object_get(args, "pin_memory")));
                assert_true(
                    json_is_integer(json_object_get(args, "num_workers")));
            } else if (strcmp(phase_of[pid], "DataLoaderWorker") == 0 ||
                       strcmp(phase_of[pid], "DataLoaderIter") == 0) {
                assert_true(json_is_integer(json_object_get(args, "pid")));
            } else {
                assert_true(
                    strcmp(phase_of[pid], "Forward-SubModuleInternal") == 0 ||
                    strcmp(phase_of[pid], "Backward-SubModuleInternal") == 0);
                assert_true(json_is_string(json_object_get(args, "step_num")));
            }
            total++;
        }
        /* named by the end of the last event; rotated within 60 s */
        const char *b = strrchr(l.v[i], '/') + 1;
        assert_int_equal(atoll(b), max_end);
        assert_true(max_end - min_end < 60000000);
        json_decref(arr);
    }
    flist_free(&l);
    if (nevents)
        *nevents = total;
}

static void test_layout_and_formats(void **state)
{
    (void)state;
    char *d = tmpdir_new();
    tw_synth_stats st;
    gen(d, "healthy", 3, 4, 2, 300, 5, &st);
    check_layout(d, 3, 1, &st);
    uint64_t lines = 0, events = 0;
    check_system_lines(d, 4, 2, &lines);
    check_traces(d, &events);
    assert_int_equal(lines, st.samples);
    assert_int_equal(events, st.events);
    /* 3 nodes x 2 rounds/s x 300 s, each round 2*4 + 2*2 + 6 lines */
    assert_true(st.samples >= 3 * 599 * 18 && st.samples <= 3 * 600 * 18);
    tmpdir_free(d);
}

static void test_cpu_only(void **state)
{
    (void)state;
    char *d = tmpdir_new();
    tw_synth_stats st;
    gen(d, "healthy", 2, 3, 0, 120, 9, &st);
    check_layout(d, 2, 1, &st);
    uint64_t lines = 0;
    check_system_lines(d, 3, 0, &lines);
    sysdata sd;
    sys_load(d, &sd);
    assert_int_equal(sd.gpu_lines, 0);
    assert_true(sd.n > 400);
    free(sd.r);
    tmpdir_free(d);
}

static void test_no_framework(void **state)
{
    (void)state;
    char *d = tmpdir_new();
    tw_synth_opts o;
    tw_synth_opts_default(&o);
    o.out_dir = d;
    o.duration_s = 90;
    o.framework = 0;
    tw_synth_stats st;
    char err[256];
    assert_int_equal(tw_synth_write(&o, &st, err, sizeof(err)), 0);
    check_layout(d, 1, 0, &st);
    assert_int_equal(st.events, 0);
    tmpdir_free(d);
}

/* A job crossing an hour: files land in both hour folders, no trace file
 * spans the hour, traces rotate every 60 s of event time. */
static void test_rotation_across_hour(void **state)
{
    (void)state;
    char *d = tmpdir_new();
    tw_synth_opts o;
    tw_synth_opts_default(&o);
    o.out_dir = d;
    o.start_us = INT64_C(1700002700) * 1000000; /* 22:58:20 UTC */
    o.duration_s = 300;
    o.interval_ms = 200;
    o.nodes = 2;
    tw_synth_stats st;
    char err[256];
    assert_int_equal(tw_synth_write(&o, &st, err, sizeof(err)), 0);
    check_layout(d, 2, 1, &st);
    check_system_lines(d, 4, 1, NULL);
    check_traces(d, NULL);
    flist l = list_files(d);
    int sys22 = 0, sys23 = 0, fw22 = 0, fw23 = 0;
    for (size_t i = 0; i < l.n; i++) {
        sys22 += starts_with(l.v[i], "system/incremental/2023111422/");
        sys23 += starts_with(l.v[i], "system/incremental/2023111423/");
        fw22 += starts_with(l.v[i], "framework/pevents/2023111422/");
        fw23 += starts_with(l.v[i], "framework/pevents/2023111423/");
    }
    assert_true(sys22 > 0 && sys23 > 0 && fw22 > 0 && fw23 > 0);
    /* 290 s of steps per node, rotated at least every 60 s, plus the
     * forced rotation at the hour */
    assert_true(fw22 + fw23 >= 2 * 5);
    flist_free(&l);
    tmpdir_free(d);
}

/* ------------------------------------------------------------------ */
/* Options                                                            */

static void expect_resolve_error(tw_synth_opts *o, const char *needle)
{
    char err[512] = "";
    assert_int_equal(tw_synth_opts_resolve(o, err, sizeof(err)), -1);
    if (strstr(err, needle) == NULL)
        fail_msg("error '%s' does not mention '%s'", err, needle);
}

static void test_options(void **state)
{
    (void)state;
    tw_synth_opts o;
    tw_synth_opts_default(&o);
    char err[512];
    assert_int_equal(tw_synth_opts_resolve(&o, err, sizeof(err)), 0);
    assert_int_equal(o.nodes, 1);
    assert_int_equal(o.cores, 4);
    assert_int_equal(o.gpus, 1);
    assert_true(o.duration_s == 600);

    tw_synth_opts_default(&o);
    o.preset = "straggler";
    o.interval_ms = 1000;
    assert_int_equal(tw_synth_opts_resolve(&o, err, sizeof(err)), 0);
    assert_int_equal(o.nodes, 4);
    assert_true(o.duration_s == 1440); /* 720 s scaled to 1000 ms */

    tw_synth_opts_default(&o);
    o.interval_ms = 300;
    expect_resolve_error(&o, "--interval-ms");
    tw_synth_opts_default(&o);
    o.preset = "nope";
    expect_resolve_error(&o, "nope");
    tw_synth_opts_default(&o);
    o.preset = "low_gpu";
    o.gpus = 0;
    expect_resolve_error(&o, "--gpus");
    tw_synth_opts_default(&o);
    o.preset = "load_imbalance";
    o.gpus = 1;
    expect_resolve_error(&o, "--gpus");
    tw_synth_opts_default(&o);
    o.preset = "straggler";
    o.nodes = 1;
    expect_resolve_error(&o, "--nodes");
    tw_synth_opts_default(&o);
    o.preset = "step_outliers";
    o.framework = 0;
    expect_resolve_error(&o, "--no-framework");
    tw_synth_opts_default(&o);
    o.start_us = INT64_C(999999999) * 1000000;
    expect_resolve_error(&o, "--start");
    tw_synth_opts_default(&o);
    o.duration_s = -5;
    expect_resolve_error(&o, "--duration");

    for (const char *const *p = tw_synth_presets(); *p; p++)
        assert_non_null(tw_synth_preset_help(*p));
    assert_null(tw_synth_preset_help("nope"));

    /* OUT_DIR must be absent or empty */
    char *d = tmpdir_new();
    char f[4096];
    snprintf(f, sizeof(f), "%s/x", d);
    FILE *fp = fopen(f, "w");
    fclose(fp);
    tw_synth_opts_default(&o);
    o.out_dir = d;
    assert_int_equal(tw_synth_write(&o, NULL, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "not empty"));
    tmpdir_free(d);
}

/* ------------------------------------------------------------------ */
/* Shapes for differential testing (docs/synth.md)                    */

typedef struct shape_counts {
    size_t trace_files, sys_files;
    unsigned ranks_seen;    /* bit r: a trace file of rank r        */
    int rank_node_mismatch; /* a rank's file named for another node */
    size_t on_minute;       /* samples exactly on a minute          */
    size_t gpu_util_algo1;  /* GPUUtilization lines of algo-1       */
    size_t gpu_util_algo2;
    size_t eval_steps;
    size_t conv_ops;        /* detailed profiling: aten::conv2d      */
    double longest_train_s; /* longest TRAIN step but step 0        */
} shape_counts;

/* Longest Step:ModeKeys.TRAIN "dur" in a trace, skipping step "0". */
static double longest_train(const char *b)
{
    double best = 0;
    const char *key = "{\"name\": \"Step:ModeKeys.TRAIN\", \"pid\"";
    for (const char *p = strstr(b, key); p; p = strstr(p + 1, key)) {
        const char *d = strstr(p, "\"dur\": ");
        const char *n = strstr(p, "\"step_num\": \"");
        assert_non_null(d);
        assert_non_null(n);
        if (strncmp(n + 13, "0\"", 2) == 0)
            continue;
        double s = strtod(d + 7, NULL) / 1e6;
        if (s > best)
            best = s;
    }
    return best;
}

static size_t count_str(const char *b, const char *needle)
{
    size_t n = 0;
    for (const char *p = strstr(b, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

static shape_counts shape_scan(const char *d, uint32_t ranks_per_node)
{
    shape_counts c = {0};
    flist l = list_files(d);
    char path[8192];
    for (size_t i = 0; i < l.n; i++) {
        snprintf(path, sizeof(path), "%s/%s", d, l.v[i]);
        if (starts_with(l.v[i], "framework/pevents/") &&
            strstr(l.v[i], "pythontimeline")) {
            const char *base = strrchr(l.v[i], '/') + 1;
            unsigned rank = 0, node = 0;
            assert_int_equal(
                sscanf(strchr(base, '_') + 1, "%u-algo-%u", &rank, &node), 2);
            c.ranks_seen |= 1u << rank;
            if (rank / ranks_per_node + 1 != node)
                c.rank_node_mismatch = 1;
            char *b = read_all(path, NULL);
            c.eval_steps += count_str(b, "{\"name\": \"Step:ModeKeys.EVAL\"");
            c.conv_ops += count_str(b, "{\"name\": \"aten::conv2d\"");
            double t = longest_train(b);
            if (t > c.longest_train_s)
                c.longest_train_s = t;
            free(b);
            c.trace_files++;
        } else if (starts_with(l.v[i], "system/incremental/")) {
            char *b = read_all(path, NULL);
            /* file named by its minute: a sample on it prints "<m>.0" */
            char on[64];
            snprintf(on, sizeof(on), "\"Timestamp\":%.10s.0}",
                     strrchr(l.v[i], '/') + 1);
            c.on_minute += count_str(b, on);
            size_t u = count_str(b, "\"Dimension\":\"GPUUtilization\"");
            if (strstr(l.v[i], ".algo-1.json"))
                c.gpu_util_algo1 += u;
            else if (strstr(l.v[i], ".algo-2.json"))
                c.gpu_util_algo2 += u;
            free(b);
            c.sys_files++;
        }
    }
    flist_free(&l);
    return c;
}

static shape_counts shape_gen(tw_synth_opts *o)
{
    char *d = tmpdir_new();
    o->out_dir = d;
    o->nodes = 2;
    o->duration_s = 150;
    char err[256];
    assert_int_equal(tw_synth_opts_resolve(o, err, sizeof(err)), 0);
    assert_int_equal(tw_synth_write(o, NULL, err, sizeof(err)), 0);
    shape_counts c = shape_scan(d, o->ranks_per_node);
    tmpdir_free(d);
    return c;
}

static void test_shapes(void **state)
{
    (void)state;
    tw_synth_opts o;
    tw_synth_opts_default(&o);
    shape_counts def = shape_gen(&o);
    assert_int_equal(def.ranks_seen, 0x3u);
    assert_int_equal(def.on_minute, 0);
    assert_int_equal(def.gpu_util_algo1, def.gpu_util_algo2);
    assert_true(def.longest_train_s < 0.3);
    assert_int_equal(def.eval_steps, 0); /* 600 steps take longer */
    assert_int_equal(def.conv_ops, 0);

    tw_synth_opts_default(&o);
    o.ranks_per_node = 2;
    o.rotate_s = 13;
    o.step_s = 9.0;
    o.eval_every = 6; /* steps 0-5 end by ~62 s, then EVAL steps */
    o.aligned_samples = 1;
    o.missing_gpu_series = 1;
    o.detailed_steps = 1; /* TRAIN step 5 */
    shape_counts c = shape_gen(&o);
    assert_int_equal(c.ranks_seen, 0xfu); /* ranks 0-3 of 2 nodes */
    assert_false(c.rank_node_mismatch);
    /* 13 s files: at least 140 / 13 per rank (more at each step end) */
    assert_true(c.trace_files >= 4 * 10);
    assert_true(c.on_minute >= 2 * 2); /* each node, minutes 1 and 2 */
    assert_int_equal(c.gpu_util_algo1, 0);
    assert_true(c.gpu_util_algo2 > 250);
    assert_true(c.longest_train_s >= 9.0 * 0.92);
    assert_true(c.eval_steps >= 4 * 20); /* 3.6 s each, 88 s left */
    assert_int_equal(c.conv_ops, 4);     /* one step of each rank */

    tw_synth_opts_default(&o);
    o.ranks_per_node = 9;
    expect_resolve_error(&o, "--ranks-per-node");
    tw_synth_opts_default(&o);
    o.rotate_s = 0;
    expect_resolve_error(&o, "--rotate-s");
    tw_synth_opts_default(&o);
    o.gpus = 0;
    o.missing_gpu_series = 1;
    expect_resolve_error(&o, "--missing-gpu-series");
}

static int run_cli(int argc, const char **argv)
{
    /* silence the command's stdout/stderr */
    fflush(stdout);
    fflush(stderr);
    int saved1 = dup(1), saved2 = dup(2);
    int devnull = open("/dev/null", O_WRONLY);
    assert_true(saved1 >= 0 && saved2 >= 0 && devnull >= 0);
    dup2(devnull, 1);
    dup2(devnull, 2);
    int rc = tw_cmd_synth(argc, (char **)argv);
    fflush(stdout);
    fflush(stderr);
    dup2(saved1, 1);
    dup2(saved2, 2);
    close(saved1);
    close(saved2);
    close(devnull);
    return rc;
}

static void test_cli(void **state)
{
    (void)state;
    char *d = tmpdir_new();
    char out[4096];
    snprintf(out, sizeof(out), "%s/job", d);
    const char *bad1[] = {"synth", out, "--interval-ms", "300"};
    assert_int_equal(run_cli(4, bad1), 2);
    const char *bad2[] = {"synth", out, "--duration", "ten"};
    assert_int_equal(run_cli(4, bad2), 2);
    const char *bad3[] = {"synth", out, "--nodes", "0"};
    assert_int_equal(run_cli(4, bad3), 2);
    const char *bad4[] = {"synth", out, "--preset", "nope"};
    assert_int_equal(run_cli(4, bad4), 2);
    const char *bad5[] = {"synth", out, "--frobnicate"};
    assert_int_equal(run_cli(3, bad5), 2);
    const char *bad6[] = {"synth"};
    assert_int_equal(run_cli(1, bad6), 2);
    const char *help[] = {"synth", "--help"};
    assert_int_equal(run_cli(2, help), 0);
    const char *list[] = {"synth", "--list-presets"};
    assert_int_equal(run_cli(2, list), 0);
    const char *ok[] = {"synth",      out,      "--preset=low_gpu",
                        "--duration", "1.5m",   "--nodes",
                        "2",          "--seed", "7"};
    assert_int_equal(run_cli(9, ok), 0);
    check_layout(out, 2, 1, NULL);
    /* now not empty */
    assert_int_equal(run_cli(9, ok), 2);
    tmpdir_free(d);
}

/* ------------------------------------------------------------------ */
/* Presets: the properties each planted rule depends on               */

typedef struct job {
    char *dir;
    sysdata sd;
    fwdata fd;
} job;

static void job_gen(job *j, const char *preset, uint32_t nodes, uint32_t gpus)
{
    j->dir = tmpdir_new();
    gen(j->dir, preset, nodes, TW_SYNTH_AUTO, gpus, 0, 1, NULL);
    sys_load(j->dir, &j->sd);
    fw_load(j->dir, &j->fd);
}

static void job_free(job *j)
{
    free(j->sd.r);
    free(j->fd.e);
    tmpdir_free(j->dir);
}

/* Fraction of rounds (after warm-up) where every GPU < 10 and some core
 * has cpu > 90 (which = 'c') or I/O wait > 50 (which = 'w'). */
static double bottleneck_fraction(const sysdata *sd, char which)
{
    size_t hit = 0, all = 0;
    double t0 = sd->r[0].t;
    for (size_t i = 0; i < sd->n; i++) {
        const round_s *r = &sd->r[i];
        if (r->t - t0 < 30)
            continue;
        all++;
        int low = 1;
        for (int g = 0; g < r->ng; g++)
            low &= r->gpu[g] < 10;
        int high = 0;
        for (int c = 0; c < r->nc; c++)
            high |= which == 'c' ? r->cpu[c] > 90 : r->wait[c] > 50;
        hit += low && high;
    }
    return (double)hit / (double)all;
}

/* Highest core value after the first skip_s seconds (the warm-up). */
static double max_core(const sysdata *sd, char which, double skip_s)
{
    double m = 0;
    for (size_t i = 0; i < sd->n; i++)
        if (sd->r[i].t - sd->r[0].t >= skip_s)
            for (int c = 0; c < sd->r[i].nc; c++) {
                double v = which == 'c' ? sd->r[i].cpu[c] : sd->r[i].wait[c];
                if (v > m)
                    m = v;
            }
    return m;
}

/* Step durations (s) of one node and step name; returns the count. */
static size_t step_durations(const fwdata *fd, int node, const char *name,
                             double **out)
{
    double *v = malloc((fd->n + 1) * sizeof(double));
    size_t k = 0;
    for (size_t i = 0; i < fd->n; i++)
        if (fd->e[i].node == node && strcmp(fd->e[i].name, name) == 0)
            v[k++] = (fd->e[i].end - fd->e[i].start) / 1e6;
    *out = v;
    return k;
}

/* Number of steps beyond mean + 3 sigma (population std). */
static size_t outliers(const double *d, size_t n)
{
    double m = 0, s = 0;
    for (size_t i = 0; i < n; i++)
        m += d[i];
    m /= n;
    for (size_t i = 0; i < n; i++)
        s += (d[i] - m) * (d[i] - m);
    s = sqrt(s / n);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += d[i] > m + 3 * s;
    return k;
}

/* GPUMemoryIncrease in reference form: samples (after `patience`) whose
 * mean of the last 10 exceeds the mean of v[n-11 .. n-3] by > 5. */
static size_t mem_increases(const double *v, size_t n, size_t patience)
{
    size_t k = 0;
    for (size_t m = 12; m <= n; m++) {
        double cur = 0, prev = 0;
        for (size_t i = m - 10; i < m; i++)
            cur += v[i];
        for (size_t i = m - 11; i < m - 2; i++)
            prev += v[i];
        if (cur / 10 - prev / 9 > 5 && m > patience)
            k++;
    }
    return k;
}

/* Median over seconds of the distinct DataLoader pids of that second. */
static double loader_pids_median(const fwdata *fd, size_t *nsec)
{
    int64_t lo = INT64_MAX, hi = 0;
    for (size_t i = 0; i < fd->n; i++) {
        const fwev *e = &fd->e[i];
        if (strcmp(e->phase, "DataLoaderWorker") &&
            strcmp(e->phase, "DataLoaderIter"))
            continue;
        int64_t s = e->start / 1000000;
        lo = s < lo ? s : lo;
        hi = s > hi ? s : hi;
    }
    assert_true(lo <= hi);
    if (lo > hi || hi - lo > 1000000)
        return -1;
    size_t ns = (size_t)(hi - lo + 1);
    double *cnt = calloc(ns, sizeof(double));
    int64_t(*pids)[256] = calloc(ns, sizeof(*pids));
    for (size_t i = 0; i < fd->n; i++) {
        const fwev *e = &fd->e[i];
        if (strcmp(e->phase, "DataLoaderWorker") &&
            strcmp(e->phase, "DataLoaderIter"))
            continue;
        assert_true(e->has_pid);
        size_t s = (size_t)(e->start / 1000000 - lo);
        int seen = 0;
        for (int k = 0; k < (int)cnt[s]; k++)
            seen |= pids[s][k] == e->pid;
        if (!seen && cnt[s] < 256)
            pids[s][(int)cnt[s]++] = e->pid;
    }
    double med = quantile(cnt, ns, 0.5);
    free(cnt);
    free(pids);
    *nsec = ns;
    return med;
}

static void test_preset_healthy(void **state)
{
    (void)state;
    job j;
    job_gen(&j, "healthy", 2, 2);
    for (int node = 1; node <= 2; node++)
        for (int g = 0; g < 2; g++) {
            size_t n;
            double *u = series(&j.sd, node, g, 'g', 30, &n);
            assert_true(n > 1100);
            assert_true(quantile(u, n, 0.05) > 10);
            assert_true(quantile(u, n, 0.95) > 70);
            free(u);
            double *m = series(&j.sd, node, g, 'm', 30, &n);
            assert_int_equal(mem_increases(m, n, 0), 0);
            for (size_t i = 1; i < n; i++)
                assert_true(fabs(m[i] - m[i - 1]) <= 2);
            free(m);
            double *c = series(&j.sd, node, 0, 'c', 30, &n);
            assert_true(quantile(c, n, 0.95) < 70);
            free(c);
        }
    assert_true(bottleneck_fraction(&j.sd, 'c') == 0);
    assert_true(bottleneck_fraction(&j.sd, 'w') == 0);
    assert_true(max_core(&j.sd, 'w', 30) < 50);
    for (int node = 1; node <= 2; node++) {
        double *d;
        size_t n = step_durations(&j.fd, node, "Step:ModeKeys.TRAIN", &d);
        assert_true(n > 1500);
        assert_true(outliers(d, n) <= 1); /* step 0 only */
        free(d);
        n = step_durations(&j.fd, node, "Step:ModeKeys.EVAL", &d);
        assert_true(n > 0);
        assert_true(outliers(d, n) == 0);
        free(d);
    }
    /* first step within seconds; dataloader processes >= 70 % of cores */
    int64_t first = INT64_MAX;
    for (size_t i = 0; i < j.fd.n; i++)
        if (starts_with(j.fd.e[i].name, "Step:ModeKeys") &&
            j.fd.e[i].start < first)
            first = j.fd.e[i].start;
    assert_true(first - INT64_C(1700000000) * 1000000 < 60 * 1000000);
    size_t nsec;
    double med = loader_pids_median(&j.fd, &nsec);
    assert_true(nsec > 10);
    assert_true(med >= 0.7 * 4 && med <= 2 * 4);
    job_free(&j);
}

static void test_preset_low_gpu(void **state)
{
    (void)state;
    job j;
    job_gen(&j, "low_gpu", 1, 2);
    for (int g = 0; g < 2; g++) {
        size_t n;
        double *u = series(&j.sd, 1, g, 'g', 30, &n);
        assert_true(n > 1000);
        assert_true(quantile(u, n, 0.95) < 60);
        assert_true(quantile(u, n, 0.05) > 10);
        free(u);
        double *m = series(&j.sd, 1, g, 'm', 30, &n);
        assert_true(quantile(m, n, 0.95) >= 70); /* BatchSize quiet */
        free(m);
    }
    assert_true(max_core(&j.sd, 'c', 30) < 60);
    job_free(&j);
}

static void test_preset_gpu_fluctuation(void **state)
{
    (void)state;
    job j;
    job_gen(&j, "gpu_fluctuation", 1, 1);
    size_t n;
    double *u = series(&j.sd, 1, 0, 'g', 30, &n);
    assert_true(n > 1000);
    /* every 500-sample window of the rule fluctuates */
    for (size_t e = 500; e <= n; e += 100) {
        assert_true(quantile(u + e - 500, 500, 0.95) > 70);
        assert_true(quantile(u + e - 500, 500, 0.05) < 10);
    }
    free(u);
    assert_true(max_core(&j.sd, 'c', 30) < 90);
    job_free(&j);
}

static void test_preset_cpu_bottleneck(void **state)
{
    (void)state;
    job j;
    job_gen(&j, "cpu_bottleneck", 1, 2);
    size_t n;
    double *u = series(&j.sd, 1, 0, 'g', 0, &n);
    assert_true(n > 1100); /* > patience 1000 snapshots */
    free(u);
    assert_true(bottleneck_fraction(&j.sd, 'c') > 0.6);
    assert_true(bottleneck_fraction(&j.sd, 'w') == 0);
    job_free(&j);
}

static void test_preset_io_bottleneck(void **state)
{
    (void)state;
    job j;
    job_gen(&j, "io_bottleneck", 1, 1);
    assert_true(bottleneck_fraction(&j.sd, 'w') > 0.6);
    assert_true(max_core(&j.sd, 'c', 30) <= 90); /* not a CPU bottleneck */
    job_free(&j);
}

static void test_preset_gpu_memory_growth(void **state)
{
    (void)state;
    job j;
    job_gen(&j, "gpu_memory_growth", 1, 2);
    for (int g = 0; g < 2; g++) {
        size_t n;
        double *m = series(&j.sd, 1, g, 'm', 0, &n);
        assert_true(n > 1700);
        /* the reference's overlapping averages trip on every jump ... */
        assert_true(mem_increases(m, n, 1000) >= 6);
        /* ... and nothing before patience */
        assert_int_equal(mem_increases(m, 1000, 21), 0);
        free(m);
        double *u = series(&j.sd, 1, g, 'g', 30, &n);
        assert_true(quantile(u, n, 0.05) > 10);
        free(u);
    }
    job_free(&j);
}

static void test_preset_small_batch(void **state)
{
    (void)state;
    job j;
    job_gen(&j, "small_batch", 1, 1);
    size_t n;
    double *c = series(&j.sd, 1, 0, 'c', 30, &n);
    assert_true(quantile(c, n, 0.95) < 70);
    free(c);
    double *u = series(&j.sd, 1, 0, 'g', 30, &n);
    assert_true(quantile(u, n, 0.95) < 70);
    assert_true(quantile(u, n, 0.0) >= 10); /* never a CPU bottleneck */
    free(u);
    double *m = series(&j.sd, 1, 0, 'm', 30, &n);
    assert_true(quantile(m, n, 0.95) < 70);
    free(m);
    job_free(&j);
}

static void test_preset_step_outliers(void **state)
{
    (void)state;
    job j;
    job_gen(&j, "step_outliers", 2, 1);
    for (int node = 1; node <= 2; node++) {
        double *d;
        size_t n = step_durations(&j.fd, node, "Step:ModeKeys.TRAIN", &d);
        assert_true(n > 100);
        assert_true(outliers(d, n) > 10);
        free(d);
    }
    /* the system side is healthy */
    size_t n;
    double *u = series(&j.sd, 1, 0, 'g', 30, &n);
    assert_true(quantile(u, n, 0.95) > 70 && quantile(u, n, 0.05) > 10);
    free(u);
    job_free(&j);
}

static void test_preset_load_imbalance(void **state)
{
    (void)state;
    job j;
    job_gen(&j, "load_imbalance", 2, TW_SYNTH_AUTO);
    for (int node = 1; node <= 2; node++) {
        size_t n;
        double *u0 = series(&j.sd, node, 0, 'g', 30, &n);
        double m0 = quantile(u0, n, 0.5);
        assert_true(m0 > 80);
        for (int g = 1; g < 4; g++) {
            double *u = series(&j.sd, node, g, 'g', 30, &n);
            assert_true(quantile(u, n, 0.95) < 70);
            free(u);
        }
        free(u0);
    }
    job_free(&j);
}

static void test_preset_slow_init(void **state)
{
    (void)state;
    job j;
    job_gen(&j, "slow_init", 1, 1);
    int64_t first = INT64_MAX, last_sys = 0;
    for (size_t i = 0; i < j.fd.n; i++)
        if (starts_with(j.fd.e[i].name, "Step:ModeKeys") &&
            j.fd.e[i].start < first)
            first = j.fd.e[i].start;
    int64_t start = INT64_C(1700000000) * 1000000;
    assert_true(first - start > 20 * 60 * INT64_C(1000000));
    for (size_t i = 0; i < j.sd.n; i++)
        if (j.sd.r[i].t_last * 1e6 > last_sys)
            last_sys = (int64_t)(j.sd.r[i].t_last * 1e6);
    assert_true(last_sys - start > 21 * 60 * INT64_C(1000000));
    /* no framework event at all before the first step's loader init */
    for (size_t i = 0; i < j.fd.n; i++)
        assert_true(j.fd.e[i].start > first - 1000000);
    job_free(&j);
}

/* B and E events, E events named "", in the *_horovod_timeline.json
 * files under dir/framework/pevents/<hour>/. */
typedef struct hvd_counts {
    size_t files, b, e, e_unnamed, py_files;
} hvd_counts;

static size_t count_of(const char *text, const char *needle)
{
    size_t n = 0;
    for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

static hvd_counts hvd_scan(const char *dir)
{
    hvd_counts c = {0, 0, 0, 0, 0};
    char pev[PATH_MAX / 2];
    snprintf(pev, sizeof(pev), "%s/framework/pevents", dir);
    DIR *hours = opendir(pev);
    assert_non_null(hours);
    struct dirent *h;
    while ((h = readdir(hours)) != NULL) {
        if (h->d_name[0] == '.')
            continue;
        char hp[PATH_MAX];
        int w = snprintf(hp, sizeof(hp), "%s/%.64s", pev, h->d_name);
        assert_true(w > 0 && (size_t)w < sizeof(hp) - 300);
        DIR *d = opendir(hp);
        assert_non_null(d);
        struct dirent *f;
        while ((f = readdir(d)) != NULL) {
            c.py_files += strstr(f->d_name, "_pythontimeline.json") != NULL;
            if (strstr(f->d_name, "_horovod_timeline.json") == NULL)
                continue;
            char fp[PATH_MAX + 256];
            snprintf(fp, sizeof(fp), "%s/%s", hp, f->d_name);
            size_t len;
            char *text = read_all(fp, &len);
            json_error_t je;
            json_t *v = json_loadb(text, len, 0, &je);
            if (v == NULL)
                fail_msg("%s is not JSON: %s", fp, je.text);
            json_decref(v);
            c.files++;
            c.b += count_of(text, "\"ph\": \"B\"");
            c.e += count_of(text, "\"ph\": \"E\"");
            c.e_unnamed += count_of(text, "{\"name\": \"\", \"pid\"");
            free(text);
        }
        closedir(d);
    }
    closedir(hours);
    return c;
}

/* --horovod: per rank Horovod timeline files whose B/E pairs balance (4
 * per TRAIN step: two tensors negotiated and all-reduced), E events named
 * "" as the reference's rotation writes them; the pythontimeline files
 * are the same as without it. */
static void test_horovod(void **state)
{
    (void)state;
    hvd_counts c[2];
    for (int with = 0; with < 2; with++) {
        char *dir = tmpdir_new();
        tw_synth_opts o;
        tw_synth_opts_default(&o);
        o.out_dir = dir;
        o.duration_s = 120;
        o.nodes = 2;
        o.horovod = with;
        char err[512] = "";
        if (tw_synth_write(&o, NULL, err, sizeof(err)) != 0)
            fail_msg("tw_synth_write: %s", err);
        c[with] = hvd_scan(dir);
        tmpdir_free(dir);
    }
    assert_int_equal(c[0].files, 0);
    assert_true(c[1].files >= 2 * 2); /* two ranks, 60 s files */
    assert_int_equal(c[1].py_files, c[0].py_files);
    assert_true(c[1].b > 4 * 300); /* ~430 steps of 0.25 s per rank */
    assert_int_equal(c[1].b % 4, 0);
    assert_int_equal(c[1].b, c[1].e);
    assert_int_equal(c[1].e_unnamed, c[1].e);
}

/* --final-s: no step event ends after the job's last final_s seconds
 * begin, and the GPUs idle (< 10 %) there while they were busy before;
 * a finalization as long as the job is refused. */
static void test_final_phase(void **state)
{
    (void)state;
    char *dir = tmpdir_new();
    tw_synth_opts o;
    tw_synth_opts_default(&o);
    o.out_dir = dir;
    o.duration_s = 300;
    o.final_s = 100;
    char err[512] = "";
    if (tw_synth_write(&o, NULL, err, sizeof(err)) != 0)
        fail_msg("tw_synth_write: %s", err);
    job j = {.dir = dir};
    memset(&j.sd, 0, sizeof(j.sd));
    memset(&j.fd, 0, sizeof(j.fd));
    sys_load(dir, &j.sd);
    fw_load(dir, &j.fd);
    double final_at = 1700000000.0 + 200.0;
    size_t steps = 0;
    for (size_t i = 0; i < j.fd.n; i++)
        if (starts_with(j.fd.e[i].name, "Step:ModeKeys")) {
            steps++;
            assert_true((double)j.fd.e[i].end / 1e6 <= final_at);
        }
    assert_true(steps > 500);
    size_t idle_after = 0, after = 0, busy_before = 0, before = 0;
    for (size_t i = 0; i < j.sd.n; i++) {
        const round_s *r = &j.sd.r[i];
        if (r->t > final_at + 1) {
            after++;
            idle_after += r->gpu[0] < 10;
        } else if (r->t > 1700000000.0 + 30 && r->t < final_at - 1) {
            before++;
            busy_before += r->gpu[0] >= 55;
        }
    }
    assert_true(after > 150 && idle_after == after);
    assert_true(before > 250 && busy_before == before);
    job_free(&j);

    tw_synth_opts_default(&o);
    o.duration_s = 300;
    o.final_s = 300;
    expect_resolve_error(&o, "--final-s");
}

static void test_preset_dataloader(void **state)
{
    (void)state;
    job j;
    job_gen(&j, "dataloader", 2, 1);
    size_t nsec;
    double med = loader_pids_median(&j.fd, &nsec);
    assert_true(nsec > 10);
    assert_true(med == 1);
    int inits = 0;
    for (size_t i = 0; i < j.fd.n; i++)
        if (strcmp(j.fd.e[i].phase, "DataLoaderIterInitialize") == 0) {
            assert_int_equal(j.fd.e[i].pin_memory, 0);
            assert_int_equal(j.fd.e[i].num_workers, 0);
            inits++;
        }
    assert_true(inits > 0);
    assert_int_equal(j.sd.r[0].nc, 16);
    job_free(&j);
}

static void test_preset_straggler(void **state)
{
    (void)state;
    job j;
    job_gen(&j, "straggler", TW_SYNTH_AUTO, 1);
    double mean[5] = {0};
    for (int node = 1; node <= 4; node++) {
        double *d;
        size_t n = step_durations(&j.fd, node, "Step:ModeKeys.TRAIN", &d);
        assert_true(n > 100);
        mean[node] = quantile(d, n, 0.5);
        free(d);
        size_t m;
        double *u = series(&j.sd, node, 0, 'g', 30, &m);
        if (node == 2)
            assert_true(quantile(u, m, 0.95) < 70);
        else
            assert_true(quantile(u, m, 0.05) > 70);
        free(u);
    }
    assert_true(mean[2] > 2 * mean[1]);
    assert_true(mean[2] > 2 * mean[3]);
    job_free(&j);
}

/* straggler_wait: the slow node's GPUs busy, the others' waiting (low),
 * its steps the slow ones */
static void test_preset_straggler_wait(void **state)
{
    (void)state;
    job j;
    job_gen(&j, "straggler_wait", TW_SYNTH_AUTO, 1);
    double mean[5] = {0};
    for (int node = 1; node <= 4; node++) {
        double *d;
        size_t n = step_durations(&j.fd, node, "Step:ModeKeys.TRAIN", &d);
        assert_true(n > 100);
        mean[node] = quantile(d, n, 0.5);
        free(d);
        size_t m;
        double *u = series(&j.sd, node, 0, 'g', 30, &m);
        if (node == 2)
            assert_true(quantile(u, m, 0.05) > 70);
        else
            assert_true(quantile(u, m, 0.95) < 50);
        free(u);
    }
    assert_true(mean[2] > 2 * mean[1]);
    assert_true(mean[2] > 2 * mean[4]);
    job_free(&j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_determinism),
        cmocka_unit_test(test_layout_and_formats),
        cmocka_unit_test(test_cpu_only),
        cmocka_unit_test(test_no_framework),
        cmocka_unit_test(test_rotation_across_hour),
        cmocka_unit_test(test_options),
        cmocka_unit_test(test_shapes),
        cmocka_unit_test(test_cli),
        cmocka_unit_test(test_preset_healthy),
        cmocka_unit_test(test_preset_low_gpu),
        cmocka_unit_test(test_preset_gpu_fluctuation),
        cmocka_unit_test(test_preset_cpu_bottleneck),
        cmocka_unit_test(test_preset_io_bottleneck),
        cmocka_unit_test(test_preset_gpu_memory_growth),
        cmocka_unit_test(test_preset_small_batch),
        cmocka_unit_test(test_preset_step_outliers),
        cmocka_unit_test(test_preset_load_imbalance),
        cmocka_unit_test(test_preset_slow_init),
        cmocka_unit_test(test_final_phase),
        cmocka_unit_test(test_horovod),
        cmocka_unit_test(test_preset_dataloader),
        cmocka_unit_test(test_preset_straggler),
        cmocka_unit_test(test_preset_straggler_wait),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
