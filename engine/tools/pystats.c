/*
 * pystats.c - `trainwatch pystats`: finds the python_stats files of a
 * profiler-output folder, reads each interval's name, keeps those the
 * query selects, adds their function statistics per group (as
 * pstats.Stats.add does: calls and times summed per (file, line,
 * function)) and prints the top functions of each group.
 */
#include "pystats.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "grow.h"
#include "json_writer.h"
#include "pstats_marshal.h"
#include "strmap.h"
#include "trainwatch/plugin.h"
#include "tw_assert.h"

static const char *const phase_names[TW_PHASE_COUNT] = {
    "START", "STEP_START", "FORWARD_PASS_END", "STEP_END", "END"};

int tw_step_phase_parse(const char *name, size_t len)
{
    for (int i = 0; i < TW_PHASE_COUNT; i++)
        if (strlen(phase_names[i]) == len &&
            memcmp(phase_names[i], name, len) == 0)
            return i;
    return -1;
}

const char *tw_step_phase_name(tw_step_phase p)
{
    TW_ASSERT(p >= 0 && p < TW_PHASE_COUNT);
    return phase_names[p];
}

typedef struct interval {
    char *node;
    char *path;
    int64_t start_us, end_us, start_step, end_step;
    tw_step_phase start_phase, end_phase;
    int known;     /* 0: a lone pstats file, no interval name */
    char mode[16]; /* from <interval>/mode (the hook writes it); "" */
    size_t functions;
    const tw_pstats *mem; /* statistics in memory (--job); NULL: at path */
} interval;

typedef struct func_sum {
    char *file, *function;
    int64_t line, cc, nc;
    double tt, ct;
} func_sum;

typedef struct group {
    char name[64];
    size_t nintervals;
    func_sum *funcs;
    size_t nfuncs, cap;
    tw_strmap index; /* "file\nline\nfunction" -> funcs index */
} group;

typedef struct analysis {
    const tw_pystats_opts *o;
    interval *iv;
    size_t niv, cap_iv;
    group groups[TW_PHASE_COUNT * TW_PHASE_COUNT]; /* every phase pair */
    size_t ngroups;
    size_t skipped;
    int64_t between_t0, between_t1; /* --between-modes as times */
} analysis;

/* ---- the folder ---------------------------------------------------------- */

/* "<digits>" at *s, moving it; -1 when none. */
static int digits(const char **s, int64_t *v)
{
    const char *p = *s;
    int64_t x = 0;
    if (*p < '0' || *p > '9')
        return -1;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (x > (INT64_MAX - 9) / 10)
            return -1;
        x = x * 10 + (*p - '0');
    }
    *s = p;
    *v = x;
    return 0;
}

/* "<PHASE>-<step>" at *s, moving it. */
static int phase_step(const char **s, tw_step_phase *ph, int64_t *step)
{
    const char *dash = strchr(*s, '-');
    if (dash == NULL)
        return -1;
    int k = tw_step_phase_parse(*s, (size_t)(dash - *s));
    if (k < 0)
        return -1;
    *ph = (tw_step_phase)k;
    *s = dash + 1;
    return digits(s, step);
}

/* <start_us>_<PHASE>-<step>_<end_us>_<PHASE>-<step> */
static int parse_interval(const char *name, interval *iv)
{
    const char *s = name;
    if (digits(&s, &iv->start_us) != 0 || *s++ != '_' ||
        phase_step(&s, &iv->start_phase, &iv->start_step) != 0 || *s++ != '_' ||
        digits(&s, &iv->end_us) != 0 || *s++ != '_' ||
        phase_step(&s, &iv->end_phase, &iv->end_step) != 0 || *s != '\0')
        return -1;
    return 0;
}

static void bad(analysis *a, const char *path, const char *why)
{
    a->skipped++;
    if (!a->o->quiet)
        fprintf(stderr, "trainwatch pystats: %s: skipped: %s\n", path, why);
}

static char *join(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    char *s = malloc(la + lb + 2);
    if (s != NULL) {
        memcpy(s, a, la);
        s[la] = '/';
        memcpy(s + la + 1, b, lb + 1);
    }
    return s;
}

/* <interval>/mode's first word; "" when absent or unreadable (older
 * folders: no mode) */
static void read_mode(const char *dir, const char *name, char *mode, size_t len)
{
    mode[0] = '\0';
    char *sub = join(dir, name);
    char *path = sub == NULL ? NULL : join(sub, "mode");
    free(sub);
    FILE *f = path == NULL ? NULL : fopen(path, "r");
    free(path);
    if (f == NULL)
        return;
    if (fgets(mode, (int)len, f) == NULL)
        mode[0] = '\0';
    mode[strcspn(mode, " \t\r\n")] = '\0';
    fclose(f);
}

static int add_interval(analysis *a, const interval *iv)
{
    if (tw_grow((void **)&a->iv, &a->cap_iv, a->niv + 1, sizeof(*a->iv), 32) !=
        TW_OK)
        return TW_ERR;
    a->iv[a->niv++] = *iv;
    return TW_OK;
}

static int scan_node(analysis *a, const char *dir, const char *node, char *err,
                     size_t errlen)
{
    DIR *d = opendir(dir);
    if (d == NULL) {
        bad(a, dir, strerror(errno));
        return TW_OK;
    }
    int rc = TW_OK;
    for (struct dirent *e; rc == TW_OK && (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.')
            continue;
        interval iv = {0};
        char *sub = join(dir, e->d_name);
        iv.path = sub == NULL ? NULL : join(sub, "python_stats");
        free(sub);
        iv.node = strdup(node);
        if (iv.path == NULL || iv.node == NULL) {
            free(iv.path);
            free(iv.node);
            snprintf(err, errlen, "out of memory listing %s", dir);
            rc = TW_ERR;
            break;
        }
        struct stat st;
        if (parse_interval(e->d_name, &iv) != 0 || stat(iv.path, &st) != 0) {
            bad(a, iv.path,
                "not <start_us>_<PHASE>-<step>_<end_us>_<PHASE>-<step>/"
                "python_stats");
            free(iv.path);
            free(iv.node);
            continue;
        }
        iv.known = 1;
        read_mode(dir, e->d_name, iv.mode, sizeof(iv.mode));
        if (add_interval(a, &iv) != TW_OK) {
            free(iv.path);
            free(iv.node);
            snprintf(err, errlen, "out of memory listing %s", dir);
            rc = TW_ERR;
        }
    }
    closedir(d);
    return rc;
}

static int cmp_interval(const void *x, const void *y)
{
    const interval *a = x, *b = y;
    if (a->start_us != b->start_us)
        return a->start_us < b->start_us ? -1 : 1;
    return strcmp(a->node, b->node);
}

static int find_intervals(analysis *a, const char *path, char *err,
                          size_t errlen)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        snprintf(err, errlen, "%s", strerror(errno));
        return TW_ERR;
    }
    if (!S_ISDIR(st.st_mode)) { /* one pstats file */
        interval iv = {0};
        iv.path = strdup(path);
        iv.node = strdup("-");
        if (iv.path == NULL || iv.node == NULL || add_interval(a, &iv)) {
            free(iv.path);
            free(iv.node);
            snprintf(err, errlen, "out of memory");
            return TW_ERR;
        }
        return TW_OK;
    }
    char *root = join(path, "framework/pytorch/cprofile");
    if (root == NULL) {
        snprintf(err, errlen, "out of memory");
        return TW_ERR;
    }
    DIR *d = opendir(root);
    if (d == NULL) {
        snprintf(err, errlen, "no Python profiles: %s: %s", root,
                 strerror(errno));
        free(root);
        return TW_ERR;
    }
    int rc = TW_OK;
    for (struct dirent *e; rc == TW_OK && (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.')
            continue;
        char *nd = join(root, e->d_name);
        if (nd == NULL) {
            snprintf(err, errlen, "out of memory");
            rc = TW_ERR;
            break;
        }
        rc = scan_node(a, nd, e->d_name, err, errlen);
        free(nd);
    }
    closedir(d);
    free(root);
    if (a->niv > 1)
        qsort(a->iv, a->niv, sizeof(*a->iv), cmp_interval);
    return rc;
}

/* ---- the query ----------------------------------------------------------- */

static int before(int64_t s1, tw_step_phase p1, int64_t s2, tw_step_phase p2)
{
    return s1 < s2 || (s1 == s2 && p1 < p2);
}

static int selected(const analysis *a, const interval *iv)
{
    const tw_pystats_opts *o = a->o;
    if (o->node != NULL && strcmp(o->node, iv->node) != 0)
        return 0;
    if (!iv->known) /* a lone file: no interval to select on */
        return 1;
    if (o->mode != NULL && strcmp(o->mode, iv->mode) != 0)
        return 0;
    if (o->between_from != NULL &&
        (iv->start_us < a->between_t0 || iv->end_us > a->between_t1))
        return 0;
    if (o->has_time && (iv->start_us < o->from_us || iv->end_us > o->to_us))
        return 0;
    if (o->has_steps &&
        (before(iv->start_step, iv->start_phase, o->step_a, o->phase_a) ||
         before(o->step_b, o->phase_b, iv->end_step, iv->end_phase)))
        return 0;
    if (o->before_step0 && iv->start_phase != TW_PHASE_START)
        return 0;
    if (o->after_close && iv->end_phase != TW_PHASE_END)
        return 0;
    return 1;
}

/* --between-modes FROM:TO: from the first interval of FROM to the last
 * of TO; an empty span when either mode is absent */
static void between(analysis *a)
{
    a->between_t0 = INT64_MAX;
    a->between_t1 = INT64_MIN;
    for (size_t i = 0; i < a->niv; i++) {
        const interval *iv = &a->iv[i];
        if (strcmp(iv->mode, a->o->between_from) == 0 &&
            iv->start_us < a->between_t0)
            a->between_t0 = iv->start_us;
        if (strcmp(iv->mode, a->o->between_to) == 0 &&
            iv->end_us > a->between_t1)
            a->between_t1 = iv->end_us;
    }
}

static void group_name(const tw_pystats_opts *o, const interval *iv, char *name,
                       size_t len)
{
    if (o->group == TW_PYSTATS_GROUP_ALL || !iv->known)
        snprintf(name, len, "all");
    else if (o->group == TW_PYSTATS_GROUP_TRAINING_PHASE)
        snprintf(name, len, "%s-%s", phase_names[iv->start_phase],
                 phase_names[iv->end_phase]);
    else if (iv->start_phase == TW_PHASE_START)
        snprintf(name, len, "initialization");
    else if (iv->end_phase == TW_PHASE_END)
        snprintf(name, len, "finalization");
    else
        snprintf(name, len, "training_loop");
}

static group *group_of(analysis *a, const char *name)
{
    for (size_t i = 0; i < a->ngroups; i++)
        if (strcmp(a->groups[i].name, name) == 0)
            return &a->groups[i];
    TW_ASSERT(a->ngroups < sizeof(a->groups) / sizeof(a->groups[0]));
    group *g = &a->groups[a->ngroups++];
    memset(g, 0, sizeof(*g));
    snprintf(g->name, sizeof(g->name), "%s", name);
    tw_strmap_init(&g->index);
    return g;
}

static int add_stats(group *g, const tw_pstats *s)
{
    for (size_t i = 0; i < s->nfuncs; i++) {
        const tw_pstats_func *f = &s->funcs[i];
        size_t cap = strlen(f->file) + strlen(f->function) + 32;
        char *key = malloc(cap);
        if (key == NULL)
            return TW_ERR;
        int n = snprintf(key, cap, "%s\n%lld\n%s", f->file, (long long)f->line,
                         f->function);
        TW_ASSERT(n > 0 && (size_t)n < cap);
        size_t klen = (size_t)n;
        uint32_t at = 0;
        if (!tw_strmap_get(&g->index, key, klen, &at)) {
            if (g->nfuncs >= UINT32_MAX ||
                tw_grow((void **)&g->funcs, &g->cap, g->nfuncs + 1,
                        sizeof(*g->funcs), 64) != TW_OK) {
                free(key);
                return TW_ERR;
            }
            func_sum *fs = &g->funcs[g->nfuncs];
            memset(fs, 0, sizeof(*fs));
            fs->file = strdup(f->file);
            fs->function = strdup(f->function);
            fs->line = f->line;
            if (fs->file == NULL || fs->function == NULL ||
                tw_strmap_put(&g->index, key, klen, (uint32_t)g->nfuncs) !=
                    TW_OK) {
                free(fs->file);
                free(fs->function);
                free(key);
                return TW_ERR;
            }
            at = (uint32_t)g->nfuncs++;
        }
        free(key);
        func_sum *fs = &g->funcs[at];
        fs->cc += f->cc;
        fs->nc += f->nc;
        fs->tt += f->tt;
        fs->ct += f->ct;
    }
    return TW_OK;
}

/* ---- output -------------------------------------------------------------- */

typedef struct ranked {
    const func_sum *f;
    size_t order; /* first seen first among equals, as pstats' stable sort */
    tw_pystats_sort sort;
} ranked;

static double sort_value(const func_sum *f, tw_pystats_sort s)
{
    switch (s) {
    case TW_PYSTATS_SORT_TOTTIME:
        return f->tt;
    case TW_PYSTATS_SORT_CUMTIME:
        return f->ct;
    case TW_PYSTATS_SORT_PCALLS:
        return (double)f->cc;
    case TW_PYSTATS_SORT_NCALLS:
        return (double)f->nc;
    }
    return 0;
}

static int cmp_ranked(const void *x, const void *y)
{
    const ranked *a = x, *b = y;
    double va = sort_value(a->f, a->sort), vb = sort_value(b->f, b->sort);
    if (va != vb)
        return va > vb ? -1 : 1;
    return a->order < b->order ? -1 : a->order > b->order;
}

/* pstats' func_std_string: built-ins ('~', 0, name) print their name */
static void print_name(FILE *out, const func_sum *f)
{
    if (strcmp(f->file, "~") == 0 && f->line == 0) {
        size_t n = strlen(f->function);
        if (n >= 2 && f->function[0] == '<' && f->function[n - 1] == '>')
            fprintf(out, "{%.*s}\n", (int)(n - 2), f->function + 1);
        else
            fprintf(out, "%s\n", f->function);
    } else {
        fprintf(out, "%s:%lld(%s)\n", f->file, (long long)f->line, f->function);
    }
}

/* one row as pstats' print_line writes it */
static void print_row(FILE *out, const func_sum *f)
{
    char calls[48];
    if (f->nc != f->cc)
        snprintf(calls, sizeof(calls), "%lld/%lld", (long long)f->nc,
                 (long long)f->cc);
    else
        snprintf(calls, sizeof(calls), "%lld", (long long)f->nc);
    fprintf(out, "%9s %8.3f ", calls, f->tt);
    if (f->nc == 0)
        fprintf(out, "%8s ", "");
    else
        fprintf(out, "%8.3f ", f->tt / (double)f->nc);
    fprintf(out, "%8.3f ", f->ct);
    if (f->cc == 0)
        fprintf(out, "%8s ", "");
    else
        fprintf(out, "%8.3f ", f->ct / (double)f->cc);
    print_name(out, f);
}

static ranked *rank(const group *g, tw_pystats_sort sort, size_t *n)
{
    ranked *r = calloc(g->nfuncs + 1, sizeof(*r));
    if (r == NULL)
        return NULL;
    for (size_t i = 0; i < g->nfuncs; i++)
        r[i] = (ranked){&g->funcs[i], i, sort};
    qsort(r, g->nfuncs, sizeof(*r), cmp_ranked);
    *n = g->nfuncs;
    return r;
}

static const char *const sort_names[] = {"tottime", "cumtime", "pcalls",
                                         "ncalls"};

static int write_text(const analysis *a, FILE *out)
{
    const tw_pystats_opts *o = a->o;
    if (o->list) {
        fprintf(out, "intervals (node mode start_us start end_us end "
                     "functions):\n");
        for (size_t i = 0; i < a->niv; i++) {
            const interval *iv = &a->iv[i];
            if (!selected(a, iv))
                continue;
            if (iv->known)
                fprintf(out, "  %s %s %lld %s-%lld %lld %s-%lld %zu\n",
                        iv->node, iv->mode[0] ? iv->mode : "-",
                        (long long)iv->start_us, phase_names[iv->start_phase],
                        (long long)iv->start_step, (long long)iv->end_us,
                        phase_names[iv->end_phase], (long long)iv->end_step,
                        iv->functions);
            else
                fprintf(out, "  %s %s %zu\n", iv->node, iv->path,
                        iv->functions);
        }
    }
    for (size_t gi = 0; gi < a->ngroups; gi++) {
        const group *g = &a->groups[gi];
        size_t n;
        ranked *r = rank(g, o->sort, &n);
        if (r == NULL)
            return TW_ERR;
        size_t shown = o->top > 0 && o->top < n ? o->top : n;
        fprintf(out, "\n%s: %zu intervals, %zu functions, by %s (top %zu)\n\n",
                g->name, g->nintervals, n, sort_names[o->sort], shown);
        fprintf(out, "   ncalls  tottime  percall  cumtime  percall "
                     "filename:lineno(function)\n");
        for (size_t i = 0; i < shown; i++)
            print_row(out, r[i].f);
        free(r);
    }
    if (a->skipped > 0)
        fprintf(out, "\nskipped: %zu (bad names, files or messages)\n",
                a->skipped);
    return ferror(out) ? TW_ERR : TW_OK;
}

static int write_json(const analysis *a, FILE *out)
{
    const tw_pystats_opts *o = a->o;
    tw_json *j = tw_json_new();
    if (j == NULL)
        return TW_ERR;
    int rc = TW_OK;
    tw_json_object_begin(j);
    tw_json_key(j, "intervals");
    tw_json_array_begin(j);
    for (size_t i = 0; i < a->niv; i++) {
        const interval *iv = &a->iv[i];
        if (!selected(a, iv))
            continue;
        tw_json_object_begin(j);
        tw_json_key(j, "node");
        tw_json_string(j, iv->node);
        tw_json_key(j, "path");
        tw_json_string(j, iv->path);
        if (iv->known) {
            tw_json_key(j, "mode");
            if (iv->mode[0])
                tw_json_string(j, iv->mode);
            else
                tw_json_null(j);
            tw_json_key(j, "start_us");
            tw_json_int(j, iv->start_us);
            tw_json_key(j, "start_phase");
            tw_json_string(j, phase_names[iv->start_phase]);
            tw_json_key(j, "start_step");
            tw_json_int(j, iv->start_step);
            tw_json_key(j, "end_us");
            tw_json_int(j, iv->end_us);
            tw_json_key(j, "end_phase");
            tw_json_string(j, phase_names[iv->end_phase]);
            tw_json_key(j, "end_step");
            tw_json_int(j, iv->end_step);
        }
        tw_json_key(j, "functions");
        tw_json_int(j, (int64_t)iv->functions);
        tw_json_object_end(j);
    }
    tw_json_array_end(j);
    tw_json_key(j, "sort");
    tw_json_string(j, sort_names[o->sort]);
    tw_json_key(j, "groups");
    tw_json_array_begin(j);
    for (size_t gi = 0; gi < a->ngroups && rc == TW_OK; gi++) {
        const group *g = &a->groups[gi];
        size_t n;
        ranked *r = rank(g, o->sort, &n);
        if (r == NULL) {
            rc = TW_ERR;
            break;
        }
        size_t shown = o->top > 0 && o->top < n ? o->top : n;
        tw_json_object_begin(j);
        tw_json_key(j, "name");
        tw_json_string(j, g->name);
        tw_json_key(j, "intervals");
        tw_json_int(j, (int64_t)g->nintervals);
        tw_json_key(j, "functions");
        tw_json_int(j, (int64_t)n);
        tw_json_key(j, "top");
        tw_json_array_begin(j);
        for (size_t i = 0; i < shown; i++) {
            const func_sum *f = r[i].f;
            tw_json_object_begin(j);
            tw_json_key(j, "file");
            tw_json_string(j, f->file);
            tw_json_key(j, "line");
            tw_json_int(j, f->line);
            tw_json_key(j, "function");
            tw_json_string(j, f->function);
            tw_json_key(j, "primitive_calls");
            tw_json_int(j, f->cc);
            tw_json_key(j, "total_calls");
            tw_json_int(j, f->nc);
            tw_json_key(j, "total_time");
            tw_json_double(j, f->tt);
            tw_json_key(j, "cumulative_time");
            tw_json_double(j, f->ct);
            tw_json_object_end(j);
        }
        tw_json_array_end(j);
        tw_json_object_end(j);
        free(r);
    }
    tw_json_array_end(j);
    tw_json_key(j, "skipped");
    tw_json_int(j, (int64_t)a->skipped);
    tw_json_object_end(j);
    if (rc == TW_OK && !tw_json_failed(j))
        rc = fprintf(out, "%s\n", tw_json_str(j)) < 0 ? TW_ERR : TW_OK;
    else
        rc = TW_ERR;
    tw_json_free(j);
    return rc;
}

static void analysis_free(analysis *a)
{
    for (size_t i = 0; i < a->niv; i++) {
        free(a->iv[i].path);
        free(a->iv[i].node);
    }
    free(a->iv);
    for (size_t gi = 0; gi < a->ngroups; gi++) {
        group *g = &a->groups[gi];
        for (size_t i = 0; i < g->nfuncs; i++) {
            free(g->funcs[i].file);
            free(g->funcs[i].function);
        }
        free(g->funcs);
        tw_strmap_free(&g->index);
    }
}

/* Selects, adds and writes the intervals found (a->iv). */
static int analyse(analysis *a, FILE *out, char *err, size_t errlen)
{
    const tw_pystats_opts *o = a->o;
    int rc = TW_OK;
    if (o->between_from != NULL)
        between(a);
    for (size_t i = 0; i < a->niv && rc == TW_OK; i++) {
        interval *iv = &a->iv[i];
        if (!selected(a, iv))
            continue;
        char why[512];
        tw_pstats *read = NULL;
        const tw_pstats *s = iv->mem;
        if (s == NULL) {
            if (tw_pstats_read_file(iv->path, &read, why, sizeof(why)) !=
                TW_OK) {
                if (iv->known) { /* one bad file of a folder: counted */
                    bad(a, iv->path, why);
                    continue;
                }
                snprintf(err, errlen, "%s", why);
                rc = TW_ERR;
                break;
            }
            s = read;
        }
        char name[64];
        group_name(o, iv, name, sizeof(name));
        group *g = group_of(a, name);
        g->nintervals++;
        iv->functions = s->nfuncs;
        if (add_stats(g, s) != TW_OK) {
            snprintf(err, errlen, "out of memory adding %s", iv->path);
            rc = TW_ERR;
        }
        tw_pstats_free(read);
    }
    if (rc == TW_OK) {
        rc = o->json ? write_json(a, out) : write_text(a, out);
        if (rc != TW_OK)
            snprintf(err, errlen, "writing the output failed");
    }
    return rc;
}

int tw_pystats_run(const char *path, const tw_pystats_opts *o, FILE *out,
                   char *err, size_t errlen)
{
    analysis a = {.o = o};
    int rc = find_intervals(&a, path, err, errlen);
    if (rc == TW_OK)
        rc = analyse(&a, out, err, errlen);
    analysis_free(&a);
    return rc;
}

int tw_pystats_run_intervals(const tw_pystats_interval *in, size_t n,
                             size_t skipped, const tw_pystats_opts *o,
                             FILE *out, char *err, size_t errlen)
{
    analysis a = {.o = o, .skipped = skipped};
    int rc = TW_OK;
    for (size_t i = 0; i < n && rc == TW_OK; i++) {
        interval iv = {.start_us = in[i].start_us,
                       .end_us = in[i].end_us,
                       .start_step = in[i].start_step,
                       .end_step = in[i].end_step,
                       .start_phase = in[i].start_phase,
                       .end_phase = in[i].end_phase,
                       .known = 1,
                       .mem = in[i].stats};
        TW_ASSERT(in[i].stats != NULL && in[i].mode != NULL);
        snprintf(iv.mode, sizeof(iv.mode), "%s", in[i].mode);
        iv.node = strdup(in[i].node);
        iv.path = strdup(in[i].where);
        if (iv.node == NULL || iv.path == NULL || add_interval(&a, &iv)) {
            free(iv.node);
            free(iv.path);
            snprintf(err, errlen, "out of memory");
            rc = TW_ERR;
        }
    }
    if (a.niv > 1)
        qsort(a.iv, a.niv, sizeof(*a.iv), cmp_interval);
    if (rc == TW_OK)
        rc = analyse(&a, out, err, errlen);
    analysis_free(&a);
    return rc;
}
