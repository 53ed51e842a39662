/*
 * pstats_marshal.c - a bounded reader of Python's marshal format, as much
 * of it as a pstats file uses (None, booleans, ints, binary floats,
 * strings, tuples, lists, sets, dicts and references), into a flat tree
 * of nodes, then the pstats dict read out of that tree. Facts of the
 * format: CPython's Python/marshal.c (version 4: FLAG_REF 0x80 on a type
 * byte adds the object to the reference table when it starts; 'r' + a
 * 32-bit index names one; long ints are 15-bit digits).
 */
#include "pstats_marshal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "trainwatch/plugin.h"

enum {
    K_NONE,
    K_BOOL,
    K_INT,
    K_FLOAT,
    K_STR,
    K_TUPLE,
    K_LIST,
    K_SET,
    K_DICT /* kids: key, value, key, value... (n pairs) */
};

typedef struct node {
    uint8_t kind;
    uint8_t done; /* read in full: a reference may name it */
    int64_t i;
    double f;
    size_t first, n; /* K_STR: offset and length in the input; containers:
                        first kid index in parser.kids and the count */
} node;

typedef struct parser {
    const uint8_t *d;
    size_t len, pos;
    node *nodes;
    size_t nnodes, cap_nodes;
    size_t *kids;
    size_t nkids, cap_kids;
    size_t *refs;
    size_t nrefs, cap_refs;
    char *err;
    size_t errlen;
} parser;

static int fail(parser *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int fail(parser *p, const char *fmt, ...)
{
    int n = snprintf(p->err, p->errlen, "byte %zu: ", p->pos);
    if (n >= 0 && (size_t)n < p->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(p->err + n, p->errlen - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return TW_ERR;
}

static int take(parser *p, size_t n, const uint8_t **at)
{
    if (p->len - p->pos < n)
        return fail(p, "the data ends inside an object (%zu bytes needed)", n);
    *at = p->d + p->pos;
    p->pos += n;
    return TW_OK;
}

static int u32(parser *p, uint32_t *v)
{
    const uint8_t *b = NULL;
    if (take(p, 4, &b) != TW_OK)
        return TW_ERR;
    *v = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
         (uint32_t)b[3] << 24;
    return TW_OK;
}

static int new_node(parser *p, uint8_t flag, size_t *out)
{
    if (tw_grow((void **)&p->nodes, &p->cap_nodes, p->nnodes + 1,
                sizeof(*p->nodes), 64) != TW_OK)
        return fail(p, "out of memory");
    *out = p->nnodes++;
    memset(&p->nodes[*out], 0, sizeof(node));
    if (flag) {
        if (tw_grow((void **)&p->refs, &p->cap_refs, p->nrefs + 1,
                    sizeof(*p->refs), 64) != TW_OK)
            return fail(p, "out of memory");
        p->refs[p->nrefs++] = *out;
    }
    return TW_OK;
}

/* n kids reserved at once, so that nested containers come after them. */
static int reserve_kids(parser *p, size_t n, size_t *first)
{
    /* every element takes at least one byte: bounds a forged count */
    if (n > p->len - p->pos)
        return fail(p, "a container of %zu objects in %zu remaining bytes", n,
                    p->len - p->pos);
    if (tw_grow((void **)&p->kids, &p->cap_kids, p->nkids + n, sizeof(*p->kids),
                64) != TW_OK)
        return fail(p, "out of memory");
    *first = p->nkids;
    p->nkids += n;
    return TW_OK;
}

static int value(parser *p, int depth, size_t *out);

static int seq(parser *p, int depth, size_t self, uint8_t kind, size_t n)
{
    size_t first = 0;
    if (reserve_kids(p, n, &first) != TW_OK)
        return TW_ERR;
    p->nodes[self].kind = kind;
    p->nodes[self].first = first;
    p->nodes[self].n = n;
    for (size_t i = 0; i < n; i++) {
        size_t k = 0;
        if (value(p, depth + 1, &k) != TW_OK)
            return TW_ERR;
        p->kids[first + i] = k;
    }
    return TW_OK;
}

static int dict(parser *p, int depth, size_t self)
{
    size_t *tmp = NULL, ntmp = 0, cap = 0;
    int rc = TW_OK;
    for (;;) {
        if (p->pos >= p->len) {
            rc = fail(p, "a dict is not closed");
            break;
        }
        if (p->d[p->pos] == '0') { /* TYPE_NULL ends a dict */
            p->pos++;
            break;
        }
        size_t k = 0, v = 0;
        if (value(p, depth + 1, &k) != TW_OK ||
            value(p, depth + 1, &v) != TW_OK) {
            rc = TW_ERR;
            break;
        }
        if (tw_grow((void **)&tmp, &cap, ntmp + 2, sizeof(*tmp), 16) != TW_OK) {
            rc = fail(p, "out of memory");
            break;
        }
        tmp[ntmp++] = k;
        tmp[ntmp++] = v;
    }
    if (rc == TW_OK) {
        if (tw_grow((void **)&p->kids, &p->cap_kids, p->nkids + ntmp,
                    sizeof(*p->kids), 64) != TW_OK) {
            rc = fail(p, "out of memory");
        } else {
            p->nodes[self].kind = K_DICT;
            p->nodes[self].first = p->nkids;
            p->nodes[self].n = ntmp / 2;
            if (ntmp > 0)
                memcpy(p->kids + p->nkids, tmp, ntmp * sizeof(*tmp));
            p->nkids += ntmp;
        }
    }
    free(tmp);
    return rc;
}

static int long_int(parser *p, size_t self)
{
    uint32_t raw = 0;
    if (u32(p, &raw) != TW_OK)
        return TW_ERR;
    int32_t n = (int32_t)raw;
    uint32_t ndig = n < 0 ? (uint32_t)0 - raw : raw;
    if (ndig > 4) /* 60 bits: more does not fit an int64 here */
        return fail(p, "an integer of %u 15-bit digits is too large", ndig);
    int64_t v = 0;
    for (uint32_t i = 0; i < ndig; i++) {
        const uint8_t *b = NULL;
        if (take(p, 2, &b) != TW_OK)
            return TW_ERR;
        unsigned dig = (unsigned)b[0] | (unsigned)b[1] << 8;
        if (dig >= 1u << 15)
            return fail(p, "a long-integer digit %u is over 15 bits", dig);
        v |= (int64_t)dig << (15 * i);
    }
    p->nodes[self].kind = K_INT;
    p->nodes[self].i = n < 0 ? -v : v;
    return TW_OK;
}

static int string(parser *p, size_t self, size_t n)
{
    const uint8_t *b = NULL;
    if (take(p, n, &b) != TW_OK)
        return TW_ERR;
    p->nodes[self].kind = K_STR;
    p->nodes[self].first = (size_t)(b - p->d);
    p->nodes[self].n = n;
    return TW_OK;
}

static int value(parser *p, int depth, size_t *out)
{
    if (depth > TW_PSTATS_MAX_DEPTH)
        return fail(p, "objects nested deeper than %d", TW_PSTATS_MAX_DEPTH);
    const uint8_t *b = NULL;
    if (take(p, 1, &b) != TW_OK)
        return TW_ERR;
    uint8_t flag = b[0] & 0x80, type = b[0] & 0x7f;
    if (type == 'r') {
        uint32_t idx = 0;
        if (u32(p, &idx) != TW_OK)
            return TW_ERR;
        if (idx >= p->nrefs)
            return fail(p, "reference %u to one of %zu objects", idx, p->nrefs);
        if (!p->nodes[p->refs[idx]].done)
            return fail(p, "reference %u to an object still being read", idx);
        *out = p->refs[idx];
        return TW_OK;
    }
    size_t self = 0;
    if (new_node(p, flag, &self) != TW_OK)
        return TW_ERR;
    uint32_t n32 = 0;
    int rc = TW_OK;
    switch (type) {
    case 'N':
        p->nodes[self].kind = K_NONE;
        break;
    case 'T':
    case 'F':
        p->nodes[self].kind = K_BOOL;
        p->nodes[self].i = type == 'T';
        break;
    case 'i':
        if ((rc = u32(p, &n32)) == TW_OK) {
            p->nodes[self].kind = K_INT;
            p->nodes[self].i = (int32_t)n32;
        }
        break;
    case 'l':
        rc = long_int(p, self);
        break;
    case 'g': {
        if ((rc = take(p, 8, &b)) != TW_OK)
            break;
        uint64_t bits = 0;
        for (int i = 7; i >= 0; i--)
            bits = bits << 8 | b[i];
        double d;
        memcpy(&d, &bits, sizeof(d));
        p->nodes[self].kind = K_FLOAT;
        p->nodes[self].f = d;
        break;
    }
    case 'u':
    case 't':
    case 'a':
    case 'A':
    case 's':
        if ((rc = u32(p, &n32)) == TW_OK)
            rc = string(p, self, n32);
        break;
    case 'z':
    case 'Z':
        if ((rc = take(p, 1, &b)) == TW_OK)
            rc = string(p, self, b[0]);
        break;
    case '(':
    case '[':
    case '<':
    case '>':
        if ((rc = u32(p, &n32)) == TW_OK)
            rc = seq(p, depth, self,
                     type == '('   ? K_TUPLE
                     : type == '[' ? K_LIST
                                   : K_SET,
                     n32);
        break;
    case ')':
        if ((rc = take(p, 1, &b)) == TW_OK)
            rc = seq(p, depth, self, K_TUPLE, b[0]);
        break;
    case '{':
        rc = dict(p, depth, self);
        break;
    default:
        p->pos--;
        return fail(p,
                    "type code 0x%02x ('%c') is not one a pstats file "
                    "holds",
                    type, type >= 0x20 && type < 0x7f ? type : '?');
    }
    if (rc != TW_OK)
        return TW_ERR;
    p->nodes[self].done = 1;
    *out = self;
    return TW_OK;
}

/* ---- the pstats dict out of the tree ------------------------------------ */

typedef struct builder {
    parser *p;
    size_t *str_at; /* per node: offset in the pool, SIZE_MAX: not copied */
    char *pool;
    size_t npool;
} builder;

static const char *str_of(builder *b, size_t k)
{
    const node *nd = &b->p->nodes[k];
    if (b->str_at[k] == SIZE_MAX) {
        b->str_at[k] = b->npool;
        if (nd->n > 0) /* an empty string: pool may still be NULL */
            memcpy(b->pool + b->npool, b->p->d + nd->first, nd->n);
        b->npool += nd->n;
        b->pool[b->npool++] = '\0';
    }
    return b->pool + b->str_at[k];
}

/* (file, line, function) */
static int key3(builder *b, size_t k, const char **file, int64_t *line,
                const char **fn, const char *what)
{
    parser *p = b->p;
    const node *t = &p->nodes[k];
    if (t->kind != K_TUPLE || t->n != 3 ||
        p->nodes[p->kids[t->first]].kind != K_STR ||
        p->nodes[p->kids[t->first + 1]].kind != K_INT ||
        p->nodes[p->kids[t->first + 2]].kind != K_STR)
        return fail(p, "%s is not a (file, line, function) tuple", what);
    *file = str_of(b, p->kids[t->first]);
    *line = p->nodes[p->kids[t->first + 1]].i;
    *fn = str_of(b, p->kids[t->first + 2]);
    return TW_OK;
}

static int count_of(const node *n, int64_t *v)
{
    if (n->kind != K_INT || n->i < 0)
        return TW_ERR;
    *v = n->i;
    return TW_OK;
}

static int time_of(const node *n, double *v)
{
    if (n->kind == K_FLOAT)
        *v = n->f;
    else if (n->kind == K_INT)
        *v = (double)n->i;
    else
        return TW_ERR;
    return TW_OK;
}

static int build(parser *p, size_t root, tw_pstats *s)
{
    const node *r = &p->nodes[root];
    if (r->kind != K_DICT)
        return fail(p, "the top object is not a dict of functions");
    builder b = {p, NULL, NULL, 0};
    size_t pool = 0, ncallers = 0;
    for (size_t i = 0; i < p->nnodes; i++)
        if (p->nodes[i].kind == K_STR)
            pool += p->nodes[i].n + 1;
    for (size_t i = 0; i < r->n; i++) {
        const node *v = &p->nodes[p->kids[r->first + 2 * i + 1]];
        if (v->kind != K_TUPLE || v->n != 5 ||
            p->nodes[p->kids[v->first + 4]].kind != K_DICT)
            return fail(p,
                        "function %zu's value is not (cc, nc, tt, ct, "
                        "callers)",
                        i);
        ncallers += p->nodes[p->kids[v->first + 4]].n;
        /* a callers dict referenced many times would multiply */
        if (ncallers > p->len)
            return fail(p, "more callers than the data can hold");
    }
    b.str_at = malloc((p->nnodes + 1) * sizeof(*b.str_at));
    b.pool = malloc(pool + 1);
    s->funcs = calloc(r->n + 1, sizeof(*s->funcs));
    s->callers_pool = calloc(ncallers + 1, sizeof(*s->callers_pool));
    if (b.str_at == NULL || b.pool == NULL || s->funcs == NULL ||
        s->callers_pool == NULL) {
        free(b.str_at);
        free(b.pool);
        return fail(p, "out of memory");
    }
    s->strings = b.pool;
    for (size_t i = 0; i < p->nnodes; i++)
        b.str_at[i] = SIZE_MAX;
    size_t c = 0;
    int rc = TW_OK;
    for (size_t i = 0; i < r->n && rc == TW_OK; i++) {
        tw_pstats_func *f = &s->funcs[i];
        const node *v = &p->nodes[p->kids[r->first + 2 * i + 1]];
        const size_t *vk = p->kids + v->first;
        if (key3(&b, p->kids[r->first + 2 * i], &f->file, &f->line,
                 &f->function, "a function's key") != TW_OK) {
            rc = TW_ERR;
            break;
        }
        if (count_of(&p->nodes[vk[0]], &f->cc) != TW_OK ||
            count_of(&p->nodes[vk[1]], &f->nc) != TW_OK ||
            time_of(&p->nodes[vk[2]], &f->tt) != TW_OK ||
            time_of(&p->nodes[vk[3]], &f->ct) != TW_OK) {
            rc = fail(p, "%s: calls or times are not numbers", f->function);
            break;
        }
        const node *cd = &p->nodes[vk[4]];
        f->callers = s->callers_pool + c;
        for (size_t j = 0; j < cd->n; j++) {
            tw_pstats_caller *cl = &s->callers_pool[c++];
            if (key3(&b, p->kids[cd->first + 2 * j], &cl->file, &cl->line,
                     &cl->function, "a caller's key") != TW_OK) {
                rc = TW_ERR;
                break;
            }
            const node *cv = &p->nodes[p->kids[cd->first + 2 * j + 1]];
            const size_t *ck = p->kids + cv->first;
            if (cv->kind == K_INT && cv->i >= 0) {
                /* the profile module's callers hold a count only */
                cl->nc = cl->cc = cv->i;
            } else if (cv->kind != K_TUPLE || cv->n != 4 ||
                       count_of(&p->nodes[ck[0]], &cl->nc) != TW_OK ||
                       count_of(&p->nodes[ck[1]], &cl->cc) != TW_OK ||
                       time_of(&p->nodes[ck[2]], &cl->tt) != TW_OK ||
                       time_of(&p->nodes[ck[3]], &cl->ct) != TW_OK) {
                rc = fail(p, "%s: a caller's value is not (nc, cc, tt, ct)",
                          f->function);
                break;
            }
            f->ncallers++;
        }
    }
    s->nfuncs = r->n;
    free(b.str_at);
    return rc;
}

void tw_pstats_free(tw_pstats *s)
{
    if (s == NULL)
        return;
    free(s->funcs);
    free(s->callers_pool);
    free(s->strings);
    free(s);
}

int tw_pstats_parse(const uint8_t *data, size_t len, tw_pstats **out, char *err,
                    size_t errlen)
{
    *out = NULL;
    parser p = {.d = data, .len = len, .err = err, .errlen = errlen};
    tw_pstats *s = calloc(1, sizeof(*s));
    size_t root = 0;
    int rc = s == NULL ? fail(&p, "out of memory") : value(&p, 0, &root);
    if (rc == TW_OK && p.pos != len)
        rc = fail(&p, "%zu bytes after the dict", len - p.pos);
    if (rc == TW_OK)
        rc = build(&p, root, s);
    free(p.nodes);
    free(p.kids);
    free(p.refs);
    if (rc != TW_OK) {
        tw_pstats_free(s);
        return TW_ERR;
    }
    *out = s;
    return TW_OK;
}

int tw_pstats_read_file(const char *path, tw_pstats **out, char *err,
                        size_t errlen)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        snprintf(err, errlen, "cannot open: %s", strerror(errno));
        return TW_ERR;
    }
    uint8_t *buf = NULL;
    size_t n = 0, cap = 0;
    int rc = TW_OK;
    for (;;) {
        if (tw_grow((void **)&buf, &cap, n + 65536, 1, 65536) != TW_OK) {
            snprintf(err, errlen, "out of memory");
            rc = TW_ERR;
            break;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (n > TW_PSTATS_MAX_FILE) {
            snprintf(err, errlen, "larger than %u bytes", TW_PSTATS_MAX_FILE);
            rc = TW_ERR;
            break;
        }
        if (got == 0) {
            if (ferror(f)) {
                snprintf(err, errlen, "read error: %s", strerror(errno));
                rc = TW_ERR;
            }
            break;
        }
    }
    fclose(f);
    if (rc == TW_OK)
        rc = tw_pstats_parse(buf, n, out, err, errlen);
    free(buf);
    return rc;
}
