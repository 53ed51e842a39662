/*
 * fuzz_wire.c - libFuzzer target for the wire decoder (engine/io/wire.h).
 *
 * Any input must decode or be refused with a status and a message; a batch
 * that decodes must re-encode, and decode again to the same counts.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_wire: %s\n", what);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256] = "";
    tw_batch *b = NULL;
    tw_wire_status st = tw_wire_decode(data, size, &b, err, sizeof(err));
    if (st != TW_WIRE_OK) {
        check(b == NULL, "a refused buffer returned a batch");
        check(err[0] != '\0', "a refused buffer came without a message");
        check(strcmp(tw_wire_status_name(st), "unknown") != 0,
              "a status without a name");
        return 0;
    }

    uint8_t *buf = NULL;
    size_t len = 0;
    st = tw_wire_encode(b, &buf, &len);
    check(st == TW_WIRE_OK, "a decoded batch did not re-encode");

    tw_batch *again = NULL;
    st = tw_wire_decode(buf, len, &again, err, sizeof(err));
    check(st == TW_WIRE_OK, "a re-encoded batch did not decode");
    check(again->nseries == b->nseries && again->nsamples == b->nsamples &&
              again->nevents == b->nevents && again->nmarkers == b->nmarkers &&
              again->ntensors == b->ntensors,
          "counts changed across a re-encode");
    for (size_t i = 0; i < b->ntensors; i++)
        check(strcmp(again->tensors[i].name, b->tensors[i].name) == 0 &&
                  again->tensors[i].nreductions == b->tensors[i].nreductions &&
                  again->tensors[i].nraw == b->tensors[i].nraw &&
                  again->tensors[i].wall_us == b->tensors[i].wall_us,
              "a tensor changed across a re-encode");
    check(strcmp(again->job, b->job) == 0 &&
              strcmp(again->node, b->node) == 0 && again->seq == b->seq,
          "header changed across a re-encode");

    tw_batch_free(again);
    free(buf);
    tw_batch_free(b);
    return 0;
}
