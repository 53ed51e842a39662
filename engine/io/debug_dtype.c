/* debug_dtype.c - DataType element decoding (debug_dtype.h). */
#include "debug_dtype.h"

#include <math.h>
#include <string.h>

#include "tw_assert.h"

typedef struct dtype_info {
    int code;
    const char *name;
    size_t size;
} dtype_info;

static const dtype_info dtypes[] = {
    {1, "float32", 4}, {2, "float64", 8},  {3, "int32", 4},   {4, "uint8", 1},
    {5, "int16", 2},   {6, "int8", 1},     {9, "int64", 8},   {10, "bool", 1},
    {17, "uint16", 2}, {19, "float16", 2}, {22, "uint32", 4}, {23, "uint64", 8},
};

static const dtype_info *find(int dtype)
{
    for (size_t i = 0; i < sizeof(dtypes) / sizeof(dtypes[0]); i++)
        if (dtypes[i].code == dtype)
            return &dtypes[i];
    return NULL;
}

size_t tw_debug_dtype_size(int dtype)
{
    const dtype_info *d = find(dtype);
    return d ? d->size : 0;
}

const char *tw_debug_dtype_name(int dtype)
{
    const dtype_info *d = find(dtype);
    return d ? d->name : "";
}

static uint64_t le(const uint8_t *p, size_t n)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* IEEE 754 binary16 to double. */
static double half_value(uint16_t h)
{
    int sign = h >> 15, exp = (h >> 10) & 0x1f, frac = h & 0x3ff;
    double v;
    if (exp == 0)
        v = ldexp(frac, -24);
    else if (exp == 31)
        v = frac ? NAN : INFINITY;
    else
        v = ldexp(frac + 1024, exp - 25);
    return sign ? -v : v;
}

double tw_debug_dtype_value(int dtype, const uint8_t *content, size_t i)
{
    const dtype_info *d = find(dtype);
    TW_ASSERT(d != NULL);
    uint64_t v = le(content + i * d->size, d->size);
    switch (dtype) {
    case 1: {
        uint32_t u = (uint32_t)v;
        float f;
        memcpy(&f, &u, sizeof(f));
        return f;
    }
    case 2: {
        double x;
        memcpy(&x, &v, sizeof(x));
        return x;
    }
    case 3:
        return (int32_t)(uint32_t)v;
    case 5:
        return (int16_t)(uint16_t)v;
    case 6:
        return (int8_t)(uint8_t)v;
    case 9:
        return (double)(int64_t)v;
    case 10:
        return v != 0;
    case 19:
        return half_value((uint16_t)v);
    default: /* uint8, uint16, uint32, uint64 */
        return (double)v;
    }
}

void tw_debug_dtype_convert(int dtype, const uint8_t *content, size_t n,
                            double *out)
{
    switch (dtype) {
    case 1: /* the common case: little-endian float32 as on the host */
        for (size_t i = 0; i < n; i++) {
            uint32_t u = (uint32_t)content[4 * i] |
                         (uint32_t)content[4 * i + 1] << 8 |
                         (uint32_t)content[4 * i + 2] << 16 |
                         (uint32_t)content[4 * i + 3] << 24;
            float f;
            memcpy(&f, &u, sizeof(f));
            out[i] = f;
        }
        break;
    default:
        for (size_t i = 0; i < n; i++)
            out[i] = tw_debug_dtype_value(dtype, content, i);
        break;
    }
}
