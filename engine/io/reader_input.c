/* reader_input.c - padded, growable read buffer over zlib (reader_input.h). */
#include "reader_input.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "reader_json.h"
#include "trainwatch/plugin.h"

#define TW_INPUT_INITIAL (1u << 20)
#define TW_INPUT_SMALLEST (8u << 10)
#define TW_INPUT_MAX (256u << 20)

/* A file smaller than the usual first buffer gets a buffer its size (a
 * power of two, at least 8 KB; a compressed one grows by doubling as it
 * inflates): folders hold many small files, and a 1 MB zeroed buffer
 * plus zlib's 256 KB per small file cost more than reading it. */
static size_t initial_capacity(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0 || st.st_size < 0 ||
        (uint64_t)st.st_size >= TW_INPUT_INITIAL)
        return TW_INPUT_INITIAL;
    size_t cap = TW_INPUT_SMALLEST;
    while (cap <= (size_t)st.st_size)
        cap *= 2;
    return cap;
}

int tw_input_open(tw_input *in, const char *path, char *err, size_t errlen)
{
    memset(in, 0, sizeof(*in));
    errno = 0;
    gzFile gz = gzopen(path, "rb");
    if (gz == NULL) {
        snprintf(err, errlen, "cannot open %s: %s", path,
                 errno != 0 ? strerror(errno) : "out of memory");
        return TW_ERR;
    }
    size_t cap = initial_capacity(path);
    gzbuffer(gz, cap < 256u * 1024u ? (unsigned)cap : 256u * 1024u);
    /* Only the padding needs zeros (bytes up to `end` are always read
     * first): zeroing the whole buffer per file cost the readers ~4 %. */
    in->buf = malloc(cap + TW_JSON_PADDING);
    if (in->buf != NULL)
        memset(in->buf + cap, 0, TW_JSON_PADDING);
    if (in->buf == NULL) {
        gzclose(gz);
        snprintf(err, errlen, "cannot read %s: out of memory", path);
        return TW_ERR;
    }
    in->gz = gz;
    in->cap = cap;
    in->max_cap = TW_INPUT_MAX;
    return TW_OK;
}

uint64_t tw_input_count_newlines(const char *p, size_t n)
{
    uint64_t count = 0;
    const char *end = p + n;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (nl == NULL)
            break;
        count++;
        p = nl + 1;
    }
    return count;
}

int tw_input_fill(tw_input *in, int *too_long, char *err, size_t errlen)
{
    *too_long = 0;
    if (in->eof)
        return 0;
    if (in->start > 0) {
        in->dropped_nl += tw_input_count_newlines(in->buf, in->start);
        memmove(in->buf, in->buf + in->start, in->end - in->start);
        in->end -= in->start;
        in->start = 0;
    }
    if (in->end == in->cap) {
        if (in->cap >= in->max_cap) {
            *too_long = 1;
            snprintf(err, errlen, "a record is longer than %zu bytes",
                     in->max_cap);
            return TW_ERR;
        }
        size_t ncap = in->cap * 2;
        if (ncap > in->max_cap)
            ncap = in->max_cap;
        char *nbuf = realloc(in->buf, ncap + TW_JSON_PADDING);
        if (nbuf == NULL) {
            snprintf(err, errlen, "out of memory");
            return TW_ERR;
        }
        memset(nbuf + in->cap, 0, ncap - in->cap + TW_JSON_PADDING);
        in->buf = nbuf;
        in->cap = ncap;
    }
    size_t want = in->cap - in->end;
    if (want > (size_t)INT32_MAX)
        want = (size_t)INT32_MAX;
    int n = gzread((gzFile)in->gz, in->buf + in->end, (unsigned)want);
    if (n < 0) {
        int zerr = 0;
        const char *msg = gzerror((gzFile)in->gz, &zerr);
        snprintf(err, errlen, "read error: %s",
                 zerr == Z_ERRNO ? strerror(errno) : msg);
        return TW_ERR;
    }
    if (n == 0) {
        /* A truncated gzip stream reads as end of file with an error. */
        int zerr = 0;
        const char *msg = gzerror((gzFile)in->gz, &zerr);
        in->eof = 1;
        if (zerr != Z_OK && zerr != Z_STREAM_END) {
            snprintf(err, errlen, "read error: %s", msg);
            return TW_ERR;
        }
        return 0;
    }
    in->end += (size_t)n;
    in->bytes += (uint64_t)n;
    /* The padding after the text is zeros, not what the buffer held:
     * simdjson looks at the byte after a document (a root array's
     * "first character past the end"), and valgrind rightly flags a
     * branch on memory that was never written. */
    memset(in->buf + in->end, 0, TW_JSON_PADDING);
    return 1;
}

void tw_input_close(tw_input *in)
{
    if (in->gz != NULL)
        gzclose((gzFile)in->gz);
    free(in->buf);
    memset(in, 0, sizeof(*in));
}
