/*
 * test_pstats_marshal.c - the pstats marshal reader on hand-built inputs:
 * references (FLAG_REF and 'r'), 15-bit long digits, the profile module's
 * count-only callers, and the errors a bounded reader must give
 * (truncation, a reference to an object still being read, a forged count,
 * nesting, trailing bytes, a type a pstats file never holds).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four above first */
#include <cmocka.h>
#include <string.h>

#include "pstats_marshal.h"
#include "trainwatch/plugin.h"

typedef struct bytes {
    uint8_t b[512];
    size_t n;
} bytes;

static void put(bytes *x, const void *p, size_t n)
{
    assert_true(x->n + n <= sizeof(x->b));
    memcpy(x->b + x->n, p, n);
    x->n += n;
}
static void byte(bytes *x, uint8_t v)
{
    put(x, &v, 1);
}
static void u32(bytes *x, uint32_t v)
{
    uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16),
                    (uint8_t)(v >> 24)};
    put(x, b, 4);
}
static void str(bytes *x, uint8_t type, const char *s)
{
    byte(x, type); /* 'z' short ascii: one length byte */
    byte(x, (uint8_t)strlen(s));
    put(x, s, strlen(s));
}
static void flt(bytes *x, double d)
{
    uint64_t bits;
    memcpy(&bits, &d, sizeof(bits));
    byte(x, 'g');
    for (int i = 0; i < 8; i++)
        byte(x, (uint8_t)(bits >> (8 * i)));
}
static void i32(bytes *x, int32_t v)
{
    byte(x, 'i');
    u32(x, (uint32_t)v);
}

static void test_refs_and_long(void **state)
{
    (void)state;
    bytes x = {.n = 0};
    byte(&x, '{');
    /* key 1, added to the reference table: refs 0 (tuple), 1 (file) */
    byte(&x, ')' | 0x80);
    byte(&x, 3);
    str(&x, 'z' | 0x80, "a.py");
    i32(&x, 7);
    str(&x, 'z', "f");
    /* value: cc as a long of two 15-bit digits = 1 + 2 * 32768 */
    byte(&x, ')');
    byte(&x, 5);
    byte(&x, 'l');
    u32(&x, 2);
    put(&x, "\x01\x00\x02\x00", 4);
    i32(&x, 65537);
    flt(&x, 0.25);
    flt(&x, 1.5);
    byte(&x, '{');
    byte(&x, '0');
    /* key 2: same file by reference 1; callers: key 1 by reference 0 */
    byte(&x, ')');
    byte(&x, 3);
    byte(&x, 'r');
    u32(&x, 1);
    i32(&x, -2);
    str(&x, 'z', "g");
    byte(&x, ')');
    byte(&x, 5);
    i32(&x, 3);
    i32(&x, 4);
    i32(&x, 1); /* an int where a time may be */
    flt(&x, 2.0);
    byte(&x, '{');
    byte(&x, 'r');
    u32(&x, 0);
    byte(&x, ')');
    byte(&x, 4);
    i32(&x, 4);
    i32(&x, 3);
    flt(&x, 0.5);
    flt(&x, 0.75);
    byte(&x, '0');
    byte(&x, '0');

    char err[256] = "";
    tw_pstats *s = NULL;
    assert_int_equal(tw_pstats_parse(x.b, x.n, &s, err, sizeof(err)), TW_OK);
    assert_int_equal(s->nfuncs, 2);
    const tw_pstats_func *f = &s->funcs[0], *g = &s->funcs[1];
    assert_string_equal(f->file, "a.py");
    assert_int_equal(f->line, 7);
    assert_string_equal(f->function, "f");
    assert_int_equal(f->cc, 1 + 2 * 32768);
    assert_int_equal(f->nc, 65537);
    assert_true(f->tt == 0.25 && f->ct == 1.5);
    assert_int_equal(f->ncallers, 0);
    assert_ptr_equal(g->file, f->file); /* one copy per string object */
    assert_int_equal(g->line, -2);
    assert_true(g->tt == 1.0 && g->ct == 2.0);
    assert_int_equal(g->ncallers, 1);
    assert_string_equal(g->callers[0].function, "f");
    assert_int_equal(g->callers[0].nc, 4);
    assert_int_equal(g->callers[0].cc, 3);
    assert_true(g->callers[0].tt == 0.5 && g->callers[0].ct == 0.75);
    tw_pstats_free(s);
}

static void test_count_only_callers(void **state)
{
    (void)state;
    bytes x = {.n = 0};
    byte(&x, '{');
    byte(&x, ')');
    byte(&x, 3);
    str(&x, 'z', "~");
    i32(&x, 0);
    str(&x, 'z', "<built-in method len>");
    byte(&x, ')');
    byte(&x, 5);
    i32(&x, 2);
    i32(&x, 2);
    flt(&x, 0);
    flt(&x, 0);
    byte(&x, '{');
    byte(&x, ')');
    byte(&x, 3);
    str(&x, 'z', "b.py");
    i32(&x, 3);
    str(&x, 'z', "g");
    i32(&x, 2);
    byte(&x, '0');
    byte(&x, '0');
    char err[256] = "";
    tw_pstats *s = NULL;
    assert_int_equal(tw_pstats_parse(x.b, x.n, &s, err, sizeof(err)), TW_OK);
    assert_int_equal(s->funcs[0].ncallers, 1);
    assert_int_equal(s->funcs[0].callers[0].nc, 2);
    assert_int_equal(s->funcs[0].callers[0].cc, 2);
    tw_pstats_free(s);
}

static void expect_error(const uint8_t *b, size_t n, const char *what)
{
    char err[256] = "";
    tw_pstats *s = (tw_pstats *)&err; /* must be reset to NULL */
    assert_int_equal(tw_pstats_parse(b, n, &s, err, sizeof(err)), TW_ERR);
    assert_null(s);
    if (strstr(err, what) == NULL)
        fail_msg("error '%s' does not say '%s'", err, what);
}

static void test_errors(void **state)
{
    (void)state;
    expect_error((const uint8_t *)"", 0, "ends inside an object");
    expect_error((const uint8_t *)"{", 1, "dict is not closed");
    /* a tuple that refers to itself while being read */
    expect_error((const uint8_t *)"\xa9\x01r\x00\x00\x00\x00", 7,
                 "still being read");
    expect_error((const uint8_t *)"r\x05\x00\x00\x00", 5,
                 "reference 5 to one of 0");
    expect_error((const uint8_t *)"(\xff\xff\xff\x7fN", 6, "remaining bytes");
    expect_error((const uint8_t *)"{0N", 3, "1 bytes after the dict");
    expect_error((const uint8_t *)"c", 1, "type code 0x63 ('c')");
    expect_error((const uint8_t *)"l\x05\x00\x00\x00", 5, "too large");
    expect_error((const uint8_t *)"[\x00\x00\x00\x00", 5,
                 "top object is not a dict");
    expect_error((const uint8_t *)"{N)\x00"
                                  "0",
                 5, "not (cc, nc, tt, ct, callers)");
    bytes x = {.n = 0};
    for (int i = 0; i < TW_PSTATS_MAX_DEPTH + 2; i++) {
        byte(&x, ')');
        byte(&x, 1);
    }
    byte(&x, 'N');
    expect_error(x.b, x.n, "nested deeper");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refs_and_long),
        cmocka_unit_test(test_count_only_callers),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
