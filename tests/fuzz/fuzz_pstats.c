/*
 * fuzz_pstats.c - the pstats marshal reader (engine/io/pstats_marshal.h)
 * on arbitrary bytes. Nothing may crash, leak or trip a sanitizer; a parse
 * that succeeds must give names, counts and callers that hold together,
 * and a failure must say why.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pstats_marshal.h"
#include "trainwatch/plugin.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256] = "";
    tw_pstats *s = NULL;
    if (tw_pstats_parse(data, size, &s, err, sizeof(err)) != TW_OK) {
        if (s != NULL || err[0] == '\0')
            abort();
        return 0;
    }
    size_t callers = 0;
    volatile size_t chars = 0;
    for (size_t i = 0; i < s->nfuncs; i++) {
        const tw_pstats_func *f = &s->funcs[i];
        if (f->file == NULL || f->function == NULL || f->cc < 0 || f->nc < 0 ||
            (f->ncallers > 0 && f->callers == NULL))
            abort();
        /* touch every string: ASan sees one past its pool */
        chars += strlen(f->file) + strlen(f->function);
        for (size_t j = 0; j < f->ncallers; j++)
            if (f->callers[j].file == NULL || f->callers[j].function == NULL)
                abort();
        callers += f->ncallers;
    }
    if (callers > size || chars == SIZE_MAX)
        abort();
    tw_pstats_free(s);
    return 0;
}
