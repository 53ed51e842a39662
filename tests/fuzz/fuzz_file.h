/*
 * fuzz_file.h - for fuzz targets whose parser reads a path: the input is
 * written to a fresh temporary file (mkstemps, so the suffix is kept for
 * parsers that look at it). The caller unlinks it.
 */
#ifndef TW_FUZZ_FILE_H
#define TW_FUZZ_FILE_H

#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

/* 0 with the file's name in path (a "/tmp/tw_fuzz_XXXXXX<suffix>" buffer
 * of the caller's), -1 when it could not be written. */
static inline int fuzz_write_file(char *path, int suffix_len,
                                  const uint8_t *data, size_t size)
{
    int fd = mkstemps(path, suffix_len);
    if (fd < 0)
        return -1;
    size_t off = 0;
    while (off < size) {
        ssize_t n = write(fd, data + off, size - off);
        if (n <= 0) {
            close(fd);
            unlink(path);
            return -1;
        }
        off += (size_t)n;
    }
    close(fd);
    return 0;
}

#endif /* TW_FUZZ_FILE_H */
