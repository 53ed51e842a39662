/* reader_list.c - finds and orders the agent files of a profiler-output
 * folder (tw_folder_list, reader.h). */
#include "reader.h"
#include "reader_internal.h"
#include "tw_assert.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* A folder being or already walked, known by device and inode. */
typedef struct tw_walked_dir {
    dev_t dev;
    ino_t ino;
    char *path;  /* as first reached */
    int on_path; /* an ancestor of the folder being walked now */
} tw_walked_dir;

typedef struct tw_list_builder {
    tw_folder *folder;
    size_t cap;
    tw_walked_dir *dirs;
    size_t ndirs, dirs_cap;
    size_t problems_cap;
    int oom;
} tw_list_builder;

typedef struct tw_suffix_source {
    const char *suffix;
    tw_source source;
} tw_suffix_source;

static const tw_suffix_source tw_pevents_suffixes[] = {
    {"pythontimeline.json", TW_SOURCE_PYTHONTIMELINE},
    {"model_timeline.json", TW_SOURCE_MODEL_TIMELINE},
    {"horovod_timeline.json", TW_SOURCE_HOROVOD},
    {"smdataparallel_timeline.json", TW_SOURCE_SMDATAPARALLEL},
};

static int tw_is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static int tw_ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && memcmp(s + n - m, suffix, m) == 0;
}

static int tw_all_digits(const char *s, size_t n)
{
    if (n == 0)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!tw_is_digit(s[i]))
            return 0;
    return 1;
}

/* Parses n (<= 18) decimal digits. */
static int64_t tw_parse_digits(const char *s, size_t n)
{
    int64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v = v * 10 + (s[i] - '0');
    return v;
}

/* `<10 digits>.algo-<digits>.json`; *node gets "algo-<digits>". */
static int tw_match_system_name(const char *base, const char **node,
                                size_t *node_len, int64_t *ts_s)
{
    if (!tw_all_digits(base, 10) || base[10] != '.')
        return 0;
    const char *p = base + 11;
    if (strncmp(p, "algo-", 5) != 0)
        return 0;
    const char *d = p + 5;
    size_t nd = 0;
    while (tw_is_digit(d[nd]))
        nd++;
    if (nd == 0 || strcmp(d + nd, ".json") != 0)
        return 0;
    *node = p;
    *node_len = 5 + nd;
    *ts_s = tw_parse_digits(base, 10);
    return 1;
}

/* Node id of a pevents file: `<x>-algo<y>` becomes `algo<y>-<x>`. */
static char *tw_rewrite_node(const char *id, size_t len)
{
    char *out = malloc(len + 1);
    if (out == NULL)
        return NULL;
    const char *hit = NULL;
    for (size_t i = 1; i + 5 <= len; i++) {
        if (memcmp(id + i, "-algo", 5) == 0) {
            hit = id + i;
            break;
        }
    }
    if (hit == NULL) {
        memcpy(out, id, len);
        out[len] = '\0';
        return out;
    }
    size_t xlen = (size_t)(hit - id);
    size_t ylen = len - xlen - 5; /* after "-algo" */
    char *w = out;
    memcpy(w, "algo", 4);
    w += 4;
    memcpy(w, hit + 5, ylen);
    w += ylen;
    *w++ = '-';
    memcpy(w, id, xlen);
    w += xlen;
    *w = '\0';
    return out;
}

static tw_agent_file *tw_list_push(tw_list_builder *lb)
{
    tw_folder *f = lb->folder;
    if (f->nfiles == lb->cap) {
        size_t ncap = lb->cap ? lb->cap * 2 : 64;
        tw_agent_file *nf = realloc(f->files, ncap * sizeof(*nf));
        if (nf == NULL) {
            lb->oom = 1;
            return NULL;
        }
        f->files = nf;
        lb->cap = ncap;
    }
    tw_agent_file *af = &f->files[f->nfiles];
    memset(af, 0, sizeof(*af));
    return af;
}

/* `<node>_<start_us>_<end_us>.metadata`, digits parsed from the right. */
static int tw_parse_metadata_name(const char *name, int64_t *start_us,
                                  int64_t *end_us)
{
    size_t n = strlen(name);
    const char *ext = ".metadata";
    size_t elen = strlen(ext);
    if (n <= elen || memcmp(name + n - elen, ext, elen) != 0)
        return 0;
    size_t stem = n - elen;
    const char *u2 = NULL, *u1 = NULL;
    for (size_t i = stem; i-- > 0;) {
        if (name[i] == '_') {
            if (u2 == NULL) {
                u2 = name + i;
            } else {
                u1 = name + i;
                break;
            }
        }
    }
    if (u1 == NULL)
        return 0;
    size_t slen = (size_t)(u2 - u1 - 1);
    size_t endlen = (size_t)(name + stem - u2 - 1);
    if (!tw_all_digits(u1 + 1, slen) || slen > 18 ||
        !tw_all_digits(u2 + 1, endlen) || endlen > 18)
        return 0;
    *start_us = tw_parse_digits(u1 + 1, slen);
    *end_us = tw_parse_digits(u2 + 1, endlen);
    return 1;
}

/* Recursively looks for the smallest *.metadata path under dir whose name
 * parses. Returns 1 when found. */
static int tw_find_metadata(const char *dir, char **best, int64_t *start_us,
                            int64_t *end_us, int depth)
{
    if (depth > 16)
        return 0;
    DIR *d = opendir(dir);
    if (d == NULL)
        return 0;
    int found = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        size_t plen = strlen(dir) + 1 + strlen(de->d_name) + 1;
        char *path = malloc(plen);
        if (path == NULL)
            break;
        snprintf(path, plen, "%s/%s", dir, de->d_name);
        struct stat st;
        int64_t s = 0, e = 0;
        if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
            found |= tw_find_metadata(path, best, start_us, end_us, depth + 1);
        } else if (tw_parse_metadata_name(de->d_name, &s, &e) &&
                   (*best == NULL || strcmp(path, *best) < 0)) {
            free(*best);
            *best = path;
            path = NULL;
            *start_us = s;
            *end_us = e;
            found = 1;
        }
        free(path);
    }
    closedir(d);
    return found;
}

static void tw_list_tf_metadata(tw_agent_file *af)
{
    /* .../<step>/plugins/profile/<date>/<host>.trace.json.gz */
    char *dir = strdup(af->path);
    if (dir == NULL)
        return;
    for (int up = 0; up < 4; up++) {
        char *slash = strrchr(dir, '/');
        if (slash == NULL) {
            free(dir);
            return;
        }
        *slash = '\0';
    }
    char *best = NULL;
    int64_t s = 0, e = 0;
    if (dir[0] != '\0' && tw_find_metadata(dir, &best, &s, &e, 0)) {
        af->has_metadata = 1;
        af->base_time_us = s;
        af->file_ts_us = e;
    }
    free(best);
    free(dir);
}

/* A PyTorch profiler trace (reader.h), read once to anchor its time. */
static void tw_list_torch(tw_list_builder *lb, const char *path,
                          const char *base)
{
    tw_agent_file *af = tw_list_push(lb);
    if (af == NULL)
        return;
    af->path = strdup(path);
    if (af->path == NULL || tw_torch_describe(af, base) != TW_OK) {
        free(af->path);
        free(af->node);
        lb->oom = 1;
        return;
    }
    lb->folder->nfiles++;
}

static void tw_list_consider(tw_list_builder *lb, const char *path,
                             const char *base)
{
    const char *node = NULL;
    size_t node_len = 0;
    int64_t ts_s = 0;
    if (tw_match_system_name(base, &node, &node_len, &ts_s)) {
        tw_agent_file *af = tw_list_push(lb);
        if (af == NULL)
            return;
        af->kind = TW_FILE_SYSTEM;
        af->file_ts_us = ts_s * 1000000;
        af->path = strdup(path);
        af->node = strndup(node, node_len);
        if (af->path == NULL || af->node == NULL) {
            free(af->path);
            free(af->node);
            lb->oom = 1;
            return;
        }
        lb->folder->nfiles++;
        return;
    }
    if (strstr(path, "pevents") != NULL && tw_ends_with(base, ".json")) {
        const char *u1 = strchr(base, '_');
        const char *u2 = u1 ? strchr(u1 + 1, '_') : NULL;
        if (u2 == NULL || !tw_all_digits(base, (size_t)(u1 - base)) ||
            u1 - base > 18)
            return;
        size_t i,
            nsuf = sizeof(tw_pevents_suffixes) / sizeof(*tw_pevents_suffixes);
        for (i = 0; i < nsuf; i++)
            if (tw_ends_with(base, tw_pevents_suffixes[i].suffix))
                break;
        if (i == nsuf)
            return;
        tw_agent_file *af = tw_list_push(lb);
        if (af == NULL)
            return;
        af->kind = TW_FILE_FRAMEWORK;
        af->source = tw_pevents_suffixes[i].source;
        af->file_ts_us = tw_parse_digits(base, (size_t)(u1 - base));
        af->path = strdup(path);
        af->node = tw_rewrite_node(u1 + 1, (size_t)(u2 - u1 - 1));
        if (af->path == NULL || af->node == NULL) {
            free(af->path);
            free(af->node);
            lb->oom = 1;
            return;
        }
        lb->folder->nfiles++;
        return;
    }
    if (tw_ends_with(base, ".pt.trace.json") ||
        tw_ends_with(base, ".pt.trace.json.gz")) {
        tw_list_torch(lb, path, base);
        return;
    }
    if (tw_ends_with(base, "trace.json.gz") &&
        strstr(path, "tensorflow/detailed_profiling") != NULL) {
        tw_agent_file *af = tw_list_push(lb);
        if (af == NULL)
            return;
        af->kind = TW_FILE_FRAMEWORK;
        af->source = TW_SOURCE_TF_PROFILER;
        af->path = strdup(path);
        const char *dot = strchr(base, '.');
        af->node = strndup(base, (size_t)(dot - base));
        if (af->path == NULL || af->node == NULL) {
            free(af->path);
            free(af->node);
            lb->oom = 1;
            return;
        }
        tw_list_tf_metadata(af);
        lb->folder->nfiles++;
    }
}

static void tw_list_problem(tw_list_builder *lb, tw_dir_problem_kind kind,
                            const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Records a folder the walk could not or would not enter. */
static void tw_list_problem(tw_list_builder *lb, tw_dir_problem_kind kind,
                            const char *path, const char *fmt, ...)
{
    tw_folder *f = lb->folder;
    if (f->nproblems == lb->problems_cap) {
        size_t ncap = lb->problems_cap ? lb->problems_cap * 2 : 8;
        tw_dir_problem *np = realloc(f->problems, ncap * sizeof(*np));
        if (np == NULL) {
            lb->oom = 1;
            return;
        }
        f->problems = np;
        lb->problems_cap = ncap;
    }
    char reason[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof(reason), fmt, ap);
    va_end(ap);
    tw_dir_problem *p = &f->problems[f->nproblems];
    p->kind = kind;
    p->path = strdup(path);
    p->reason = strdup(reason);
    if (p->path == NULL || p->reason == NULL) {
        free(p->path);
        free(p->reason);
        lb->oom = 1;
        return;
    }
    f->nproblems++;
    if (kind == TW_DIR_UNREADABLE)
        f->unreadable_dirs++;
    else
        f->skipped_dirs++;
}

/* Claims the folder for this walk: 1 when it is new (now on the path), 0
 * when it was walked before or is an ancestor (recorded as a problem). */
static int tw_list_enter(tw_list_builder *lb, const char *dir,
                         const struct stat *st)
{
    for (size_t i = 0; i < lb->ndirs; i++) {
        const tw_walked_dir *w = &lb->dirs[i];
        if (w->dev != st->st_dev || w->ino != st->st_ino)
            continue;
        if (w->on_path)
            tw_list_problem(lb, TW_DIR_LOOP, dir,
                            "symbolic link loop: this is the folder %s "
                            "again, not followed",
                            w->path);
        else
            tw_list_problem(lb, TW_DIR_REPEAT, dir,
                            "same folder as %s (already listed), not listed "
                            "twice",
                            w->path);
        return 0;
    }
    if (lb->ndirs == lb->dirs_cap) {
        size_t ncap = lb->dirs_cap ? lb->dirs_cap * 2 : 32;
        tw_walked_dir *nd = realloc(lb->dirs, ncap * sizeof(*nd));
        if (nd == NULL) {
            lb->oom = 1;
            return 0;
        }
        lb->dirs = nd;
        lb->dirs_cap = ncap;
    }
    tw_walked_dir *w = &lb->dirs[lb->ndirs];
    w->dev = st->st_dev;
    w->ino = st->st_ino;
    w->on_path = 1;
    w->path = strdup(dir);
    if (w->path == NULL) {
        lb->oom = 1;
        return 0;
    }
    lb->ndirs++;
    return 1;
}

static void tw_list_leave(tw_list_builder *lb, const struct stat *st)
{
    for (size_t i = lb->ndirs; i-- > 0;) {
        if (lb->dirs[i].dev == st->st_dev && lb->dirs[i].ino == st->st_ino) {
            lb->dirs[i].on_path = 0;
            return;
        }
    }
    TW_ASSERT(!"left a folder that was never entered");
}

static int tw_cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names in dir except . and .., sorted (the walk is deterministic
 * whatever order readdir gives). TW_ERR: recorded as a problem, or oom. */
static int tw_list_names(tw_list_builder *lb, const char *dir, char ***out,
                         size_t *n)
{
    *out = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (d == NULL) {
        tw_list_problem(lb, TW_DIR_UNREADABLE, dir, "cannot open folder: %s",
                        strerror(errno));
        return TW_ERR;
    }
    char **names = NULL;
    size_t count = 0, cap = 0;
    int rc = TW_OK;
    for (;;) {
        errno = 0;
        struct dirent *de = readdir(d);
        if (de == NULL) {
            if (errno != 0) {
                tw_list_problem(lb, TW_DIR_UNREADABLE, dir,
                                "cannot read folder: %s", strerror(errno));
                rc = TW_ERR;
            }
            break;
        }
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (count == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            char **nn = realloc(names, ncap * sizeof(*nn));
            if (nn == NULL) {
                lb->oom = 1;
                rc = TW_ERR;
                break;
            }
            names = nn;
            cap = ncap;
        }
        if ((names[count] = strdup(de->d_name)) == NULL) {
            lb->oom = 1;
            rc = TW_ERR;
            break;
        }
        count++;
    }
    closedir(d);
    if (rc != TW_OK) {
        for (size_t i = 0; i < count; i++)
            free(names[i]);
        free(names);
        return rc;
    }
    if (count > 1)
        qsort(names, count, sizeof(*names), tw_cmp_names);
    *out = names;
    *n = count;
    return TW_OK;
}

/* Walks dir (st: its stat, links followed); one open folder at a time. */
static void tw_list_walk(tw_list_builder *lb, const char *dir,
                         const struct stat *st, int depth)
{
    if (lb->oom)
        return;
    if (depth > TW_LIST_MAX_DEPTH) {
        tw_list_problem(lb, TW_DIR_TOO_DEEP, dir,
                        "more than %d folders deep, not walked",
                        TW_LIST_MAX_DEPTH);
        return;
    }
    if (!tw_list_enter(lb, dir, st))
        return;
    char **names = NULL;
    size_t n = 0;
    if (tw_list_names(lb, dir, &names, &n) == TW_OK) {
        for (size_t i = 0; i < n && !lb->oom; i++) {
            size_t plen = strlen(dir) + 1 + strlen(names[i]) + 1;
            char *path = malloc(plen);
            if (path == NULL) {
                lb->oom = 1;
                break;
            }
            snprintf(path, plen, "%s/%s", dir, names[i]);
            struct stat est;
            if (lstat(path, &est) != 0) {
                if (errno != ENOENT) /* ENOENT: removed since the listing */
                    tw_list_problem(lb, TW_DIR_UNREADABLE, path,
                                    "cannot stat: %s", strerror(errno));
            } else if (S_ISLNK(est.st_mode) && stat(path, &est) != 0) {
                /* A dangling link is no data; one that cannot be followed
                 * (ELOOP, EACCES, ...) may hide some. */
                if (errno != ENOENT)
                    tw_list_problem(lb, TW_DIR_UNREADABLE, path,
                                    "cannot follow symbolic link: %s",
                                    strerror(errno));
            } else if (S_ISDIR(est.st_mode)) {
                tw_list_walk(lb, path, &est, depth + 1);
            } else if (S_ISREG(est.st_mode)) {
                tw_list_consider(lb, path, names[i]);
            }
            free(path);
        }
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    tw_list_leave(lb, st);
}

static int tw_list_cmp(const void *a, const void *b)
{
    const tw_agent_file *x = a, *y = b;
    if (x->feed_key_us != y->feed_key_us)
        return x->feed_key_us < y->feed_key_us ? -1 : 1;
    if (x->kind != y->kind)
        return x->kind == TW_FILE_SYSTEM ? -1 : 1;
    if (x->kind == TW_FILE_FRAMEWORK && x->source != y->source)
        return x->source < y->source ? -1 : 1;
    return strcmp(x->path, y->path);
}

static int tw_file_exists(const char *root, const char *rel)
{
    size_t n = strlen(root) + strlen(rel) + 2;
    char *p = malloc(n);
    if (p == NULL)
        return 0;
    snprintf(p, n, "%s/%s", root, rel);
    struct stat st;
    int ok = stat(p, &st) == 0;
    free(p);
    return ok;
}

/* Feed keys, first/latest timestamps and the feed order, from the files'
 * timestamps. A torch trace counts from its oldest event: unlike a pevents
 * file, one file may be the whole job. */
static void tw_folder_order(tw_folder *f)
{
    f->first_system_ts_us = f->latest_system_ts_us = 0;
    f->first_framework_ts_us = f->latest_framework_ts_us = 0;
    for (size_t i = 0; i < f->nfiles; i++) {
        tw_agent_file *af = &f->files[i];
        af->feed_key_us = af->file_ts_us;
        int64_t ts = af->file_ts_us;
        int64_t first = af->torch ? tw_torch_first_us(af) : ts;
        if (af->kind == TW_FILE_SYSTEM) {
            if (f->first_system_ts_us == 0 || ts < f->first_system_ts_us)
                f->first_system_ts_us = ts;
            if (ts > f->latest_system_ts_us)
                f->latest_system_ts_us = ts;
        } else if (ts != 0) {
            if (f->first_framework_ts_us == 0 ||
                first < f->first_framework_ts_us)
                f->first_framework_ts_us = first;
            if (ts > f->latest_framework_ts_us)
                f->latest_framework_ts_us = ts;
        }
    }
    if (f->nfiles > 1)
        qsort(f->files, f->nfiles, sizeof(*f->files), tw_list_cmp);
}

void tw_folder_anchor_traces(tw_folder *f, int64_t start_us)
{
    for (size_t i = 0; i < f->nfiles; i++)
        tw_torch_anchor_at(&f->files[i], start_us);
    tw_folder_order(f);
}

int tw_folder_list(const char *root, tw_folder **out, char *err, size_t errlen)
{
    *out = NULL;
    struct stat st;
    if (root == NULL || root[0] == '\0') {
        snprintf(err, errlen, "no profiler-output folder given");
        return TW_ERR;
    }
    if (stat(root, &st) != 0) {
        snprintf(err, errlen, "cannot open profiler-output folder %s: %s", root,
                 strerror(errno));
        return TW_ERR;
    }
    if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) {
        snprintf(err, errlen,
                 "%s is neither a profiler-output folder nor a trace file",
                 root);
        return TW_ERR;
    }
    tw_folder *f = calloc(1, sizeof(*f));
    if (f == NULL) {
        snprintf(err, errlen, "listing %s: out of memory", root);
        return TW_ERR;
    }
    f->root = strdup(root);
    if (f->root == NULL) {
        free(f);
        snprintf(err, errlen, "listing %s: out of memory", root);
        return TW_ERR;
    }
    size_t rl = strlen(f->root);
    while (rl > 1 && f->root[rl - 1] == '/')
        f->root[--rl] = '\0';

    tw_list_builder lb = {.folder = f};
    if (S_ISDIR(st.st_mode)) {
        tw_list_walk(&lb, f->root, &st, 0);
    } else {
        /* one trace file, whatever its name: a torch profiler trace */
        const char *slash = strrchr(f->root, '/');
        tw_list_torch(&lb, f->root, slash != NULL ? slash + 1 : f->root);
    }
    for (size_t i = 0; i < lb.ndirs; i++)
        free(lb.dirs[i].path);
    free(lb.dirs);
    if (lb.oom) {
        tw_folder_free(f);
        snprintf(err, errlen, "listing %s: out of memory", root);
        return TW_ERR;
    }
    tw_folder_order(f);
    f->job_finished = tw_file_exists(f->root, "system/training_job_end.ts") ||
                      tw_file_exists(f->root, "framework/training_job_end.ts");
    *out = f;
    return TW_OK;
}

void tw_folder_free(tw_folder *f)
{
    if (f == NULL)
        return;
    for (size_t i = 0; i < f->nfiles; i++) {
        free(f->files[i].path);
        free(f->files[i].node);
    }
    free(f->files);
    for (size_t i = 0; i < f->nproblems; i++) {
        free(f->problems[i].path);
        free(f->problems[i].reason);
    }
    free(f->problems);
    free(f->root);
    free(f);
}
