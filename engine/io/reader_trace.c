/* reader_trace.c - framework trace files (Chrome trace-event JSON, RULES.md
 * §1.3) into batches of tw_fw_event, and the per-source parser state that
 * persists across files (tw_trace_state, reader.h).
 *
 * The file is not parsed as one document: a small scanner finds each
 * element of the event array (tracking strings and nesting only), and
 * simdjson parses that element alone. A bad event then spoils only itself,
 * a truncated file still yields its complete events, and memory stays
 * bounded by the read buffer whatever the file size. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "reader_input.h"
#include "reader_internal.h"
#include "reader_json.h"
#include "tw_assert.h"

/* ------------------------------------------------------------------------
 * Parser state per source type
 * --------------------------------------------------------------------- */

typedef struct tw_open_begin {
    tw_json_num ts;
    char *name;
    int has_tid;
    int64_t tid;
} tw_open_begin;

typedef struct tw_pid_state {
    int used;
    int64_t pid;
    char *phase; /* NULL: not bound */
    tw_open_begin *stack;
    size_t nstack, stack_cap;
} tw_pid_state;

typedef struct tw_source_state {
    int64_t base_us;
    tw_pid_state *pids; /* open addressing on pid */
    size_t npids, cap;  /* cap: power of two or 0 */
} tw_source_state;

struct tw_trace_state {
    tw_source_state src[TW_SOURCE_COUNT];
};

tw_trace_state *tw_trace_state_new(void)
{
    return calloc(1, sizeof(tw_trace_state));
}

void tw_trace_state_free(tw_trace_state *s)
{
    if (s == NULL)
        return;
    for (int k = 0; k < TW_SOURCE_COUNT; k++) {
        tw_source_state *ss = &s->src[k];
        for (size_t i = 0; i < ss->cap; i++) {
            tw_pid_state *p = &ss->pids[i];
            if (!p->used)
                continue;
            free(p->phase);
            for (size_t j = 0; j < p->nstack; j++)
                free(p->stack[j].name);
            free(p->stack);
        }
        free(ss->pids);
    }
    free(s);
}

static size_t tw_pid_slot(int64_t pid, size_t cap)
{
    uint64_t h = (uint64_t)pid * 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 17) & (cap - 1);
}

/* The pid's entry; created when `create`. NULL: absent, or OOM (*oom). */
static tw_pid_state *tw_pid_get(tw_source_state *ss, int64_t pid, int create,
                                int *oom)
{
    if (ss->cap != 0) {
        size_t j = tw_pid_slot(pid, ss->cap);
        while (ss->pids[j].used) {
            if (ss->pids[j].pid == pid)
                return &ss->pids[j];
            j = (j + 1) & (ss->cap - 1);
        }
    }
    if (!create)
        return NULL;
    if ((ss->npids + 1) * 2 > ss->cap) {
        size_t ncap = ss->cap ? ss->cap * 2 : 16;
        tw_pid_state *np = calloc(ncap, sizeof(*np));
        if (np == NULL) {
            *oom = 1;
            return NULL;
        }
        for (size_t i = 0; i < ss->cap; i++) {
            if (!ss->pids[i].used)
                continue;
            size_t j = tw_pid_slot(ss->pids[i].pid, ncap);
            while (np[j].used)
                j = (j + 1) & (ncap - 1);
            np[j] = ss->pids[i];
        }
        free(ss->pids);
        ss->pids = np;
        ss->cap = ncap;
    }
    size_t j = tw_pid_slot(pid, ss->cap);
    while (ss->pids[j].used)
        j = (j + 1) & (ss->cap - 1);
    tw_pid_state *p = &ss->pids[j];
    memset(p, 0, sizeof(*p));
    p->used = 1;
    p->pid = pid;
    ss->npids++;
    return p;
}

/* ------------------------------------------------------------------------
 * Batch being filled
 * --------------------------------------------------------------------- */

typedef struct tw_intern_slot {
    uint32_t hash;
    uint32_t len;
    const char *str; /* in the batch's arena; NULL = empty slot */
} tw_intern_slot;

typedef struct tw_trace_reader {
    const tw_read_ctx *ctx;
    tw_source_state *ss;
    tw_input in;
    tw_json_parser *jp;
    tw_batch *batch;
    tw_fw_event *events; /* malloc'd; copied into the arena on flush */
    size_t nevents, events_cap;
    tw_intern_slot *intern; /* strings of this batch: names, phases, keys */
    size_t nintern, intern_cap;
    /* the last strings interned, by length and end bytes: most repeat (the
     * phase, the args' keys, a step's names) and skip the hash */
    const char *recent[16];
    uint32_t recent_len[16];
    uint64_t nl_abs_pos;     /* line-number cache: absolute offset ... */
    uint64_t nl_count;       /* ... and the newlines before it */
    int incomplete;          /* counted in incomplete_files already */
    tw_torch_survey *survey; /* survey pass (tw_trace_survey): no events */
} tw_trace_reader;

/* The intern table's hash: eight bytes at a time (FNV-1a's multiply per
 * byte was 4 % of `eval`); nothing else sees it. */
static uint32_t tw_hash_bytes(const char *p, size_t n)
{
    const uint64_t k = 0xff51afd7ed558ccdull;
    uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
    for (; n >= 8; p += 8, n -= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * k;
        h ^= h >> 32;
    }
    if (n > 0) {
        uint64_t w = 0;
        memcpy(&w, p, n);
        h = (h ^ w) * k;
        h ^= h >> 32;
    }
    h *= 0xc4ceb9fe1a85ec53ull;
    return (uint32_t)(h ^ (h >> 29));
}

/* tw_intern through the batch's table. */
static const char *tw_intern_table(tw_trace_reader *r, const char *p, size_t n)
{
    uint32_t h = tw_hash_bytes(p, n);
    if (r->intern_cap != 0) {
        size_t j = h & (r->intern_cap - 1);
        while (r->intern[j].str != NULL) {
            tw_intern_slot *s = &r->intern[j];
            if (s->hash == h && s->len == n && memcmp(s->str, p, n) == 0)
                return s->str;
            j = (j + 1) & (r->intern_cap - 1);
        }
    }
    if ((r->nintern + 1) * 2 > r->intern_cap) {
        size_t ncap = r->intern_cap ? r->intern_cap * 2 : 256;
        tw_intern_slot *ns = calloc(ncap, sizeof(*ns));
        if (ns == NULL)
            return NULL;
        for (size_t i = 0; i < r->intern_cap; i++) {
            if (r->intern[i].str == NULL)
                continue;
            size_t j = r->intern[i].hash & (ncap - 1);
            while (ns[j].str != NULL)
                j = (j + 1) & (ncap - 1);
            ns[j] = r->intern[i];
        }
        free(r->intern);
        r->intern = ns;
        r->intern_cap = ncap;
    }
    const char *copy = tw_arena_strndup(&r->batch->arena, p, n);
    if (copy == NULL)
        return NULL;
    size_t j = h & (r->intern_cap - 1);
    while (r->intern[j].str != NULL)
        j = (j + 1) & (r->intern_cap - 1);
    r->intern[j].hash = h;
    r->intern[j].len = (uint32_t)n;
    r->intern[j].str = copy;
    r->nintern++;
    return copy;
}

/* The batch's copy of p[0, n), shared by equal strings. NULL: OOM. */
static const char *tw_intern(tw_trace_reader *r, const char *p, size_t n)
{
    size_t k = n == 0 ? 0
                      : (n ^ (unsigned char)p[0] ^
                         ((size_t)(unsigned char)p[n - 1] << 2)) &
                            15;
    if (r->recent[k] != NULL && r->recent_len[k] == n &&
        memcmp(r->recent[k], p, n) == 0)
        return r->recent[k];
    const char *s = tw_intern_table(r, p, n);
    if (s != NULL) {
        r->recent[k] = s;
        r->recent_len[k] = (uint32_t)n;
    }
    return s;
}

static int tw_trace_flush(tw_trace_reader *r)
{
    tw_batch *b = r->batch;
    r->batch = NULL;
    if (b == NULL)
        return TW_OK;
    if (r->nevents == 0) {
        tw_batch_free(b);
        return TW_OK;
    }
    b->events = tw_arena_alloc(&b->arena, r->nevents * sizeof(tw_fw_event));
    if (b->events == NULL) {
        tw_batch_free(b);
        return TW_ERR;
    }
    memcpy(b->events, r->events, r->nevents * sizeof(tw_fw_event));
    b->nevents = r->nevents;
    r->nevents = 0;
    return tw_reader_emit(r->ctx, b);
}

/* Makes sure a batch with room for one more event is open. */
static int tw_trace_room(tw_trace_reader *r)
{
    if (r->batch != NULL && r->nevents == TW_READER_BATCH_MAX) {
        int rc = tw_trace_flush(r);
        if (rc != TW_OK)
            return rc;
    }
    if (r->batch == NULL) {
        const char *node = r->ctx->file->node ? r->ctx->file->node : "";
        r->batch = tw_reader_batch_new(r->ctx, node, strlen(node));
        if (r->batch == NULL)
            return TW_ERR;
        r->nintern = 0;
        if (r->intern != NULL)
            memset(r->intern, 0, r->intern_cap * sizeof(*r->intern));
        memset(r->recent, 0, sizeof(r->recent));
    }
    if (r->nevents == r->events_cap) {
        size_t n = r->events_cap ? r->events_cap * 2 : 256;
        if (n > TW_READER_BATCH_MAX)
            n = TW_READER_BATCH_MAX;
        tw_fw_event *e = realloc(r->events, n * sizeof(*e));
        if (e == NULL)
            return TW_ERR;
        r->events = e;
        r->events_cap = n;
    }
    return TW_OK;
}

/* ------------------------------------------------------------------------
 * Events
 * --------------------------------------------------------------------- */

/* Line number (1-based) of byte `pos` of the current buffer. */
static uint64_t tw_trace_line(tw_trace_reader *r, size_t pos)
{
    uint64_t buf_abs = r->in.bytes - r->in.end; /* offset of buf[0] */
    uint64_t abs = buf_abs + pos;
    size_t from;
    uint64_t count;
    if (r->nl_abs_pos >= buf_abs && r->nl_abs_pos <= abs) {
        from = (size_t)(r->nl_abs_pos - buf_abs);
        count = r->nl_count;
    } else {
        from = 0;
        count = r->in.dropped_nl;
    }
    count += tw_input_count_newlines(r->in.buf + from, pos - from);
    r->nl_abs_pos = abs;
    r->nl_count = count;
    return count + 1;
}

static int tw_str_is(tw_json_str s, const char *lit)
{
    size_t n = strlen(lit);
    return s.ptr != NULL && s.len == n && memcmp(s.ptr, lit, n) == 0;
}

static tw_mode tw_mode_of(tw_json_str name)
{
    if (tw_str_is(name, "Step:ModeKeys.TRAIN"))
        return TW_MODE_TRAIN;
    if (tw_str_is(name, "Step:ModeKeys.EVAL"))
        return TW_MODE_EVAL;
    if (tw_str_is(name, "Step:ModeKeys.PREDICT"))
        return TW_MODE_PREDICT;
    if (tw_str_is(name, "Step:ModeKeys.GLOBAL"))
        return TW_MODE_GLOBAL;
    return TW_MODE_NONE;
}

/* base + round(x), checked. */
static int tw_time_d(int64_t base, double x, int64_t *out)
{
    if (!(x > -9.0e18 && x < 9.0e18))
        return 0;
    int64_t v = (int64_t)llround(x);
    return !__builtin_add_overflow(base, v, out);
}

static int tw_time_i(int64_t base, int64_t x, int64_t *out)
{
    return !__builtin_add_overflow(base, x, out);
}

/* Appends one event; strings copied into the batch. */
static int tw_trace_push(tw_trace_reader *r, tw_json_str name,
                         const char *phase, size_t phase_len, int64_t start,
                         int64_t end, int64_t pid, int64_t tid,
                         const tw_json_event *args_of)
{
    int rc = tw_trace_room(r);
    if (rc != TW_OK)
        return rc;
    tw_fw_event *e = &r->events[r->nevents];
    memset(e, 0, sizeof(*e));
    e->name = tw_intern(r, name.ptr, name.len);
    e->phase = tw_intern(r, phase, phase_len);
    e->node = r->batch->node;
    if (e->name == NULL || e->phase == NULL)
        return TW_ERR;
    e->start_us = start;
    e->end_us = end;
    e->pid = pid;
    e->tid = tid;
    e->source = r->ctx->file->source;
    e->mode = tw_mode_of(name);
    if (args_of != NULL && args_of->has_args) {
        tw_arg *a =
            tw_arena_alloc(&r->batch->arena, args_of->nargs * sizeof(tw_arg));
        if (a == NULL)
            return TW_ERR;
        for (size_t i = 0; i < args_of->nargs; i++) {
            const tw_json_arg *ja = &args_of->args[i];
            a[i].key = tw_intern(r, ja->key.ptr, ja->key.len);
            a[i].value = tw_arena_strndup(&r->batch->arena, ja->value.ptr,
                                          ja->value.len);
            a[i].kind = ja->kind;
            if (a[i].key == NULL || a[i].value == NULL)
                return TW_ERR;
        }
        e->args = a;
        e->nargs = (uint32_t)args_of->nargs;
    }
    r->nevents++;
    return TW_OK;
}

static void tw_trace_bad(tw_trace_reader *r, size_t pos, const char *what)
{
    r->ctx->stats->bad_lines++;
    tw_reader_report(r->ctx, tw_trace_line(r, pos), "%s", what);
}

static int tw_trace_meta(tw_trace_reader *r, const tw_json_event *ev)
{
    if (tw_str_is(ev->name, "process_name") && ev->has_pid) {
        int oom = 0;
        tw_pid_state *p = tw_pid_get(r->ss, ev->pid, 1, &oom);
        if (p == NULL)
            return TW_ERR;
        char *phase = ev->args_has_name
                          ? strndup(ev->args_name.ptr, ev->args_name.len)
                          : strdup("Unknown");
        if (phase == NULL)
            return TW_ERR;
        free(p->phase);
        p->phase = phase;
    }
    if (ev->has_start_time) {
        const tw_json_num *n = &ev->start_time;
        if (n->is_i64)
            r->ss->base_us = n->i;
        else if (n->d > -9.0e18 && n->d < 9.0e18)
            r->ss->base_us = (int64_t)llround(n->d);
    }
    return TW_OK;
}

static int tw_trace_complete(tw_trace_reader *r, const tw_json_event *ev,
                             size_t pos)
{
    if (ev->name.ptr == NULL || !ev->has_pid || !ev->ts.present ||
        !ev->dur.present) {
        tw_trace_bad(r, pos, "X event without name, integer pid, ts or dur");
        return TW_OK;
    }
    int64_t base = r->ss->base_us, start, end;
    int ok;
    if (ev->ts.is_i64 && ev->dur.is_i64)
        ok = tw_time_i(base, ev->ts.i, &start) &&
             tw_time_i(start, ev->dur.i, &end);
    else
        ok = tw_time_d(base, ev->ts.d, &start) &&
             tw_time_d(base, ev->ts.d + ev->dur.d, &end);
    if (!ok) {
        tw_trace_bad(r, pos, "X event time out of range");
        return TW_OK;
    }
    const char *phase = "Unknown";
    tw_pid_state *p = tw_pid_get(r->ss, ev->pid, 0, &(int){0});
    if (p != NULL && p->phase != NULL)
        phase = p->phase;
    return tw_trace_push(r, ev->name, phase, strlen(phase), start, end, ev->pid,
                         ev->has_tid ? ev->tid : 0, ev);
}

static int tw_trace_begin(tw_trace_reader *r, const tw_json_event *ev,
                          size_t pos)
{
    if (ev->name.ptr == NULL || !ev->has_pid || !ev->ts.present) {
        tw_trace_bad(r, pos, "B event without name, integer pid or ts");
        return TW_OK;
    }
    int oom = 0;
    tw_pid_state *p = tw_pid_get(r->ss, ev->pid, 1, &oom);
    if (p == NULL)
        return TW_ERR;
    if (tw_grow((void **)&p->stack, &p->stack_cap, p->nstack + 1,
                sizeof(*p->stack), 8) != TW_OK)
        return TW_ERR;
    tw_open_begin *b = &p->stack[p->nstack];
    b->name = strndup(ev->name.ptr, ev->name.len);
    if (b->name == NULL)
        return TW_ERR;
    b->ts = ev->ts;
    b->has_tid = ev->has_tid;
    b->tid = ev->tid;
    p->nstack++;
    return TW_OK;
}

static int tw_trace_end(tw_trace_reader *r, const tw_json_event *ev, size_t pos)
{
    if (!ev->has_pid || !ev->ts.present) {
        tw_trace_bad(r, pos, "E event without integer pid or ts");
        return TW_OK;
    }
    tw_pid_state *p = tw_pid_get(r->ss, ev->pid, 0, &(int){0});
    if (p == NULL || p->nstack == 0) {
        tw_trace_bad(r, pos, "E event without a matching B event");
        return TW_OK;
    }
    tw_open_begin b = p->stack[--p->nstack];
    int64_t base = r->ss->base_us, start = 0, end = 0;
    int neg, ok;
    if (b.ts.is_i64 && ev->ts.is_i64) {
        neg = ev->ts.i < b.ts.i;
        ok = tw_time_i(base, b.ts.i, &start) && tw_time_i(base, ev->ts.i, &end);
    } else {
        neg = ev->ts.d < b.ts.d;
        ok = tw_time_d(base, b.ts.d, &start) && tw_time_d(base, ev->ts.d, &end);
    }
    int rc = TW_OK;
    if (neg) {
        tw_trace_bad(r, pos, "E event before its B event (negative duration)");
    } else if (!ok) {
        tw_trace_bad(r, pos, "B/E event time out of range");
    } else {
        tw_json_str name = {b.name, strlen(b.name)};
        int64_t tid = ev->has_tid && b.has_tid ? b.tid : 0;
        rc = tw_trace_push(r, name, "", 0, start, end, ev->pid, tid, ev);
    }
    free(b.name);
    return rc;
}

/* An event of a PyTorch profiler trace (reader.h): X events only, times
 * from the file's anchor, ProfilerStep#N as the rules' TRAIN step N. */
static int tw_trace_torch(tw_trace_reader *r, const tw_json_event *ev,
                          size_t pos)
{
    if (ev->ph.ptr == NULL || ev->ph.len != 1 || ev->ph.ptr[0] != 'X')
        return TW_OK;
    if (ev->name.ptr == NULL || !ev->ts.present || !ev->dur.present) {
        tw_trace_bad(r, pos, "X event without name, ts or dur");
        return TW_OK;
    }
    if (tw_torch_ignored(ev))
        return TW_OK;
    char phase[64];
    const char *digits = NULL;
    size_t ndigits = 0;
    int step = tw_torch_step(ev->name.ptr, ev->name.len, &digits, &ndigits);
    if (!step)
        tw_torch_phase(ev, phase, sizeof(phase));
    int64_t base = r->ctx->file->torch_offset_us, start, end;
    int ok;
    if (ev->ts.is_i64 && ev->dur.is_i64)
        ok = tw_time_i(base, ev->ts.i, &start) &&
             tw_time_i(start, ev->dur.i, &end);
    else
        ok = tw_time_d(base, ev->ts.d, &start) &&
             tw_time_d(base, ev->ts.d + ev->dur.d, &end);
    if (!ok || end < start) {
        tw_trace_bad(r, pos, "X event time out of range or negative dur");
        return TW_OK;
    }
    int64_t pid = ev->has_pid ? ev->pid : 0, tid = ev->has_tid ? ev->tid : 0;
    if (!step)
        return tw_trace_push(r, ev->name, phase, strlen(phase), start, end, pid,
                             tid, ev);
    /* step_num as the framework hooks write it: a string (RULES.md §1.3) */
    static const char train[] = "Step:ModeKeys.TRAIN";
    tw_json_arg arg = {{"step_num", 8}, {digits, ndigits}, TW_ARG_STRING};
    tw_json_event args = {.has_args = 1, .args = &arg, .nargs = 1};
    return tw_trace_push(r, (tw_json_str){train, sizeof(train) - 1}, train,
                         sizeof(train) - 1, start, end, pid, tid, &args);
}

/* One array element at buf[pos, pos + len). */
static int tw_trace_event(tw_trace_reader *r, size_t pos,
                          const tw_json_event *ev);

static int tw_trace_element(tw_trace_reader *r, size_t pos, size_t len)
{
    if (r->survey != NULL) {
        tw_json_event ev;
        const char *reason = NULL;
        size_t cap = r->in.cap + TW_JSON_PADDING - pos;
        int rc =
            tw_json_parse_event(r->jp, r->in.buf + pos, len, cap, &ev, &reason);
        if (rc == TW_JSON_NOMEM)
            return TW_ERR;
        if (rc == TW_OK)
            tw_torch_survey_event(r->survey, &ev);
        return TW_OK;
    }
    tw_json_event ev;
    const char *reason = NULL;
    size_t cap = r->in.cap + TW_JSON_PADDING - pos;
    int rc =
        tw_json_parse_event(r->jp, r->in.buf + pos, len, cap, &ev, &reason);
    if (rc == TW_JSON_NOMEM)
        return TW_ERR;
    if (rc != TW_OK) {
        r->ctx->stats->lines++;
        tw_trace_bad(r, pos, reason);
        return TW_OK;
    }
    return tw_trace_event(r, pos, &ev);
}

/* One parsed event at buf[pos] (either path). */
static int tw_trace_event(tw_trace_reader *r, size_t pos,
                          const tw_json_event *ev)
{
    r->ctx->stats->lines++;
    if (r->ctx->file->torch)
        return tw_trace_torch(r, ev, pos);
    if (ev->ph.ptr == NULL || ev->ph.len != 1)
        return TW_OK;
    switch (ev->ph.ptr[0]) {
    case 'M':
        return tw_trace_meta(r, ev);
    case 'X':
        return tw_trace_complete(r, ev, pos);
    case 'B':
        return tw_trace_begin(r, ev, pos);
    case 'E':
        return tw_trace_end(r, ev, pos);
    default:
        return TW_OK;
    }
}

/* ------------------------------------------------------------------------
 * Scanner: finds the elements of the event array
 * --------------------------------------------------------------------- */

enum { TW_SCAN_MORE = -1, TW_SCAN_BAD = -2 };

typedef enum tw_scan_state {
    TW_SCAN_TOP,      /* before the first byte                      */
    TW_SCAN_OBJ_KEY,  /* top-level object: before a key or '}'      */
    TW_SCAN_OBJ_SEP,  /* top-level object: after a member           */
    TW_SCAN_ARR_ELEM, /* event array: before an element or ']'      */
    TW_SCAN_ARR_SEP,  /* event array: after an element              */
    TW_SCAN_DONE
} tw_scan_state;

static int tw_is_ws(char c)
{
    return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

/* s[i] == '"'. Index after the closing quote, or TW_SCAN_MORE. */
static long tw_scan_string(const char *s, size_t i, size_t n)
{
    for (i++; i < n; i++) {
        if (s[i] == '\\')
            i++;
        else if (s[i] == '"')
            return (long)(i + 1);
    }
    return TW_SCAN_MORE;
}

/* The end of the value starting at s[i] (not whitespace). */
static long tw_scan_value(const char *s, size_t i, size_t n, int eof)
{
    char ch = s[i];
    if (ch == '"')
        return tw_scan_string(s, i, n);
    if (ch == '{' || ch == '[') {
        size_t depth = 0;
        while (i < n) {
            ch = s[i];
            if (ch == '"') {
                long j = tw_scan_string(s, i, n);
                if (j < 0)
                    return j;
                i = (size_t)j;
                continue;
            }
            if (ch == '{' || ch == '[') {
                depth++;
            } else if (ch == '}' || ch == ']') {
                if (--depth == 0)
                    return (long)(i + 1);
            }
            i++;
        }
        return TW_SCAN_MORE;
    }
    if (ch == '}' || ch == ']' || ch == ',' || ch == ':')
        return TW_SCAN_BAD;
    while (i < n) {
        ch = s[i];
        if (ch == ',' || ch == ']' || ch == '}' || tw_is_ws(ch))
            return (long)i;
        i++;
    }
    return eof ? (long)n : TW_SCAN_MORE;
}

/* Reports the file as cut off (once per file). */
static void tw_trace_truncated(tw_trace_reader *r, size_t pos, const char *what)
{
    if (!r->incomplete) {
        r->incomplete = 1;
        r->ctx->stats->incomplete_files++;
    }
    tw_reader_report(r->ctx, tw_trace_line(r, pos), "truncated: %s", what);
}

static void tw_trace_malformed(tw_trace_reader *r, size_t pos, const char *what)
{
    r->ctx->stats->bad_files++;
    tw_reader_report(r->ctx, tw_trace_line(r, pos), "malformed trace file: %s",
                     what);
}

/* The fast path's largest text (one simdjson pass indexes all of it). */
#define TW_TRACE_FAST_MAX (8u << 20)

typedef struct tw_fast_ctx {
    tw_trace_reader *r;
    size_t base; /* buffer offset of the '[' */
} tw_fast_ctx;

static int tw_trace_fast_event(void *ud, size_t pos, const tw_json_event *ev)
{
    tw_fast_ctx *f = ud;
    return tw_trace_event(f->r, f->base + pos, ev);
}

/* The event array whose '[' is at buf[arr] (in->start is just after it):
 * every element in the buffer at once (tw_json_parse_event_array), then
 * the element-by-element scan goes on where that stopped: the results,
 * counts and reports are those of the scan alone. */
static int tw_trace_fast(tw_trace_reader *r, size_t arr, tw_scan_state *st)
{
    tw_input *in = &r->in;
    if (in->end - arr > TW_TRACE_FAST_MAX)
        return TW_OK;
    tw_fast_ctx f = {r, arr};
    tw_json_array_stop stop;
    int rc = tw_json_parse_event_array(r->jp, in->buf + arr, in->end - arr,
                                       in->cap + TW_JSON_PADDING - arr,
                                       tw_trace_fast_event, &f, &stop);
    if (rc == TW_JSON_NOMEM)
        return TW_ERR;
    if (rc != TW_OK)
        return rc;
    TW_ASSERT(stop.at >= 1 && arr + stop.at <= in->end);
    in->start = arr + stop.at;
    *st = stop.state == TW_JSON_AT_ELEMENT ? TW_SCAN_ARR_ELEM : TW_SCAN_ARR_SEP;
    return TW_OK;
}

static int tw_trace_scan(tw_trace_reader *r)
{
    tw_input *in = &r->in;
    tw_scan_state st = TW_SCAN_TOP;
    int in_object = 0, saw_array = 0, rc = TW_OK;
    long fast_arr =
        -1; /* the '[' of the event array, once, for the fast path */
    char err[256];
    while (rc == TW_OK && st != TW_SCAN_DONE) {
        const char *s = in->buf;
        size_t n = in->end, i = in->start;
        if (st == TW_SCAN_TOP && in->bytes == in->end && i == 0 && n >= 3 &&
            memcmp(s, "\xEF\xBB\xBF", 3) == 0)
            i = 3; /* UTF-8 byte order mark */
        while (i < n && tw_is_ws(s[i]))
            i++;
        in->start = i;
        long j = TW_SCAN_MORE;
        if (i < n) {
            char ch = s[i];
            switch (st) {
            case TW_SCAN_TOP:
                if (ch == '[') {
                    st = TW_SCAN_ARR_ELEM;
                    saw_array = 1;
                    fast_arr = (long)i;
                } else if (ch == '{') {
                    st = TW_SCAN_OBJ_KEY;
                    in_object = 1;
                    if (r->survey != NULL)
                        r->survey->object_form = 1;
                } else {
                    tw_trace_malformed(r, i, "not a JSON array or object");
                    return TW_OK;
                }
                j = (long)i + 1;
                break;
            case TW_SCAN_OBJ_KEY:
                if (ch == '}') {
                    st = TW_SCAN_DONE;
                    j = (long)i + 1;
                    break;
                }
                if (ch != '"') {
                    tw_trace_malformed(r, i, "expected a member name");
                    return TW_OK;
                }
                j = tw_scan_string(s, i, n);
                if (j < 0)
                    break;
                {
                    size_t key = i + 1, keylen = (size_t)j - i - 2;
                    size_t k = (size_t)j;
                    while (k < n && tw_is_ws(s[k]))
                        k++;
                    if (k < n && s[k] != ':') {
                        tw_trace_malformed(r, k, "expected ':'");
                        return TW_OK;
                    }
                    k++;
                    while (k < n && tw_is_ws(s[k]))
                        k++;
                    if (k >= n) {
                        j = TW_SCAN_MORE;
                        break;
                    }
                    if (keylen == 11 &&
                        memcmp(s + key, "traceEvents", 11) == 0 &&
                        s[k] == '[') {
                        st = TW_SCAN_ARR_ELEM;
                        saw_array = 1;
                        fast_arr = (long)k;
                        j = (long)k + 1;
                        break;
                    }
                    j = tw_scan_value(s, k, n, in->eof);
                    if (j == TW_SCAN_BAD) {
                        tw_trace_malformed(r, k, "expected a value");
                        return TW_OK;
                    }
                    if (j >= 0 && r->survey != NULL)
                        tw_torch_survey_member(r->survey, r->jp, s + key,
                                               keylen, s + k, (size_t)j - k,
                                               in->cap + TW_JSON_PADDING - k);
                    if (j >= 0)
                        st = TW_SCAN_OBJ_SEP;
                }
                break;
            case TW_SCAN_OBJ_SEP:
                if (ch == ',') {
                    st = TW_SCAN_OBJ_KEY;
                } else if (ch == '}') {
                    st = TW_SCAN_DONE;
                } else {
                    tw_trace_malformed(r, i, "expected ',' or '}'");
                    return TW_OK;
                }
                j = (long)i + 1;
                break;
            case TW_SCAN_ARR_ELEM:
                if (ch == ']') {
                    st = in_object ? TW_SCAN_OBJ_SEP : TW_SCAN_DONE;
                    j = (long)i + 1;
                    break;
                }
                j = tw_scan_value(s, i, n, in->eof);
                if (j == TW_SCAN_BAD) {
                    tw_trace_malformed(r, i, "expected an event");
                    return TW_OK;
                }
                if (j >= 0) {
                    rc = tw_trace_element(r, i, (size_t)j - i);
                    st = TW_SCAN_ARR_SEP;
                }
                break;
            case TW_SCAN_ARR_SEP:
                if (ch == ',') {
                    st = TW_SCAN_ARR_ELEM;
                } else if (ch == ']') {
                    st = in_object ? TW_SCAN_OBJ_SEP : TW_SCAN_DONE;
                } else {
                    tw_trace_malformed(r, i,
                                       "expected ',' or ']' after an event");
                    return TW_OK;
                }
                j = (long)i + 1;
                break;
            case TW_SCAN_DONE:
                break;
            }
        }
        if (j >= 0) {
            in->start = (size_t)j;
            if (fast_arr >= 0 && r->survey == NULL)
                rc = tw_trace_fast(r, (size_t)fast_arr, &st);
            fast_arr = -1;
            continue;
        }
        /* Needs more bytes than the buffer holds. */
        if (!in->eof) {
            int too_long = 0;
            int got = tw_input_fill(in, &too_long, err, sizeof(err));
            if (got == TW_ERR && too_long) {
                tw_trace_malformed(r, in->start, "an event is too long");
                return TW_OK;
            }
            if (got == TW_ERR) {
                if (!r->incomplete) {
                    r->incomplete = 1;
                    r->ctx->stats->incomplete_files++;
                }
                tw_reader_report(r->ctx, 0, "%s", err);
                in->eof = 1;
            }
            continue;
        }
        /* End of file before the text was complete. */
        if (st == TW_SCAN_TOP) {
            r->ctx->stats->bad_files++;
            tw_reader_report(r->ctx, 0, "empty trace file");
        } else if (st == TW_SCAN_ARR_ELEM || st == TW_SCAN_ARR_SEP) {
            tw_trace_truncated(r, in->start,
                               i < n ? "the file ends inside an event"
                                     : "the file ends before the closing ']'");
        } else {
            tw_trace_truncated(r, in->start,
                               "the file ends inside the top-level object");
        }
        break;
    }
    if (rc == TW_OK && in_object && !saw_array && st == TW_SCAN_DONE) {
        r->ctx->stats->bad_files++;
        tw_reader_report(r->ctx, 0, "no \"traceEvents\" array");
    }
    return rc;
}

int tw_reader_read_trace(const tw_read_ctx *c, tw_trace_state *state)
{
    tw_trace_state *own = NULL;
    if (state == NULL) {
        own = tw_trace_state_new();
        if (own == NULL)
            return TW_ERR;
        state = own;
    }
    tw_trace_reader r;
    memset(&r, 0, sizeof(r));
    r.ctx = c;
    r.ss = &state->src[c->file->source < TW_SOURCE_COUNT
                           ? c->file->source
                           : TW_SOURCE_PYTHONTIMELINE];
    char err[256];
    if (tw_input_open(&r.in, c->file->path, err, sizeof(err)) != TW_OK) {
        c->stats->bad_files++;
        tw_reader_report(c, 0, "%s", err);
        tw_trace_state_free(own);
        return TW_OK;
    }
    r.in.max_cap = TW_READER_MAX_RECORD;
    r.jp = tw_json_parser_new();
    int rc = r.jp == NULL ? TW_ERR : TW_OK;
    if (rc == TW_OK && c->file->source == TW_SOURCE_TF_PROFILER) {
        /* The synthetic metadata event of RULES.md §1.1. */
        r.ss->base_us = c->file->base_time_us;
        if (!c->file->has_metadata) {
            r.incomplete = 1;
            c->stats->incomplete_files++;
            tw_reader_report(c, 0,
                             "no <node>_<start_us>_<end_us>.metadata file in "
                             "the step folder: file timestamp and base time "
                             "unknown, events read with base time 0");
        }
    }
    if (rc == TW_OK)
        rc = tw_trace_scan(&r);
    if (rc == TW_OK)
        rc = tw_trace_flush(&r);
    c->stats->bytes += r.in.bytes;
    tw_batch_free(r.batch);
    free(r.events);
    free(r.intern);
    tw_json_parser_free(r.jp);
    tw_input_close(&r.in);
    tw_trace_state_free(own);
    return rc;
}

int tw_trace_survey(const char *path, tw_torch_survey *out)
{
    memset(out, 0, sizeof(*out));
    /* the scanner's reports go nowhere: the read pass makes them */
    tw_agent_file af = {.path = (char *)path, .kind = TW_FILE_FRAMEWORK};
    tw_reader_stats stats = {0};
    tw_read_ctx c = {.file = &af, .stats = &stats};
    tw_trace_reader r;
    memset(&r, 0, sizeof(r));
    r.ctx = &c;
    r.survey = out;
    char err[256];
    if (tw_input_open(&r.in, path, err, sizeof(err)) != TW_OK)
        return TW_OK;
    r.in.max_cap = TW_READER_MAX_RECORD;
    r.jp = tw_json_parser_new();
    int rc = r.jp == NULL ? TW_ERR : tw_trace_scan(&r);
    tw_json_parser_free(r.jp);
    tw_input_close(&r.in);
    return rc;
}
