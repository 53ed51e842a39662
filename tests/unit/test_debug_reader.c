/*
 * test_debug_reader.c - the parts of the legacy debug-output folder reader
 * (engine/io/debug_*.h): CRC-32C and its mask against DEBUG_RULES.md
 * §6.5's vectors, record framing, the protobuf subset's decoder (proto3
 * defaults, unknown fields, bad varints, groups), dtypes (float16, int8,
 * bool), the derived reductions, and index and file-name parsing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four above first */
#include <cmocka.h>
#include <math.h>
#include <string.h>

#include "debug_crc32c.h"
#include "debug_dtype.h"
#include "debug_index.h"
#include "debug_proto.h"
#include "debug_record.h"
#include "debug_reduce.h"
#include "trainwatch/plugin.h"

static void test_crc32c_vectors(void **state)
{
    (void)state;
    assert_int_equal(tw_crc32c((const uint8_t *)"123456789", 9), 0xE3069283u);
    const struct {
        uint64_t n;
        uint32_t want;
    } v[] = {{0, 0x07980329u}, {10, 0x3ABFA3AEu}, {100, 0xDF1C5F43u}};
    for (size_t i = 0; i < 3; i++) {
        uint8_t head[12];
        tw_debug_record_header(v[i].n, head);
        assert_int_equal(tw_crc32c_mask(tw_crc32c(head, 8)), v[i].want);
        uint32_t stored = (uint32_t)head[8] | (uint32_t)head[9] << 8 |
                          (uint32_t)head[10] << 16 | (uint32_t)head[11] << 24;
        assert_int_equal(stored, v[i].want);
    }
    assert_int_equal(
        tw_crc32c_mask(tw_crc32c((const uint8_t *)"0x12345678", 10)),
        TW_DEBUG_FOOTER_CONSTANT_VALUE);
}

/* A record around payload p[0, n) with the given footer. */
static size_t make_record(uint8_t *out, const uint8_t *p, size_t n,
                          uint32_t footer)
{
    tw_debug_record_header(n, out);
    memcpy(out + 12, p, n);
    for (int i = 0; i < 4; i++)
        out[12 + n + i] = (uint8_t)(footer >> (8 * i));
    return n + 16;
}

static void test_record_framing(void **state)
{
    (void)state;
    const uint8_t payload[] = {0x10, 0x05};
    uint8_t rec[64];
    const uint8_t *p;
    size_t plen;
    tw_debug_footer footer;
    char err[256];
    size_t n = make_record(rec, payload, 2, TW_DEBUG_FOOTER_CONSTANT_VALUE);
    assert_int_equal(
        tw_debug_record_check(rec, n, &p, &plen, &footer, err, sizeof(err)),
        TW_OK);
    assert_ptr_equal(p, rec + 12);
    assert_int_equal(plen, 2);
    assert_int_equal(footer, TW_DEBUG_FOOTER_CONSTANT);
    /* A real payload CRC is accepted too, and reported as such. */
    n = make_record(rec, payload, 2, tw_crc32c_mask(tw_crc32c(payload, 2)));
    assert_int_equal(
        tw_debug_record_check(rec, n, &p, &plen, &footer, err, sizeof(err)),
        TW_OK);
    assert_int_equal(footer, TW_DEBUG_FOOTER_CRC);
    /* Any other footer is not. */
    n = make_record(rec, payload, 2, 0x12345678u);
    assert_int_equal(
        tw_debug_record_check(rec, n, &p, &plen, &footer, err, sizeof(err)),
        TW_ERR);
    assert_non_null(strstr(err, "offset 14: footer 0x12345678"));
    /* A flipped length CRC; a length that is not the record's. */
    n = make_record(rec, payload, 2, TW_DEBUG_FOOTER_CONSTANT_VALUE);
    rec[9] ^= 1;
    assert_int_equal(
        tw_debug_record_check(rec, n, &p, &plen, &footer, err, sizeof(err)),
        TW_ERR);
    assert_non_null(strstr(err, "offset 8: length CRC"));
    rec[9] ^= 1;
    assert_int_equal(
        tw_debug_record_check(rec, n - 1, &p, &plen, &footer, err, sizeof(err)),
        TW_ERR);
    assert_non_null(strstr(err, "payload length 2 does not fit"));
    assert_int_equal(
        tw_debug_record_check(rec, 15, &p, &plen, &footer, err, sizeof(err)),
        TW_ERR);
}

static void test_event_decode(void **state)
{
    (void)state;
    /* Event{wall_time=1.5, (no step: 0), unknown fixed32 field 7, unknown
     * LEN field 6, summary{value{tag "t", tensor{dtype 1, shape{dim{2}},
     * content 8 bytes}, metadata{plugin_data{"mode","2"},
     * plugin_data{"mode_step","7"}}}}} */
    const uint8_t p[] = {
        0x09, 0,   0,    0,    0,    0,    0,   0xf8, 0x3f, /* wall_time 1.5 */
        0x3d, 1,   2,    3,    4,       /* field 7, fixed32 */
        0x32, 2,   0xaa, 0xbb,          /* field 6, LEN */
        0x2a, 54,                       /* summary */
        0x0a, 52,                       /* value */
        0x0a, 1,   't',                 /* tag */
        0x42, 18,                       /* tensor */
        0x08, 1,                        /* dtype */
        0x12, 4,   0x12, 2,    0x08, 2, /* shape{dim{size 2}} */
        0x22, 8,   0,    0,    0x80, 0x3f, 0,   0,    0,    0xc0, /* 1.0f, -2.0f
                                                                   */
        0x4a, 27,                                                 /* metadata */
        0x0a, 9,   0x0a, 4,    'm',  'o',  'd', 'e',  0x12, 1,    '2',
        0x0a, 14,  0x0a, 9,    'm',  'o',  'd', 'e',  '_',  's',  't',
        'e',  'p', 0x12, 1,    '7'};
    tw_debug_event ev;
    char err[256];
    assert_int_equal(tw_debug_event_decode(p, sizeof(p), &ev, err, sizeof(err)),
                     TW_OK);
    assert_true(ev.wall_time == 1.5);
    assert_int_equal(ev.step, 0);
    assert_int_equal(ev.tag_len, 1);
    assert_memory_equal(ev.tag, "t", 1);
    assert_int_equal(ev.dtype, 1);
    assert_int_equal(ev.ndims, 1);
    assert_int_equal(ev.dims[0], 2);
    assert_int_equal(ev.content_len, 8);
    assert_true(tw_debug_dtype_value(ev.dtype, ev.content, 1) == -2.0);
    assert_int_equal(ev.mode, 2);
    assert_true(ev.has_mode_step);
    assert_int_equal(ev.mode_step, 7);

    /* An 11-byte varint, a LEN past the end, a group, a bad mode. */
    const uint8_t long_varint[] = {0x10, 0x80, 0x80, 0x80, 0x80, 0x80,
                                   0x80, 0x80, 0x80, 0x80, 0x80, 0x00};
    assert_int_equal(tw_debug_event_decode(long_varint, sizeof(long_varint),
                                           &ev, err, sizeof(err)),
                     TW_ERR);
    assert_non_null(strstr(err, "offset 1: varint longer than 10 bytes"));
    const uint8_t past[] = {0x2a, 5, 0x0a, 1};
    assert_int_equal(
        tw_debug_event_decode(past, sizeof(past), &ev, err, sizeof(err)),
        TW_ERR);
    assert_non_null(strstr(err, "runs past the end"));
    const uint8_t group[] = {0x0b, 0x0c};
    assert_int_equal(
        tw_debug_event_decode(group, sizeof(group), &ev, err, sizeof(err)),
        TW_ERR);
    assert_non_null(strstr(err, "offset 0: group or unknown wire type"));
    const uint8_t bad_mode[] = {0x2a, 15,  0x0a, 13, 0x4a, 11,
                                0x0a, 9,   0x0a, 4,  'm',  'o',
                                'd',  'e', 0x12, 1,  '9'};
    assert_int_equal(tw_debug_event_decode(bad_mode, sizeof(bad_mode), &ev, err,
                                           sizeof(err)),
                     TW_ERR);
    assert_non_null(strstr(err, "'mode' is not 1, 2, 3 or 4"));
    /* The step as a LEN field: the wrong wire type for its number. */
    const uint8_t wrong_type[] = {0x12, 0};
    assert_int_equal(tw_debug_event_decode(wrong_type, sizeof(wrong_type), &ev,
                                           err, sizeof(err)),
                     TW_ERR);
    assert_non_null(strstr(err, "field 2 has wire type 2"));
}

static void test_dtypes(void **state)
{
    (void)state;
    const uint8_t half[] = {0x00, 0x3c, 0x00, 0xc0, 0x00,
                            0x7c, 0x01, 0x00, 0x00, 0x7e};
    assert_true(tw_debug_dtype_value(19, half, 0) == 1.0);
    assert_true(tw_debug_dtype_value(19, half, 1) == -2.0);
    assert_true(isinf(tw_debug_dtype_value(19, half, 2)));
    assert_true(tw_debug_dtype_value(19, half, 3) == ldexp(1, -24));
    assert_true(isnan(tw_debug_dtype_value(19, half, 4)));
    const uint8_t bytes[] = {0xff, 0x02};
    assert_true(tw_debug_dtype_value(6, bytes, 0) == -1.0); /* int8 signed */
    assert_true(tw_debug_dtype_value(4, bytes, 0) == 255.0);
    assert_true(tw_debug_dtype_value(10, bytes, 1) == 1.0); /* bool */
    assert_int_equal(tw_debug_dtype_size(8), 0);            /* complex64 */
    assert_int_equal(tw_debug_dtype_size(0), 0);            /* strings */
    assert_string_equal(tw_debug_dtype_name(23), "uint64");
}

static double op(const tw_tensor_reduction *r, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(r[i].op, name) == 0)
            return r[i].value;
    fail_msg("no reduction %s", name);
    return NAN;
}

static void test_reductions(void **state)
{
    (void)state;
    tw_tensor_reduction r[TW_DEBUG_MAX_DERIVED];
    double scalar = 0.25;
    tw_debug_tensor_values s = {.x = &scalar, .n = 1};
    assert_int_equal(tw_debug_reduce(&s, r), 1);
    assert_string_equal(r[0].op, "value");
    assert_true(r[0].value == 0.25);

    /* Batch of 2, 2 nodes: node 0 never > 0 (dead), node 1 in 1 of 2. */
    const double x[] = {0, 1, 0, -3};
    const double prev[] = {0, 1, 0, 1};
    const int64_t shape[] = {2, 2};
    tw_debug_tensor_values t = {.x = x,
                                .n = 4,
                                .shape = shape,
                                .nshape = 2,
                                .prev = prev,
                                .nprev = 4,
                                .relu_output = 1,
                                .threshold_inactivity = 1.0};
    size_t n = tw_debug_reduce(&t, r);
    assert_int_equal(n, 8);
    assert_true(op(r, n, "abs_mean") == 1.0);
    assert_true(op(r, n, "l2") == sqrt(10.0));
    /* mean -0.5; population variance (0.25+2.25+0.25+6.25)/4 */
    assert_true(op(r, n, "variance") == 2.25);
    assert_true(op(r, n, "zero_fraction") == 0.5);
    assert_true(op(r, n, "update_l2") == 4.0);
    assert_true(op(r, n, "dead_fraction") == 0.5);
    assert_true(op(r, n, "nan_count") == 0.0);

    const double bad[] = {NAN, INFINITY, -INFINITY, 1};
    tw_debug_tensor_values b = {.x = bad, .n = 4, .shape = shape, .nshape = 2};
    n = tw_debug_reduce(&b, r);
    assert_int_equal(n, 6); /* no previous values, not a ReLU output */
    assert_true(op(r, n, "nan_count") == 1.0);
    assert_true(op(r, n, "inf_count") == 2.0);
    assert_true(isnan(op(r, n, "abs_mean")));

    assert_true(tw_debug_is_relu_output("features.relu_output_0"));
    assert_true(tw_debug_is_relu_output("ReLU_output_0"));
    assert_false(tw_debug_is_relu_output("relu_input_0"));
    assert_true(tw_debug_is_parameter("Net_fc1.weight"));
    assert_false(tw_debug_is_parameter("gradient/Net_fc1.weight"));
    assert_false(tw_debug_is_parameter("fc1_output_0"));
}

/* Input images (collection input_image): the sum of each channel along
 * axis 1, the elements per channel, the axis; none beyond 64 channels or
 * when the shape does not fit the elements. */
static void test_channel_sums(void **state)
{
    (void)state;
    tw_tensor_reduction r[TW_DEBUG_MAX_DERIVED];
    /* (2, 3, 2): image 0 channels 0..2 = {1,2}, {3,4}, {5,6}; image 1 the
     * same plus 10 */
    double x[12];
    for (int i = 0; i < 12; i++)
        x[i] = (double)(i % 6 + 1) + (i >= 6 ? 10.0 : 0.0);
    const int64_t shape[] = {2, 3, 2};
    tw_debug_tensor_values t = {
        .x = x, .n = 12, .shape = shape, .nshape = 3, .input_image = 1};
    size_t n = tw_debug_reduce(&t, r);
    assert_int_equal(n, 6 + 3 + 2);
    assert_true(op(r, n, "channel_sum/0") == 1 + 2 + 11 + 12);
    assert_true(op(r, n, "channel_sum/1") == 3 + 4 + 13 + 14);
    assert_true(op(r, n, "channel_sum/2") == 5 + 6 + 15 + 16);
    assert_true(op(r, n, "channel_count") == 4.0);
    assert_true(op(r, n, "channel_axis") == 1.0);
    /* not of input_image: no channel sums */
    t.input_image = 0;
    assert_int_equal(tw_debug_reduce(&t, r), 6);
    /* 65 channels: none; a shape that does not fit the elements: none */
    static double many[65];
    const int64_t wide[] = {1, 65};
    tw_debug_tensor_values w = {
        .x = many, .n = 65, .shape = wide, .nshape = 2, .input_image = 1};
    assert_int_equal(tw_debug_reduce(&w, r), 6);
    const int64_t lies[] = {2, 3, 4};
    t.shape = lies;
    t.input_image = 1;
    assert_int_equal(tw_debug_reduce(&t, r), 6);
}

static void test_index_and_names(void **state)
{
    (void)state;
    int64_t step;
    char worker[32];
    assert_int_equal(tw_debug_file_name("000000012345_worker_10.json", &step,
                                        worker, sizeof(worker)),
                     TW_OK);
    assert_int_equal(step, 12345);
    assert_string_equal(worker, "worker_10");
    assert_int_equal(
        tw_debug_file_name("abc_worker_0.json", &step, worker, sizeof(worker)),
        TW_ERR);
    assert_int_equal(
        tw_debug_file_name("12.json", &step, worker, sizeof(worker)), TW_ERR);

    const char *good =
        "{\"meta\": {\"mode\": \"EVAL\", \"mode_step\": 4, \"event_file_name\":"
        " \"events/000000000009/000000000009_worker_0.tfevents\"},"
        " \"tensor_payload\": [{\"tensorname\": \"a\", \"start_idx\": 0,"
        " \"length\": 90}], \"shape_payload\": []}";
    tw_debug_index ix;
    char err[256];
    assert_int_equal(
        tw_debug_index_parse(good, strlen(good), &ix, err, sizeof(err)), TW_OK);
    assert_int_equal(ix.mode, TW_MODE_EVAL);
    assert_int_equal(ix.mode_step, 4);
    assert_int_equal(ix.nentries, 1);
    assert_string_equal(ix.entries[0].name, "a");
    assert_int_equal(ix.entries[0].length, 90);
    tw_debug_index_free(&ix);

    const struct {
        const char *text;
        const char *why;
    } bad[] = {
        {"{\"meta\": {}, \"tensor_payload\": []}", "non-empty \"meta\""},
        {"{\"meta\": {\"mode\": \"X\", \"mode_step\": 0}, \"tensor_payload\":"
         " []}",
         "meta.mode"},
        {"{\"meta\": {\"mode\": \"TRAIN\", \"mode_step\": 0, "
         "\"event_file_name\": \"../x\"}, \"tensor_payload\": []}",
         "relative path"},
        {"{\"meta\": {\"mode\": \"TRAIN\", \"mode_step\": 0}, "
         "\"tensor_payload\": [{\"tensorname\": \"a\", \"start_idx\": 0,"
         " \"length\": 9}]}",
         "without meta.event_file_name"},
        {"{\"meta\": {\"mode\": \"TRAIN\", \"mode_step\": 0, "
         "\"event_file_name\": \"e\"}, \"tensor_payload\": [{\"tensorname\":"
         " \"a\", \"start_idx\": -1, \"length\": 9}]}",
         "tensor_payload[0]"},
        {"{\"meta\": {\"mode\": \"TRAIN\", \"mode_step\": 0}}", "neither"},
        {"[1", "not JSON"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = '\0';
        assert_int_equal(tw_debug_index_parse(bad[i].text, strlen(bad[i].text),
                                              &ix, err, sizeof(err)),
                         TW_ERR);
        if (strstr(err, bad[i].why) == NULL)
            fail_msg("case %zu: '%s' lacks '%s'", i, err, bad[i].why);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc32c_vectors),
        cmocka_unit_test(test_record_framing),
        cmocka_unit_test(test_event_decode),
        cmocka_unit_test(test_dtypes),
        cmocka_unit_test(test_reductions),
        cmocka_unit_test(test_channel_sums),
        cmocka_unit_test(test_index_and_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
