/*
 * replay_main.c - runs a libFuzzer-style target (LLVMFuzzerTestOneInput)
 * over every regular file under a corpus folder, so ctest exercises each
 * fuzz target with plain compilers. scripts/fuzz.sh builds the same targets
 * with clang -fsanitize=fuzzer instead of this file.
 *
 * Usage: fuzz_<name> CORPUS_DIR. Prints the number of inputs run; exits 1
 * when the folder is missing or unreadable.
 */
#include <dirent.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, "cannot open %s\n", path);
        return -1;
    }
    size_t cap = 4096, len = 0;
    uint8_t *buf = malloc(cap);
    size_t n;
    while (buf != NULL && (n = fread(buf + len, 1, cap - len, f)) > 0) {
        len += n;
        if (len == cap) {
            uint8_t *nb = realloc(buf, cap * 2);
            if (nb == NULL) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf == NULL) {
        fprintf(stderr, "out of memory reading %s\n", path);
        return -1;
    }
    LLVMFuzzerTestOneInput(buf, len);
    free(buf);
    return 0;
}

/* Runs every regular file under dir; returns the count, -1 on error. */
static long replay_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return -1;
    long count = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        size_t plen = strlen(dir) + strlen(de->d_name) + 2;
        char *path = malloc(plen);
        if (path == NULL) {
            count = -1;
            break;
        }
        snprintf(path, plen, "%s/%s", dir, de->d_name);
        struct stat st;
        if (stat(path, &st) == 0) {
            if (S_ISDIR(st.st_mode)) {
                long sub = replay_dir(path);
                if (sub < 0) {
                    free(path);
                    count = -1;
                    break;
                }
                count += sub;
            } else if (S_ISREG(st.st_mode)) {
                if (replay_file(path) != 0) {
                    free(path);
                    count = -1;
                    break;
                }
                count++;
            }
        }
        free(path);
    }
    closedir(d);
    return count;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
        return 2;
    }
    long count = replay_dir(argv[1]);
    if (count < 0) {
        fprintf(stderr, "cannot replay corpus folder %s\n", argv[1]);
        return 1;
    }
    printf("%ld inputs replayed from %s\n", count, argv[1]);
    return 0;
}
