/*
 * replay_main.c - runs a libFuzzer target without libFuzzer: feeds it every
 * file under the directory argv[1] (recursively), or the file argv[1]
 * itself, once. Used by ctest to replay seed corpora and to reproduce a
 * crash found by scripts/fuzz.sh under gdb or valgrind.
 *
 * Exit status: 0 when every input ran; 1 when the path is missing or a file
 * cannot be read. A crashing input aborts the process, as under libFuzzer.
 */
#include <errno.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t ran;
static int failed;

/* Exactly `size` bytes on the heap, so ASan sees a read past the input. */
static int run_file(const char *path, off_t size)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
        return -1;
    }
    size_t n = (size_t)size;
    uint8_t *data = malloc(n == 0 ? 1 : n);
    if (data == NULL) {
        fprintf(stderr, "replay: %s: out of memory for %zu bytes\n", path, n);
        fclose(f);
        return -1;
    }
    size_t got = fread(data, 1, n, f);
    int read_err = ferror(f);
    fclose(f);
    if (read_err || got != n) {
        fprintf(stderr, "replay: %s: short read (%zu of %zu bytes)\n", path,
                got, n);
        free(data);
        return -1;
    }
    LLVMFuzzerTestOneInput(data, n);
    free(data);
    ran++;
    return 0;
}

static int visit(const char *path, const struct stat *st, int type,
                 struct FTW *ftw)
{
    (void)ftw;
    if (type == FTW_DNR || type == FTW_NS) {
        fprintf(stderr, "replay: %s: cannot be read\n", path);
        failed = 1;
    } else if (type == FTW_F && S_ISREG(st->st_mode)) {
        if (run_file(path, st->st_size) != 0)
            failed = 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s CORPUS_DIR_OR_FILE\n", argv[0]);
        return 1;
    }
    struct stat st;
    if (stat(argv[1], &st) != 0) {
        fprintf(stderr, "replay: %s: %s\n", argv[1], strerror(errno));
        return 1;
    }
    if (S_ISDIR(st.st_mode)) {
        if (nftw(argv[1], visit, 16, FTW_PHYS) != 0) {
            fprintf(stderr, "replay: %s: %s\n", argv[1], strerror(errno));
            return 1;
        }
    } else if (run_file(argv[1], st.st_size) != 0) {
        failed = 1;
    }
    printf("replay: ran %zu inputs from %s\n", ran, argv[1]);
    return failed;
}
