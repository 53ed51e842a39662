/* grow.c - growable arrays (grow.h). */
#include "grow.h"

#include <stdint.h>
#include <stdlib.h>

#include "trainwatch/plugin.h"

int tw_grow(void **items, size_t *cap, size_t need, size_t elem_size,
            size_t first)
{
    if (need <= *cap)
        return TW_OK;
    size_t ncap = *cap ? *cap : (first ? first : 1);
    while (ncap < need) {
        if (ncap > SIZE_MAX / 2)
            return TW_ERR;
        ncap *= 2;
    }
    if (elem_size != 0 && ncap > SIZE_MAX / elem_size)
        return TW_ERR;
    void *n = realloc(*items, ncap * elem_size);
    if (n == NULL)
        return TW_ERR;
    *items = n;
    *cap = ncap;
    return TW_OK;
}
