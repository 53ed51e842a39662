/*
 * fuzz_wire.c - libFuzzer target for the wire decoder (engine/io/wire.h)
 * and the Python-profile reader of `pystats --job`
 * (engine/io/wire_pyprofile.h).
 *
 * Any input must decode or be refused with a status and a message; a batch
 * that decodes must re-encode, and decode again to the same counts. The
 * profile reader must refuse what the batch decoder's gate refuses, with
 * the same status, and what it accepts must hold the batch's count of
 * profiles with the invariants it promises.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"
#include "wire_pyprofile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_wire: %s\n", what);
        abort();
    }
}

/* The profile reader over the same input; st is the batch decoder's
 * status, b its batch (NULL when refused). */
static void check_profiles(const uint8_t *data, size_t size, tw_wire_status st,
                           const tw_batch *b)
{
    char err[256] = "";
    tw_wire_pyprofiles *p = NULL;
    tw_wire_status ps =
        tw_wire_decode_pyprofiles(data, size, &p, err, sizeof(err));
    /* both share the gate: identifier, verifier, version, id lengths */
    int gate = st == TW_WIRE_TOO_SHORT || st == TW_WIRE_BAD_IDENTIFIER ||
               st == TW_WIRE_MISSING_FIELD ||
               st == TW_WIRE_UNSUPPORTED_VERSION || st == TW_WIRE_ID_TOO_LONG;
    check(!gate || ps == st, "the decoders' gates disagree");
    if (ps != TW_WIRE_OK) {
        check(p == NULL, "refused profiles came with a result");
        check(err[0] != '\0', "refused profiles came without a message");
        check(st != TW_WIRE_OK || ps == TW_WIRE_BAD_VALUE ||
                  ps == TW_WIRE_NO_MEMORY,
              "the profile reader refused a batch the gate accepts");
        return;
    }
    check(b == NULL || b->npython_profiles == p->n,
          "profile counts differ between the decoders");
    check(p->job != NULL && p->node != NULL, "no job or node");
    for (size_t i = 0; i < p->n; i++) {
        const tw_wire_pyprofile *q = &p->items[i];
        check(q->stats != NULL && q->start_us <= q->end_us &&
                  q->start_phase[0] != '\0' && q->end_phase[0] != '\0',
              "a profile broke its promises");
        for (size_t k = 0; k < q->stats->nfuncs; k++) {
            const tw_pstats_func *f = &q->stats->funcs[k];
            check(f->function[0] != '\0' && f->file != NULL && f->cc <= f->nc &&
                      f->cc >= 0,
                  "a function broke its promises");
        }
    }
    tw_wire_pyprofiles_free(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256] = "";
    tw_batch *b = NULL;
    tw_wire_status st = tw_wire_decode(data, size, &b, err, sizeof(err));
    check_profiles(data, size, st, b);
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
