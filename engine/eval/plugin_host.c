/*
 * plugin_host.c - loading rule plugins, validating parameters, running rule
 * instances, and the tw_host services lent to plugins (plugin_host.h).
 */
#include "plugin_host.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "c_locale.h"
#include "finding_text.h"
#include "json_writer.h"
#include "log.h"
#include "numeric.h"
#include "plugin_guard.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

/* ---- registry ------------------------------------------------------------ */

struct tw_plugin {
    char *path;
    char *entry;
    void *handle;
    const tw_rule_descriptor *desc;
    uint32_t inputs; /* TW_INPUT_* bits the rule reads (plugin.h) */
    tw_rule_wallclock_fn wallclock; /* optional `<entry>_wallclock` */
    int builtin;                    /* found on the built-in search path */
    uintptr_t text_lo, text_hi;     /* its code, for the guard's timeouts */
    tw_plugin *next;
};

struct tw_registry {
    tw_plugin *plugins; /* every loaded object, newest first */
    char **dirs;        /* user-added search dirs, in order */
    size_t ndirs;
    int indexed;             /* built-in dirs scanned */
    char **names;            /* sorted built-in rule names */
    const tw_plugin **named; /* parallel to names */
    size_t nnames;
};

tw_registry *tw_registry_new(void)
{
    return calloc(1, sizeof(tw_registry));
}

void tw_registry_free(tw_registry *r)
{
    if (r == NULL)
        return;
    tw_plugin *p = r->plugins;
    while (p != NULL) {
        tw_plugin *next = p->next;
        /* Keep objects mapped under sanitizers so leak reports can still
         * symbolize plugin frames; dlclose otherwise. */
#if !defined(__SANITIZE_ADDRESS__)
        if (p->handle != NULL)
            dlclose(p->handle);
#endif
        free(p->path);
        free(p->entry);
        free(p);
        p = next;
    }
    for (size_t i = 0; i < r->ndirs; i++)
        free(r->dirs[i]);
    free(r->dirs);
    for (size_t i = 0; i < r->nnames; i++)
        free(r->names[i]);
    free(r->names);
    free(r->named);
    free(r);
}

int tw_registry_add_dir(tw_registry *r, const char *dir)
{
    char **nd = realloc(r->dirs, (r->ndirs + 1) * sizeof(char *));
    if (nd == NULL)
        return TW_ERR;
    r->dirs = nd;
    r->dirs[r->ndirs] = strdup(dir);
    if (r->dirs[r->ndirs] == NULL)
        return TW_ERR;
    r->ndirs++;
    r->indexed = 0; /* rescan with the new dir first */
    return TW_OK;
}

static int validate_descriptor(const tw_rule_descriptor *d, const char *path,
                               char *err, size_t errlen)
{
    if (d->abi_version < TW_PLUGIN_ABI_MIN_VERSION ||
        d->abi_version > TW_PLUGIN_ABI_VERSION) {
        snprintf(err, errlen,
                 "rule plugin '%s': ABI version %u, but this engine speaks "
                 "versions %u to %u (rebuild the plugin against this "
                 "trainwatch/plugin.h)",
                 path, d->abi_version, TW_PLUGIN_ABI_MIN_VERSION,
                 TW_PLUGIN_ABI_VERSION);
        return TW_ERR;
    }
    const char *missing = NULL;
    if (d->name == NULL || d->name[0] == '\0')
        missing = "name";
    else if (d->create == NULL)
        missing = "create";
    else if (d->scan == NULL)
        missing = "scan";
    else if (d->abi_version < 2 && d->report == NULL)
        missing = "report";
    else if (d->abi_version >= 2 && d->details == NULL)
        missing = "details (ABI 2 rules write Details; the host writes the "
                  "rest of the report)";
    else if (d->destroy == NULL)
        missing = "destroy";
    else if (d->nparams > 0 && d->params == NULL)
        missing = "params";
    if (missing != NULL) {
        snprintf(err, errlen, "rule plugin '%s': descriptor has no '%s'", path,
                 missing);
        return TW_ERR;
    }
    for (size_t i = 0; i < d->nparams; i++) {
        if (d->params[i].name == NULL) {
            snprintf(err, errlen,
                     "rule plugin '%s': parameter %zu of rule %s has no name",
                     path, i, d->name);
            return TW_ERR;
        }
    }
    return TW_OK;
}

/* The optional `<entry>_inputs` export (plugin.h); system and framework
 * without it (tensors only when a rule says it reads them). */
static uint32_t plugin_inputs(void *h, const char *entry)
{
    const uint32_t all = TW_INPUT_SYSTEM | TW_INPUT_FRAMEWORK;
    char name[256];
    int n =
        snprintf(name, sizeof(name), "%s%s", entry, TW_PLUGIN_INPUTS_SUFFIX);
    if (n < 0 || (size_t)n >= sizeof(name))
        return all;
    void *sym = dlsym(h, name);
    if (sym == NULL)
        return all;
    tw_rule_inputs_fn fn;
    memcpy(&fn, &sym, sizeof(fn)); /* object -> function pointer, per POSIX */
    uint32_t bits = fn() & (all | TW_INPUT_TENSOR);
    return bits != 0 ? bits : all;
}

/* The optional `<entry>_wallclock` export (plugin.h); NULL without it. */
static tw_rule_wallclock_fn plugin_wallclock(void *h, const char *entry)
{
    char name[256];
    int n =
        snprintf(name, sizeof(name), "%s%s", entry, TW_PLUGIN_WALLCLOCK_SUFFIX);
    if (n < 0 || (size_t)n >= sizeof(name))
        return NULL;
    void *sym = dlsym(h, name);
    if (sym == NULL)
        return NULL;
    tw_rule_wallclock_fn fn;
    memcpy(&fn, &sym, sizeof(fn)); /* object -> function pointer, per POSIX */
    return fn;
}

/* dlopen + entry + checks. On success the plugin joins the registry. */
static int load_object(tw_registry *r, const char *path, const char *entry,
                       const tw_plugin **out, char *err, size_t errlen)
{
    if (entry == NULL || entry[0] == '\0')
        entry = TW_PLUGIN_ENTRY;
    for (tw_plugin *p = r->plugins; p != NULL; p = p->next) {
        if (strcmp(p->path, path) == 0 && strcmp(p->entry, entry) == 0) {
            *out = p;
            return TW_OK;
        }
    }
    struct stat st;
    if (stat(path, &st) != 0) {
        snprintf(err, errlen, "rule plugin '%s': %s", path, strerror(errno));
        return TW_ERR;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "rule plugin '%s': not a regular file", path);
        return TW_ERR;
    }
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        const char *why = dlerror();
        snprintf(err, errlen, "rule plugin '%s': cannot load: %s", path,
                 why != NULL ? why : "unknown dlopen error");
        return TW_ERR;
    }
    dlerror();
    void *sym = dlsym(h, entry);
    if (sym == NULL) {
        snprintf(err, errlen,
                 "rule plugin '%s': entry symbol '%s' not found (set "
                 "rule_to_invoke to the function that returns the "
                 "tw_rule_descriptor)",
                 path, entry);
        dlclose(h);
        return TW_ERR;
    }
    tw_rule_entry_fn fn;
    memcpy(&fn, &sym, sizeof(fn)); /* object -> function pointer, per POSIX */
    const tw_rule_descriptor *d = fn();
    if (d == NULL) {
        snprintf(err, errlen, "rule plugin '%s': '%s' returned no descriptor",
                 path, entry);
        dlclose(h);
        return TW_ERR;
    }
    if (validate_descriptor(d, path, err, errlen) != TW_OK) {
        dlclose(h);
        return TW_ERR;
    }
    tw_plugin *p = calloc(1, sizeof(*p));
    if (p == NULL || (p->path = strdup(path)) == NULL ||
        (p->entry = strdup(entry)) == NULL) {
        if (p != NULL) {
            free(p->path);
            free(p);
        }
        dlclose(h);
        snprintf(err, errlen, "rule plugin '%s': out of memory", path);
        return TW_ERR;
    }
    p->handle = h;
    p->desc = d;
    p->inputs = plugin_inputs(h, entry);
    p->wallclock = plugin_wallclock(h, entry);
    void *code;
    memcpy(&code, &d->scan, sizeof(code));
    tw_guard_text_range(code, &p->text_lo, &p->text_hi);
    p->next = r->plugins;
    r->plugins = p;
    *out = p;
    return TW_OK;
}

int tw_registry_load(tw_registry *r, const char *path, const char *entry,
                     const tw_plugin **out, char *err, size_t errlen)
{
    return load_object(r, path, entry, out, err, errlen);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Scan one directory's *.so files into the name index (first dir wins). */
static void index_dir(tw_registry *r, const char *dir)
{
    DIR *dh = opendir(dir);
    if (dh == NULL)
        return;
    char **files = NULL;
    size_t nfiles = 0;
    struct dirent *de;
    while ((de = readdir(dh)) != NULL) {
        size_t len = strlen(de->d_name);
        if (len < 4 || strcmp(de->d_name + len - 3, ".so") != 0)
            continue;
        char **nf = realloc(files, (nfiles + 1) * sizeof(char *));
        if (nf == NULL)
            break;
        files = nf;
        files[nfiles] = malloc(strlen(dir) + len + 2);
        if (files[nfiles] == NULL)
            break;
        sprintf(files[nfiles], "%s/%s", dir, de->d_name);
        nfiles++;
    }
    closedir(dh);
    if (nfiles > 1)
        qsort(files, nfiles, sizeof(char *), cmp_str);
    for (size_t i = 0; i < nfiles; i++) {
        const tw_plugin *p;
        char err[512];
        if (load_object(r, files[i], NULL, &p, err, sizeof(err)) != TW_OK) {
            tw_log(TW_LOG_WARN, "skipping %s", err);
            free(files[i]);
            continue;
        }
        free(files[i]);
        ((tw_plugin *)p)->builtin = 1; /* the registry owns it */
        int dup = 0;
        for (size_t k = 0; k < r->nnames; k++)
            if (strcmp(r->names[k], p->desc->name) == 0)
                dup = 1;
        if (dup)
            continue;
        char **nn = realloc(r->names, (r->nnames + 1) * sizeof(char *));
        if (nn == NULL)
            continue;
        r->names = nn;
        const tw_plugin **np =
            realloc(r->named, (r->nnames + 1) * sizeof(tw_plugin *));
        if (np == NULL)
            continue;
        r->named = np;
        r->names[r->nnames] = strdup(p->desc->name);
        if (r->names[r->nnames] == NULL)
            continue;
        r->named[r->nnames] = p;
        r->nnames++;
    }
    free(files);
}

/* <dir of the running executable>/../lib/trainwatch/rules: an install
 * moved elsewhere (`cmake --install --prefix`) finds its own rules rather
 * than the ones of the prefix it was configured with. */
static void index_beside_executable(tw_registry *r)
{
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0 || (size_t)n >= sizeof(exe) - 1)
        return;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash == NULL)
        return;
    *slash = '\0';
    char dir[4200];
    snprintf(dir, sizeof(dir), "%s/../lib/trainwatch/rules", exe);
    index_dir(r, dir);
}

static void index_builtins(tw_registry *r)
{
    if (r->indexed)
        return;
    for (size_t i = 0; i < r->nnames; i++)
        free(r->names[i]);
    r->nnames = 0;
    for (size_t i = 0; i < r->ndirs; i++)
        index_dir(r, r->dirs[i]);
    const char *env = getenv("TRAINWATCH_RULES_DIR");
    if (env != NULL && env[0] != '\0')
        index_dir(r, env);
    index_beside_executable(r);
    index_dir(r, TW_RULES_BUILD_DIR);
    index_dir(r, TW_RULES_INSTALL_DIR);
    /* Keep names and plugins paired while sorting by name. */
    for (size_t i = 1; i < r->nnames; i++) {
        for (size_t k = i; k > 0 && strcmp(r->names[k - 1], r->names[k]) > 0;
             k--) {
            char *tn = r->names[k];
            r->names[k] = r->names[k - 1];
            r->names[k - 1] = tn;
            const tw_plugin *tp = r->named[k];
            r->named[k] = r->named[k - 1];
            r->named[k - 1] = tp;
        }
    }
    r->indexed = 1;
}

int tw_registry_find(tw_registry *r, const char *rule_name,
                     const tw_plugin **out, char *err, size_t errlen)
{
    index_builtins(r);
    for (size_t i = 0; i < r->nnames; i++) {
        if (strcmp(r->names[i], rule_name) == 0) {
            *out = r->named[i];
            return TW_OK;
        }
    }
    size_t o = (size_t)snprintf(
        err, errlen, "unknown rule '%s' (built-in rules:", rule_name);
    for (size_t i = 0; i < r->nnames && o < errlen; i++)
        o += (size_t)snprintf(err + o, errlen - o, " %s", r->names[i]);
    if (r->nnames == 0 && o < errlen)
        o += (size_t)snprintf(err + o, errlen - o,
                              " none found; set TRAINWATCH_RULES_DIR");
    if (o < errlen)
        snprintf(err + o, errlen - o, ")");
    return TW_ERR;
}

size_t tw_registry_list(tw_registry *r, const char *const **names)
{
    index_builtins(r);
    *names = (const char *const *)r->names;
    return r->nnames;
}

const tw_rule_descriptor *tw_plugin_descriptor(const tw_plugin *p)
{
    return p->desc;
}

const char *tw_plugin_path(const tw_plugin *p)
{
    return p->path;
}

/* ---- host services --------------------------------------------------------
 */

struct tw_host_ctx {
    tw_host host; /* first: plugins get &ctx->host */
    tw_registry *reg;
    tw_windows *windows;
    char *job;
    tw_rule *creating; /* the rule whose create() is running, if any */
    char **nodes;      /* copies of the job's system node ids (findings) */
    size_t nnodes;
    int64_t first_us; /* the job's first timestamp, from the scans */
    tw_isolation isolation;
};

/* Copies the node ids a scan shows that the ctx has not seen yet. */
static int host_note_nodes(tw_host_ctx *h, const tw_scan *scan)
{
    h->first_us = scan->first_timestamp_us;
    if (scan->nnodes <= h->nnodes)
        return TW_OK;
    char **n = realloc(h->nodes, scan->nnodes * sizeof(*n));
    if (n == NULL)
        return TW_ERR;
    h->nodes = n;
    for (size_t i = h->nnodes; i < scan->nnodes; i++) {
        h->nodes[i] = strdup(scan->nodes[i] != NULL ? scan->nodes[i] : "");
        if (h->nodes[i] == NULL)
            return TW_ERR;
        h->nnodes = i + 1;
    }
    return TW_OK;
}

static void host_log(void *ctx, tw_log_level level, const char *fmt, ...)
{
    tw_host_ctx *h = ctx;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    tw_log(level, "job %s: %s", h->job, msg);
}

static int host_request_window(void *ctx, tw_metric metric, uint32_t n)
{
    tw_host_ctx *h = ctx;
    return tw_windows_request(h->windows, metric, n);
}

static size_t host_window_read(const struct tw_windows *w, uint32_t series,
                               double *out, size_t n)
{
    return w != NULL ? tw_windows_read(w, series, out, n) : 0;
}

static int host_series_stats(const struct tw_windows *w, uint32_t series,
                             tw_series_stats *out)
{
    return w != NULL ? tw_windows_stats(w, series, out) : TW_ERR;
}

static int host_buf_write(tw_buf *b, const void *data, size_t len)
{
    return tw_buf_append(b, data, len);
}

static size_t host_buf_len(const tw_buf *b)
{
    return tw_buf_len(b);
}

static int rule_adopt(tw_rule *parent, tw_rule *child);

/* Sub-rules are ordinary rule instances sharing the parent's host ctx; the
 * host records them as children of the rule being created, so callers can
 * show each sub-rule's status and counters. */
static tw_subrule *host_subrule_create(void *ctx, const char *rule_name,
                                       const char *const *keys,
                                       const char *const *values, size_t n,
                                       tw_semantics semantics, char *err,
                                       size_t errlen)
{
    tw_host_ctx *h = ctx;
    const tw_plugin *p;
    if (tw_registry_find(h->reg, rule_name, &p, err, errlen) != TW_OK)
        return NULL;
    tw_rule *r;
    if (tw_rule_create(p, NULL, keys, values, n, semantics, h, &r, err,
                       errlen) != TW_OK)
        return NULL;
    if (h->creating != NULL && rule_adopt(h->creating, r) != TW_OK) {
        tw_rule_destroy(r);
        snprintf(err, errlen, "rule %s: out of memory", rule_name);
        return NULL;
    }
    return (tw_subrule *)r;
}

static int host_subrule_scan(tw_subrule *s, const tw_scan *scan,
                             tw_scan_result *out, char *err, size_t errlen)
{
    tw_rule *r = (tw_rule *)s;
    int rc = tw_rule_scan(r, scan);
    *out = *tw_rule_last_result(r);
    if (rc != TW_OK)
        snprintf(err, errlen, "%s", tw_rule_error(r));
    return rc;
}

static int host_subrule_report(tw_subrule *s, tw_json *out)
{
    return tw_rule_report((tw_rule *)s, out);
}

static int host_subrule_save(tw_subrule *s, tw_buf *out)
{
    return tw_rule_save((tw_rule *)s, out);
}

static int host_subrule_restore(tw_subrule *s, const void *data, size_t len,
                                char *err, size_t errlen)
{
    return tw_rule_restore((tw_rule *)s, data, len, err, errlen);
}

static const char *host_subrule_name(const tw_subrule *s)
{
    return tw_rule_name((const tw_rule *)s);
}

static void host_subrule_destroy(tw_subrule *s)
{
    tw_rule_destroy((tw_rule *)s);
}

tw_host_ctx *tw_host_ctx_new(tw_registry *reg, tw_windows *windows,
                             const char *job)
{
    tw_host_ctx *h = calloc(1, sizeof(*h));
    if (h == NULL)
        return NULL;
    h->job = strdup(job != NULL ? job : "-");
    if (h->job == NULL) {
        free(h);
        return NULL;
    }
    h->reg = reg;
    h->windows = windows;
    tw_isolation_default(&h->isolation);
    tw_host *t = &h->host;
    t->abi_version = TW_PLUGIN_ABI_VERSION;
    t->size = (uint32_t)sizeof(*t);
    t->ctx = h;
    t->log = host_log;
    t->request_window = host_request_window;
    t->window_read = host_window_read;
    t->series_stats = host_series_stats;
    t->quantile_sorted = tw_quantile_sorted;
    t->sort_doubles = tw_sort_doubles;
    t->sum_pairwise = tw_sum_pairwise;
    t->mean = tw_mean;
    t->std = tw_std;
    t->hist100 = tw_hist100;
    t->round2 = tw_round2;
    t->json_object_begin = tw_json_object_begin;
    t->json_object_end = tw_json_object_end;
    t->json_array_begin = tw_json_array_begin;
    t->json_array_end = tw_json_array_end;
    t->json_key = tw_json_key;
    t->json_key_double = tw_json_key_double;
    t->json_string = tw_json_string;
    t->json_double = tw_json_double;
    t->json_int = tw_json_int;
    t->json_bool = tw_json_bool;
    t->json_null = tw_json_null;
    t->json_raw = tw_json_raw;
    t->buf_write = host_buf_write;
    t->subrule_create = host_subrule_create;
    t->subrule_scan = host_subrule_scan;
    t->subrule_report = host_subrule_report;
    t->subrule_save = host_subrule_save;
    t->subrule_restore = host_subrule_restore;
    t->subrule_name = host_subrule_name;
    t->subrule_destroy = host_subrule_destroy;
    t->buf_len = host_buf_len;
    return h;
}

void tw_host_ctx_free(tw_host_ctx *h)
{
    if (h == NULL)
        return;
    for (size_t i = 0; i < h->nnodes; i++)
        free(h->nodes[i]);
    free(h->nodes);
    free(h->job);
    free(h);
}

void tw_isolation_default(tw_isolation *iso)
{
    iso->mode = TW_ISOLATE_CUSTOM;
    iso->timeout_ms = TW_ISOLATION_TIMEOUT_MS;
    iso->memory_mb = TW_ISOLATION_MEMORY_MB;
}

void tw_host_ctx_set_isolation(tw_host_ctx *h, const tw_isolation *iso)
{
    h->isolation = *iso;
}

const tw_host *tw_host_ctx_host(tw_host_ctx *h)
{
    return &h->host;
}

/* ---- parameters ------------------------------------------------------------
 */

static const char *type_name(tw_param_type t)
{
    switch (t) {
    case TW_PARAM_INT:
        return "an integer";
    case TW_PARAM_DOUBLE:
        return "a number";
    case TW_PARAM_BOOL:
        return "true or false";
    case TW_PARAM_STRING:
        return "a string";
    }
    return "a value";
}

static int is_none_literal(const char *s)
{
    return s == NULL || strcmp(s, "None") == 0 || strcmp(s, "null") == 0 ||
           strcmp(s, "~") == 0;
}

/* Parse `text` into v per spec; text storage is in `textbuf` (owned by the
 * rule). Python str() conventions: ints "70", floats repr "0.2",
 * bools "True"/"False", None "None". */
static int parse_param(const tw_param_spec *spec, const char *rule,
                       const char *text, tw_param_value *v, char **textbuf,
                       char *err, size_t errlen)
{
    char tmp[64];
    memset(v, 0, sizeof(*v));
    v->type = spec->type;
    if (is_none_literal(text)) {
        v->is_none = 1;
        *textbuf = strdup("None");
        v->text = *textbuf;
        return *textbuf ? TW_OK : TW_ERR;
    }
    char *end = NULL;
    switch (spec->type) {
    case TW_PARAM_INT: {
        errno = 0;
        long long x = strtoll(text, &end, 10);
        if (errno != 0 || end == text || *end != '\0') {
            /* Accept integral floats ("70.0") for integer parameters. */
            double d = strtod(text, &end);
            if (end == text || *end != '\0' || d != floor(d) || fabs(d) > 9e15)
                goto bad_type;
            x = (long long)d;
        }
        v->i = x;
        v->d = (double)x;
        snprintf(tmp, sizeof(tmp), "%lld", x);
        break;
    }
    case TW_PARAM_DOUBLE: {
        errno = 0;
        double d = strtod(text, &end);
        if (errno == ERANGE || end == text || *end != '\0' || isnan(d))
            goto bad_type;
        v->d = d;
        v->i = (int64_t)d;
        /* An integer literal stays an int in Python: str(50) is "50". */
        int integral = strspn(text, "+-0123456789") == strlen(text);
        if (integral)
            snprintf(tmp, sizeof(tmp), "%lld",
                     (long long)strtoll(text, NULL, 10));
        else
            tw_py_float_repr(d, tmp, sizeof(tmp));
        break;
    }
    case TW_PARAM_BOOL:
        if (strcmp(text, "true") == 0 || strcmp(text, "True") == 0 ||
            strcmp(text, "1") == 0)
            v->i = 1;
        else if (strcmp(text, "false") == 0 || strcmp(text, "False") == 0 ||
                 strcmp(text, "0") == 0)
            v->i = 0;
        else
            goto bad_type;
        v->d = (double)v->i;
        snprintf(tmp, sizeof(tmp), "%s", v->i ? "True" : "False");
        break;
    case TW_PARAM_STRING:
        *textbuf = strdup(text);
        if (*textbuf == NULL)
            return TW_ERR;
        v->s = *textbuf;
        v->text = *textbuf;
        return TW_OK;
    }
    if ((spec->type == TW_PARAM_INT || spec->type == TW_PARAM_DOUBLE) &&
        spec->min <= spec->max && (v->d < spec->min || v->d > spec->max)) {
        char lo[40], hi[40];
        tw_py_float_repr(spec->min, lo, sizeof(lo));
        tw_py_float_repr(spec->max, hi, sizeof(hi));
        snprintf(err, errlen,
                 "rule %s: parameter '%s' = %s is out of range [%s, %s]", rule,
                 spec->name, text, lo, hi);
        return TW_ERR;
    }
    *textbuf = strdup(tmp);
    if (*textbuf == NULL)
        return TW_ERR;
    v->text = *textbuf;
    return TW_OK;
bad_type:
    snprintf(err, errlen, "rule %s: parameter '%s' = '%s' is not %s", rule,
             spec->name, text, type_name(spec->type));
    return TW_ERR;
}

uint32_t tw_plugin_inputs(const tw_plugin *p)
{
    return p->inputs;
}

int tw_plugin_check_params(const tw_plugin *p, char *err, size_t errlen)
{
    const tw_rule_descriptor *d = p->desc;
    for (size_t i = 0; i < d->nparams; i++) {
        const tw_param_spec *spec = &d->params[i];
        for (size_t k = 0; k < i; k++) {
            if (strcmp(d->params[k].name, spec->name) == 0) {
                snprintf(err, errlen,
                         "rule plugin '%s': rule %s declares parameter '%s' "
                         "twice (entries %zu and %zu)",
                         p->path, d->name, spec->name, k, i);
                return TW_ERR;
            }
        }
        tw_param_value v;
        char *text = NULL;
        char why[512] = "";
        int rc = parse_param(spec, d->name, spec->default_value, &v, &text, why,
                             sizeof(why));
        free(text);
        if (rc != TW_OK) {
            snprintf(err, errlen, "rule plugin '%s': default value: %s",
                     p->path, why[0] != '\0' ? why : "out of memory");
            return TW_ERR;
        }
    }
    return TW_OK;
}

/* ---- rule instances --------------------------------------------------------
 */

struct tw_rule {
    const tw_plugin *plugin;
    const tw_rule_descriptor *desc;
    char *name;
    tw_host_ctx *host;
    void *state;
    tw_param_value *values;
    char **texts; /* owned strings behind values[i].text / .s */
    tw_params params;
    tw_rule_status status;
    int received_input; /* a scan carried input of a kind the rule reads */
    char error[512];
    tw_scan_result last;
    uint64_t scans;
    uint64_t conditions;
    int64_t met_first_us; /* window start of the first scan whose condition
                             was met; 0 = none yet */
    int64_t met_last_us;  /* window end of the last such scan */
    tw_rule *parent;      /* the rule that created this one, or NULL */
    tw_rule **children;   /* sub-rules, in creation order (not owned: the
                             parent plugin destroys them) */
    size_t nchildren;
    int isolated;           /* plugin calls run under the guard */
    tw_guard_limits limits; /* for those calls */
    int abandoned; /* a guarded call was stopped: the plugin's state may be
                      inconsistent, so it is never touched again */
};

static int rule_adopt(tw_rule *parent, tw_rule *child)
{
    tw_rule **nc =
        realloc(parent->children, (parent->nchildren + 1) * sizeof(tw_rule *));
    if (nc == NULL)
        return TW_ERR;
    parent->children = nc;
    parent->children[parent->nchildren++] = child;
    child->parent = parent;
    return TW_OK;
}

size_t tw_rule_nchildren(const tw_rule *r)
{
    return r->nchildren;
}

tw_rule *tw_rule_child(const tw_rule *r, size_t i)
{
    return i < r->nchildren ? r->children[i] : NULL;
}

const char *tw_rule_status_name(tw_rule_status s)
{
    switch (s) {
    case TW_STATUS_IN_PROGRESS:
        return "InProgress";
    case TW_STATUS_NO_ISSUES_FOUND:
        return "NoIssuesFound";
    case TW_STATUS_ISSUES_FOUND:
        return "IssuesFound";
    case TW_STATUS_ERROR:
        return "Error";
    case TW_STATUS_NO_DATA:
        return "NoData";
    }
    return "Unknown";
}

static void rule_free_params(tw_rule *r)
{
    if (r->texts != NULL)
        for (size_t i = 0; i < r->desc->nparams; i++)
            free(r->texts[i]);
    free(r->texts);
    free(r->values);
}

int tw_rule_create(const tw_plugin *p, const char *display_name,
                   const char *const *keys, const char *const *values, size_t n,
                   tw_semantics semantics, tw_host_ctx *host, tw_rule **out,
                   char *err, size_t errlen)
{
    const tw_rule_descriptor *d = p->desc;
    int rc;
    *out = NULL;
    /* Unknown names first: they are the likeliest typo. */
    for (size_t k = 0; k < n; k++) {
        size_t i;
        for (i = 0; i < d->nparams; i++)
            if (strcmp(keys[k], d->params[i].name) == 0)
                break;
        if (i == d->nparams) {
            size_t o = (size_t)snprintf(
                err, errlen, "rule %s: unknown parameter '%s' (known:", d->name,
                keys[k]);
            for (i = 0; i < d->nparams && o < errlen; i++)
                o += (size_t)snprintf(err + o, errlen - o, " %s",
                                      d->params[i].name);
            if (d->nparams == 0 && o < errlen)
                o += (size_t)snprintf(err + o, errlen - o, " none");
            if (o < errlen)
                snprintf(err + o, errlen - o, ")");
            return TW_ERR;
        }
    }
    tw_rule *r = calloc(1, sizeof(*r));
    if (r == NULL)
        goto oom;
    r->plugin = p;
    r->desc = d;
    r->host = host;
    r->isolated = host->isolation.mode == TW_ISOLATE_ALL ||
                  (host->isolation.mode == TW_ISOLATE_CUSTOM && !p->builtin);
    r->limits.timeout_ms = host->isolation.timeout_ms;
    r->limits.memory_mb = host->isolation.memory_mb;
    r->limits.text_lo = p->text_lo;
    r->limits.text_hi = p->text_hi;
    r->name = strdup(display_name != NULL ? display_name : d->name);
    r->values = calloc(d->nparams ? d->nparams : 1, sizeof(tw_param_value));
    r->texts = calloc(d->nparams ? d->nparams : 1, sizeof(char *));
    if (r->name == NULL || r->values == NULL || r->texts == NULL)
        goto oom;
    for (size_t i = 0; i < d->nparams; i++) {
        const tw_param_spec *spec = &d->params[i];
        const char *text = spec->default_value;
        for (size_t k = 0; k < n; k++)
            if (strcmp(keys[k], spec->name) == 0)
                text = values[k]; /* the last one wins */
        if (parse_param(spec, d->name, text, &r->values[i], &r->texts[i], err,
                        errlen) != TW_OK) {
            if (err[0] == '\0')
                snprintf(err, errlen, "rule %s: out of memory", d->name);
            goto fail;
        }
    }
    r->params.values = r->values;
    r->params.nvalues = d->nparams;
    r->params.semantics = semantics;
    err[0] = '\0';
    tw_rule *outer = host->creating;
    host->creating = r;
    rc = d->create(tw_host_ctx_host(host), &r->params, &r->state, err, errlen);
    host->creating = outer;
    if (rc != TW_OK) {
        if (err[0] == '\0')
            snprintf(err, errlen, "rule %s: create failed", d->name);
        goto fail;
    }
    r->status = TW_STATUS_IN_PROGRESS;
    *out = r;
    return TW_OK;
oom:
    snprintf(err, errlen, "rule %s: out of memory", d->name);
fail:
    if (r != NULL) {
        while (r->nchildren > 0)
            tw_rule_destroy(r->children[r->nchildren - 1]);
        free(r->children);
        rule_free_params(r);
        free(r->name);
        free(r);
    }
    return TW_ERR;
}

void tw_rule_destroy(tw_rule *r)
{
    if (r == NULL)
        return;
    if (r->state != NULL && !r->abandoned)
        r->desc->destroy(r->state);
    /* Children the plugin did not destroy are released here. */
    while (r->nchildren > 0)
        tw_rule_destroy(r->children[r->nchildren - 1]);
    free(r->children);
    if (r->parent != NULL) {
        tw_rule *p = r->parent;
        for (size_t i = 0; i < p->nchildren; i++) {
            if (p->children[i] == r) {
                memmove(&p->children[i], &p->children[i + 1],
                        (p->nchildren - i - 1) * sizeof(tw_rule *));
                p->nchildren--;
                break;
            }
        }
    }
    rule_free_params(r);
    free(r->name);
    free(r);
}

/* The plugin's scan(), under the guard when the rule is isolated: a
 * stopped call returns TW_ERR with the reason in err and abandons the
 * plugin's state. */
static int guarded_scan(tw_rule *r, const tw_scan *scan, tw_scan_result *res,
                        char *err, size_t errlen)
{
    if (!r->isolated)
        return r->desc->scan(r->state, scan, res, err, errlen);
    tw_guard_frame f;
    if (TW_GUARD_TRY(&f)) {
        tw_guard_enter(&f, &r->limits);
        int rc = r->desc->scan(r->state, scan, res, err, errlen);
        tw_guard_leave(&f);
        return rc;
    }
    tw_guard_leave(&f);
    r->abandoned = 1;
#if defined(__SANITIZE_ADDRESS__)
    /* kept on purpose (its destroy() cannot be trusted): not a leak */
    if (r->state != NULL)
        __lsan_ignore_object(r->state);
#endif
    tw_guard_reason(&f, err, errlen);
    return TW_ERR;
}

/* The plugin's `<entry>_wallclock`, guarded like scan(). */
static int guarded_wallclock(tw_rule *r, const tw_wallclock *wc,
                             tw_scan_result *res, char *err, size_t errlen)
{
    tw_rule_wallclock_fn fn = r->plugin->wallclock;
    if (!r->isolated)
        return fn(r->state, wc, res, err, errlen);
    tw_guard_frame f;
    if (TW_GUARD_TRY(&f)) {
        tw_guard_enter(&f, &r->limits);
        int rc = fn(r->state, wc, res, err, errlen);
        tw_guard_leave(&f);
        return rc;
    }
    tw_guard_leave(&f);
    r->abandoned = 1;
#if defined(__SANITIZE_ADDRESS__)
    if (r->state != NULL)
        __lsan_ignore_object(r->state);
#endif
    tw_guard_reason(&f, err, errlen);
    return TW_ERR;
}

int tw_rule_has_wallclock(const tw_rule *r)
{
    return r->plugin->wallclock != NULL;
}

int tw_rule_wallclock(tw_rule *r, const tw_wallclock *wc)
{
    if (r->status == TW_STATUS_ERROR || r->plugin->wallclock == NULL)
        return TW_ERR;
    char err[sizeof(r->error) - 64];
    err[0] = '\0';
    tw_scan_result res = r->last;
    /* offline it runs right after a scan: that scan's verdict stands */
    int scan_met = wc->offline && r->last.condition_met;
    res.condition_met = 0;
    if (guarded_wallclock(r, wc, &res, err, sizeof(err)) != TW_OK) {
        r->status = TW_STATUS_ERROR;
        snprintf(r->error, sizeof(r->error), "wall clock %lld: %s",
                 (long long)wc->now_us,
                 err[0] ? err : "the rule failed without a reason");
        tw_log(TW_LOG_ERROR, "rule %s: %s", r->name, r->error);
        return TW_ERR;
    }
    r->last = res;
    if (scan_met) {
        r->last.condition_met = 1;
    } else if (res.condition_met) {
        r->conditions++;
        r->status = TW_STATUS_ISSUES_FOUND;
        if (r->met_first_us == 0)
            r->met_first_us = wc->now_us;
        r->met_last_us = wc->now_us;
    }
    return TW_OK;
}

int tw_rule_isolated(const tw_rule *r)
{
    return r->isolated;
}

int tw_rule_scan(tw_rule *r, const tw_scan *scan)
{
    if (r->status == TW_STATUS_ERROR)
        return TW_ERR;
    char err[sizeof(r->error) - 64];
    err[0] = '\0';
    tw_scan_result res = r->last;
    res.condition_met = 0;
    uint32_t in = r->plugin->inputs;
    if (((in & TW_INPUT_SYSTEM) && scan->nsamples > 0) ||
        ((in & TW_INPUT_FRAMEWORK) && scan->nevents > 0) ||
        ((in & TW_INPUT_TENSOR) && scan->ntensors > 0))
        r->received_input = 1;
    if (host_note_nodes(r->host, scan) != TW_OK) {
        r->status = TW_STATUS_ERROR;
        snprintf(r->error, sizeof(r->error), "scan %llu: out of memory",
                 (unsigned long long)scan->index);
        return TW_ERR;
    }
    if (guarded_scan(r, scan, &res, err, sizeof(err)) != TW_OK) {
        r->status = TW_STATUS_ERROR;
        snprintf(r->error, sizeof(r->error), "scan %llu: %s",
                 (unsigned long long)scan->index,
                 err[0] ? err : "the rule failed without a reason");
        tw_log(TW_LOG_ERROR, "rule %s: %s", r->name, r->error);
        return TW_ERR;
    }
    r->last = res;
    r->scans++;
    if (res.condition_met) {
        r->conditions++;
        r->status = TW_STATUS_ISSUES_FOUND;
        if (r->met_first_us == 0)
            r->met_first_us = scan->start_us;
        r->met_last_us = scan->end_us;
    }
    return TW_OK;
}

int tw_rule_received_input(const tw_rule *r)
{
    return r->received_input || r->last.datapoints > 0;
}

void tw_rule_finish(tw_rule *r)
{
    if (r->status == TW_STATUS_IN_PROGRESS)
        r->status = r->params.semantics == TW_SEMANTICS_FIXED &&
                            !tw_rule_received_input(r)
                        ? TW_STATUS_NO_DATA
                        : TW_STATUS_NO_ISSUES_FOUND;
    for (size_t i = 0; i < r->nchildren; i++)
        tw_rule_finish(r->children[i]);
}

tw_rule_status tw_rule_get_status(const tw_rule *r)
{
    return r->status;
}

const char *tw_rule_name(const tw_rule *r)
{
    return r->name;
}

const char *tw_rule_error(const tw_rule *r)
{
    return r->error;
}

const tw_scan_result *tw_rule_last_result(const tw_rule *r)
{
    return &r->last;
}

uint64_t tw_rule_scans(const tw_rule *r)
{
    return r->scans;
}

uint64_t tw_rule_conditions_met(const tw_rule *r)
{
    return r->conditions;
}

tw_semantics tw_rule_semantics(const tw_rule *r)
{
    return r->params.semantics;
}

const tw_rule_descriptor *tw_rule_descriptor_of(const tw_rule *r)
{
    return r->desc;
}

const tw_params *tw_rule_params(const tw_rule *r)
{
    return &r->params;
}

/* RuleParameters when the rule does not give its own: `name:value` per
 * parameter that is not None, in descriptor order. */
static int write_default_parameters(const tw_rule *r, tw_json *j)
{
    size_t len = 1;
    for (size_t i = 0; i < r->params.nvalues; i++)
        if (!r->values[i].is_none)
            len +=
                strlen(r->desc->params[i].name) + strlen(r->values[i].text) + 2;
    char *text = malloc(len);
    if (text == NULL)
        return TW_ERR;
    size_t o = 0;
    text[0] = '\0';
    for (size_t i = 0; i < r->params.nvalues; i++)
        if (!r->values[i].is_none)
            o += (size_t)snprintf(text + o, len - o, "%s%s:%s", o ? "\n" : "",
                                  r->desc->params[i].name, r->values[i].text);
    tw_json_string(j, text);
    free(text);
    return TW_OK;
}

static int rule_report(tw_rule *r, tw_json *j)
{
    const tw_rule_descriptor *d = r->desc;
    if (r->abandoned && d->abi_version < 2) { /* nothing left to ask */
        tw_json_object_begin(j);
        tw_json_object_end(j);
        return TW_OK;
    }
    if (d->abi_version < 2)
        return d->report(r->state, j);
    tw_json_object_begin(j);
    tw_json_key(j, "RuleTriggered");
    tw_json_int(j, r->last.rule_triggered);
    tw_json_key(j, "Violations");
    tw_json_int(j, r->last.violations);
    tw_json_key(j, "Details");
    size_t before = tw_json_len(j);
    if (!r->abandoned && d->details(r->state, j) != TW_OK)
        return TW_ERR;
    if (tw_json_len(j) == before) { /* wrote nothing: an empty Details */
        tw_json_object_begin(j);
        tw_json_object_end(j);
    }
    tw_json_key(j, "Datapoints");
    tw_json_int(j, r->last.datapoints);
    tw_json_key(j, "RuleParameters");
    const char *text =
        d->parameters_text != NULL ? d->parameters_text(r->state) : NULL;
    if (text != NULL)
        tw_json_string(j, text);
    else if (write_default_parameters(r, j) != TW_OK)
        return TW_ERR;
    tw_json_object_end(j);
    return TW_OK;
}

int tw_rule_report(tw_rule *r, tw_json *j)
{
    tw_c_locale loc; /* numbers the rule formats itself keep their point */
    tw_c_locale_enter(&loc);
    int rc = rule_report(r, j);
    tw_c_locale_leave(&loc);
    return rc;
}

/* Host bookkeeping header written before the plugin's own bytes.
 * Version 2 ("TWR2") appends the met window; "TWR1" headers (older
 * builds) are read without it. */
typedef struct rule_ckpt_header {
    uint32_t magic;
    uint32_t status;
    uint64_t scans;
    uint64_t conditions;
    int64_t triggered, violations, datapoints;
    int32_t condition_met;
    uint32_t flags; /* TW_RULE_CKPT_INPUT; 0 in checkpoints of older builds */
    int64_t met_first_us, met_last_us; /* TWR2 only */
} rule_ckpt_header;

#define TW_RULE_CKPT_INPUT 1u /* received_input */

#define TW_RULE_CKPT_MAGIC_V1 0x54575231u /* "TWR1" */
#define TW_RULE_CKPT_MAGIC 0x54575232u    /* "TWR2" */
#define TW_RULE_CKPT_V1_SIZE offsetof(rule_ckpt_header, met_first_us)

int tw_rule_save(tw_rule *r, tw_buf *out)
{
    rule_ckpt_header h = {TW_RULE_CKPT_MAGIC,
                          (uint32_t)r->status,
                          r->scans,
                          r->conditions,
                          r->last.rule_triggered,
                          r->last.violations,
                          r->last.datapoints,
                          r->last.condition_met,
                          r->received_input ? TW_RULE_CKPT_INPUT : 0u,
                          r->met_first_us,
                          r->met_last_us};
    if (tw_buf_append(out, &h, sizeof(h)) != TW_OK)
        return TW_ERR;
    if (r->desc->save == NULL || r->abandoned)
        return TW_OK;
    return r->desc->save(r->state, out);
}

int tw_rule_restore(tw_rule *r, const void *data, size_t len, char *err,
                    size_t errlen)
{
    rule_ckpt_header h;
    memset(&h, 0, sizeof(h));
    if (len >= sizeof(h.magic))
        memcpy(&h.magic, data, sizeof(h.magic));
    size_t hsize =
        h.magic == TW_RULE_CKPT_MAGIC_V1 ? TW_RULE_CKPT_V1_SIZE : sizeof(h);
    if (len < hsize) {
        snprintf(err, errlen, "rule %s: checkpoint of %zu bytes is truncated",
                 r->name, len);
        return TW_ERR;
    }
    memcpy(&h, data, hsize);
    if ((h.magic != TW_RULE_CKPT_MAGIC && h.magic != TW_RULE_CKPT_MAGIC_V1) ||
        h.status > TW_STATUS_NO_DATA) {
        snprintf(err, errlen, "rule %s: checkpoint header is corrupt", r->name);
        return TW_ERR;
    }
    const uint8_t *rest = (const uint8_t *)data + hsize;
    size_t nrest = len - hsize;
    if (h.status == TW_STATUS_ERROR && nrest == 0) {
        /* a rule stopped by the guard saved no plugin bytes: the fresh
         * state stays as created, unused */
    } else if (r->desc->restore != NULL) {
        if (r->desc->restore(r->state, rest, nrest, err, errlen) != TW_OK)
            return TW_ERR;
    } else if (nrest != 0) {
        snprintf(err, errlen,
                 "rule %s: checkpoint carries state but the plugin cannot "
                 "restore",
                 r->name);
        return TW_ERR;
    }
    r->status = (tw_rule_status)h.status;
    r->received_input = (h.flags & TW_RULE_CKPT_INPUT) != 0;
    r->scans = h.scans;
    r->conditions = h.conditions;
    r->last.rule_triggered = h.triggered;
    r->last.violations = h.violations;
    r->last.datapoints = h.datapoints;
    r->last.condition_met = h.condition_met;
    r->met_first_us = h.met_first_us;
    r->met_last_us = h.met_last_us;
    return TW_OK;
}

/* ---- findings (plugin.h, ABI 2) ------------------------------------------ */

static void finding_generic(const tw_rule *r, tw_finding *f)
{
    const tw_scan_result *c = &r->last;
    if (f->summary[0] == '\0')
        snprintf(f->summary, sizeof(f->summary),
                 "%s found %lld violation(s) in %lld datapoints.", r->name,
                 (long long)c->violations, (long long)c->datapoints);
    if (f->magnitude[0] == '\0') {
        if (c->datapoints > 0)
            snprintf(f->magnitude, sizeof(f->magnitude),
                     "%lld of %lld datapoints (%.1f %%) violated the rule; "
                     "its condition held in %llu of %llu scans",
                     (long long)c->violations, (long long)c->datapoints,
                     100.0 * (double)c->violations / (double)c->datapoints,
                     (unsigned long long)r->conditions,
                     (unsigned long long)r->scans);
        else
            snprintf(f->magnitude, sizeof(f->magnitude),
                     "%lld violation(s); its condition held in %llu of %llu "
                     "scans",
                     (long long)c->violations,
                     (unsigned long long)r->conditions,
                     (unsigned long long)r->scans);
    }
    if (f->recommendation[0] == '\0')
        snprintf(f->recommendation, sizeof(f->recommendation),
                 "The rule gives no advice of its own: read its report "
                 "(eval --json, or the results file) for what it measured.");
    if (f->first_us == 0 && f->last_us == 0) {
        f->first_us = r->met_first_us;
        f->last_us = r->met_last_us;
    }
    if (f->parameters[0] == '\0') {
        size_t o = 0;
        for (size_t i = 0; i < r->desc->nparams && o < sizeof(f->parameters);
             i++)
            o += (size_t)snprintf(
                f->parameters + o, sizeof(f->parameters) - o, "%s%s %s",
                i > 0 ? ", " : "", r->desc->params[i].name,
                r->values[i].text != NULL ? r->values[i].text : "None");
    }
    if (f->nnames > TW_FINDING_MAX_NODES)
        f->nnames = TW_FINDING_MAX_NODES;
    if (f->ninvolved < f->nnames)
        f->ninvolved = f->nnames;
    /* the rule's strings may arrive unterminated when cut carelessly */
    f->unit[sizeof(f->unit) - 1] = '\0';
    f->magnitude[sizeof(f->magnitude) - 1] = '\0';
    f->summary[sizeof(f->summary) - 1] = '\0';
    f->recommendation[sizeof(f->recommendation) - 1] = '\0';
    f->parameters[sizeof(f->parameters) - 1] = '\0';
    for (uint32_t i = 0; i < f->nnames; i++)
        f->names[i][TW_FINDING_NAME_LEN - 1] = '\0';
    /* a text cut at its buffer's end may have split a character */
    char *texts[] = {f->unit, f->magnitude, f->summary, f->recommendation,
                     f->parameters};
    for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++)
        tw_utf8_cut(texts[i], strlen(texts[i]));
    for (uint32_t i = 0; i < f->nnames; i++)
        tw_utf8_cut(f->names[i], strlen(f->names[i]));
}

int tw_rule_finding(const tw_rule *r, tw_finding *out)
{
    memset(out, 0, sizeof(*out));
    if (r->status != TW_STATUS_ISSUES_FOUND)
        return TW_ERR;
    if (r->desc->abi_version >= 2 && r->desc->finding != NULL) {
        tw_finding_ctx ctx = {.nodes = (const char *const *)r->host->nodes,
                              .nnodes = r->host->nnodes,
                              .first_timestamp_us = r->host->first_us,
                              .counters = &r->last};
        char err[256] = "";
        tw_c_locale loc; /* the rule's texts keep their decimal point */
        tw_c_locale_enter(&loc);
        int rc = r->desc->finding(r->state, &ctx, out, err, sizeof(err));
        tw_c_locale_leave(&loc);
        if (rc != TW_OK) {
            tw_log(TW_LOG_WARN, "rule %s: finding: %s (a generic one is shown)",
                   r->name, err[0] ? err : "failed without a reason");
            memset(out, 0, sizeof(*out));
        }
    }
    finding_generic(r, out);
    return TW_OK;
}

int tw_rule_checkpointable(const tw_rule *r, char *err, size_t errlen)
{
    const tw_rule_descriptor *d = r->desc;
    int stateless = d->abi_version >= 2 && (d->flags & TW_RULE_STATELESS);
    if (!stateless && (d->save == NULL || d->restore == NULL)) {
        snprintf(err, errlen,
                 "rule %s (%s): has no %s, and does not declare itself "
                 "stateless (TW_RULE_STATELESS): with a persistent state "
                 "store a restored job would start it from zero; add "
                 "save/restore to the plugin (trainwatch/plugin.h, ABI %u)",
                 r->name, r->plugin->path,
                 d->save == NULL && d->restore == NULL ? "save() nor restore()"
                 : d->save == NULL                     ? "save()"
                                                       : "restore()",
                 TW_PLUGIN_ABI_VERSION);
        return TW_ERR;
    }
    for (size_t i = 0; i < r->nchildren; i++)
        if (tw_rule_checkpointable(r->children[i], err, errlen) != TW_OK)
            return TW_ERR;
    return TW_OK;
}

int tw_rule_roundtrip(tw_rule *r, char *err, size_t errlen)
{
    if (r->status == TW_STATUS_ERROR)
        return TW_OK; /* its state is whatever the failure left */
    tw_buf *before = tw_buf_new(), *after = tw_buf_new();
    int rc = TW_ERR;
    if (before == NULL || after == NULL) {
        snprintf(err, errlen, "rule %s: out of memory", r->name);
        goto out;
    }
    if (tw_rule_save(r, before) != TW_OK) {
        snprintf(err, errlen, "rule %s: save failed", r->name);
        goto out;
    }
    /* a fresh instance with the same parameters, in place: its sub-rules
     * are created anew under this rule, as at start-up */
    if (r->state != NULL)
        r->desc->destroy(r->state);
    r->state = NULL;
    while (r->nchildren > 0)
        tw_rule_destroy(r->children[r->nchildren - 1]);
    tw_rule *outer = r->host->creating;
    r->host->creating = r;
    char cerr[256] = "";
    int crc = r->desc->create(tw_host_ctx_host(r->host), &r->params, &r->state,
                              cerr, sizeof(cerr));
    r->host->creating = outer;
    if (crc != TW_OK) {
        r->state = NULL;
        r->status = TW_STATUS_ERROR;
        snprintf(err, errlen, "rule %s: re-create failed: %s", r->name,
                 cerr[0] ? cerr : "no reason given");
        snprintf(r->error, sizeof(r->error), "%s", err);
        goto out;
    }
    if (tw_rule_restore(r, tw_buf_data(before), tw_buf_len(before), err,
                        errlen) != TW_OK) {
        r->status = TW_STATUS_ERROR;
        snprintf(r->error, sizeof(r->error), "%s", err);
        goto out;
    }
    /* what was restored must save to the same bytes */
    if (tw_rule_save(r, after) != TW_OK) {
        snprintf(err, errlen, "rule %s: save after restore failed", r->name);
        goto out;
    }
    size_t n = tw_buf_len(before), m = tw_buf_len(after);
    if (n != m || memcmp(tw_buf_data(before), tw_buf_data(after), n) != 0) {
        size_t at = 0;
        while (at < n && at < m &&
               tw_buf_data(before)[at] == tw_buf_data(after)[at])
            at++;
        snprintf(err, errlen,
                 "rule %s: restored state saves differently (%zu bytes "
                 "before, %zu after, first difference at byte %zu)",
                 r->name, n, m, at);
        goto out;
    }
    rc = TW_OK;
out:
    tw_buf_free(before);
    tw_buf_free(after);
    return rc;
}
