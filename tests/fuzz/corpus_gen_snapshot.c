/*
 * corpus_gen_snapshot.c - writes the seed corpus of fuzz_snapshot
 * (tests/fuzz/corpus/snapshot/): memory-store snapshot files written by
 * the store itself, one empty and one with values (binary, with a NUL),
 * a set, keys with a time to live, and a sorted set of pending claims.
 * Run by hand:
 *   build/tests/corpus_gen_snapshot tests/fuzz/corpus/snapshot
 */
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "state_store.h"

static int write_one(const char *dir, const char *name, int fill)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    tw_setting items[] = {{"store", "memory", 2}, {"snapshot", path, 3}};
    tw_settings state = {"corpus.yaml", "state", 1, items, 2};
    tw_store *s = NULL;
    char err[1024];
    if (tw_store_open(&state, &s, err, sizeof(err)) != TW_OK) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    tw_store_txn_begin(s);
    if (fill) {
        static const unsigned char core[] = {'T', 'W', 'J', 'C', 2, 0, 0, 1};
        tw_store_txn_put(s, "tw:job:j1:core", core, sizeof(core));
        tw_store_txn_put(s, "tw:job:j1:rule.0", "rule state", 10);
        tw_store_txn_sadd(s, "tw:jobs", "j1");
        tw_store_txn_sadd(s, "tw:jobs", "j2");
        tw_store_txn_put(s, "tw:done:j0", "", 0);
        tw_store_txn_expire(s, "tw:done:j0", 3600);
    }
    if (!fill) /* a snapshot of no records: a key put, then deleted */
        tw_store_txn_put(s, "tw:gone", "x", 1);
    int rc = tw_store_txn_commit(s, err, sizeof(err));
    if (rc == TW_OK && !fill) {
        tw_store_txn_begin(s);
        tw_store_txn_del(s, "tw:gone");
        rc = tw_store_txn_commit(s, err, sizeof(err));
    }
    if (rc == TW_OK && fill &&
        tw_store_claim(s, "tw:claim:x", 60, err, sizeof(err)) != 1)
        rc = TW_ERR;
    /* claims pending confirmation: a sorted set (record 'Z') */
    if (rc == TW_OK && fill == 2 &&
        (tw_store_claim_pending(s, "tw:claim:y", "alert y", 60, "tw:pending",
                                err, sizeof(err)) != 1 ||
         tw_store_claim_pending(s, "tw:claim:z", "action z", 60, "tw:pending",
                                err, sizeof(err)) != 1))
        rc = TW_ERR;
    tw_store_close(s);
    if (rc != TW_OK) {
        fprintf(stderr, "%s: %s\n", path, err);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
        return 2;
    }
    return write_one(argv[1], "empty.snap", 0) ||
           write_one(argv[1], "jobs.snap", 1) ||
           write_one(argv[1], "pending.snap", 2);
}
