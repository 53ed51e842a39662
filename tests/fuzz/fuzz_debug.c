/*
 * fuzz_debug.c - the legacy debug-output folder's parsers on arbitrary
 * bytes (engine/io/reader_debug.h): the input as one framed event record
 * (and its payload decoded when the framing holds), as a bare Event
 * protobuf, as an index file and as a collections file, all in memory
 * (fuzz_debug_folder.c reads the input through the folder reader).
 * Nothing may crash, leak or trip a sanitizer; a failure must say why,
 * and a decoded event must point inside the input.
 *
 * Seed corpus (tests/fuzz/corpus/debug/): records cut from the golden
 * reference-written folder (tests/debug_legacy/golden/ref_small) and its
 * index and collections files.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "debug_collections.h"
#include "debug_index.h"
#include "debug_proto.h"
#include "debug_record.h"
#include "trainwatch/plugin.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_event(const uint8_t *p, size_t n, const tw_debug_event *ev)
{
    if (ev->tag != NULL && ((const uint8_t *)ev->tag < p ||
                            (const uint8_t *)ev->tag + ev->tag_len > p + n))
        abort();
    if (ev->content != NULL &&
        (ev->content < p || ev->content + ev->content_len > p + n))
        abort();
    if (ev->ndims > TW_DEBUG_MAX_DIMS ||
        (ev->mode != 0 && (ev->mode < 1 || ev->mode > 4)))
        abort();
    for (uint32_t i = 0; i < ev->ndims; i++)
        if (ev->dims[i] < 0)
            abort();
}

static void decode(const uint8_t *p, size_t n)
{
    char err[256] = "";
    tw_debug_event ev;
    if (tw_debug_event_decode(p, n, &ev, err, sizeof(err)) == TW_OK)
        check_event(p, n, &ev);
    else if (err[0] == '\0')
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256] = "";
    const uint8_t *payload;
    size_t plen;
    tw_debug_footer footer;
    if (tw_debug_record_check(data, size, &payload, &plen, &footer, err,
                              sizeof(err)) == TW_OK) {
        if (payload != data + 12 || plen + 16 != size)
            abort();
        decode(payload, plen);
    } else if (err[0] == '\0') {
        abort();
    }
    decode(data, size);

    tw_debug_index ix;
    err[0] = '\0';
    if (tw_debug_index_parse((const char *)data, size, &ix, err, sizeof(err)) ==
        TW_OK) {
        for (size_t i = 0; i < ix.nentries; i++)
            if (ix.entries[i].start < 0 || ix.entries[i].length < 0 ||
                ix.entries[i].name == NULL)
                abort();
        tw_debug_index_free(&ix);
    } else if (err[0] == '\0' || ix.json != NULL) {
        abort();
    }

    tw_debug_collections c;
    tw_debug_collections_init(&c);
    err[0] = '\0';
    if (tw_debug_collections_add(&c, (const char *)data, size, err,
                                 sizeof(err)) != TW_OK &&
        err[0] == '\0')
        abort();
    tw_debug_collections_free(&c);

    return 0;
}
