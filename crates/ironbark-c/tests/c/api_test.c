/*
 * api_test.c: exercises every function of the C API (include/ironbark.h),
 * including its error paths, against a real database in the directory
 * given as argv[1]. Built and run under -fsanitize=address,undefined by
 * tests/c_api.rs. Prints "N checks passed, M failed" and exits non-zero on
 * any failure.
 */
/* fork, waitpid and _exit under -std=c11. */
#define _POSIX_C_SOURCE 200809L

#include "ironbark.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

static int passed, failed;

#define CHECK(cond)                                                                   \
    do {                                                                              \
        if (cond) {                                                                   \
            passed++;                                                                 \
        } else {                                                                      \
            failed++;                                                                 \
            fprintf(stderr, "%s:%d: check failed: %s (last error: %s)\n", __FILE__,   \
                    __LINE__, #cond, ironbark_last_error());                          \
        }                                                                             \
    } while (0)

/* rc must equal want. */
#define CHECK_RC(expr, want)                                                          \
    do {                                                                              \
        int rc_ = (expr);                                                             \
        if (rc_ == (want)) {                                                          \
            passed++;                                                                 \
        } else {                                                                      \
            failed++;                                                                 \
            fprintf(stderr, "%s:%d: %s returned %d (%s: %s), expected %d\n", __FILE__, \
                    __LINE__, #expr, rc_, ironbark_strerror(rc_), ironbark_last_error(), \
                    (want));                                                          \
        }                                                                             \
    } while (0)

static const uint8_t *B(const char *s) { return (const uint8_t *)s; }

static int bytes_eq(const uint8_t *p, size_t n, const char *s) {
    return n == strlen(s) && memcmp(p, s, n) == 0;
}

static char path_buf[4096];
static const char *db_path(const char *dir, const char *name) {
    snprintf(path_buf, sizeof path_buf, "%s/%s", dir, name);
    return path_buf;
}

static void test_errors_and_strings(void) {
    CHECK(strcmp(ironbark_version(), "0.1.0") == 0);
    CHECK(strcmp(ironbark_last_error(), "") == 0);
    int codes[] = {IRONBARK_OK,          IRONBARK_NOTFOUND,     IRONBARK_EINVAL,
                   IRONBARK_EIO,         IRONBARK_ECORRUPTED,   IRONBARK_ENOTIRONBARK,
                   IRONBARK_EVERSION,    IRONBARK_EPAGESIZE,    IRONBARK_EKEYSIZE,
                   IRONBARK_EVALSIZE,    IRONBARK_ETREENAME,    IRONBARK_ENOTREE,
                   IRONBARK_ETREEDROPPED, IRONBARK_EREADERSFULL, IRONBARK_EBUSY,
                   IRONBARK_ELOCKED,     IRONBARK_EREADONLY,    IRONBARK_EPOISONED,
                   IRONBARK_EOPTION,     IRONBARK_ETXNFAILED,   IRONBARK_ETXNENDED,
                   IRONBARK_EPANIC,      IRONBARK_EUNKNOWN,     IRONBARK_ESTALETREE,
                   IRONBARK_EFOREIGNTREE, IRONBARK_ELOCKLESSREADER, IRONBARK_EWRITETXNTHREAD,
                   IRONBARK_EKEYORDER,   IRONBARK_EWRONGKIND,   IRONBARK_EPAIRSIZE,
                   IRONBARK_EINTKEYSIZE, IRONBARK_ESAVEPOINT,   IRONBARK_EARENAFULL,
                   IRONBARK_KEYEXIST};
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        const char *s = ironbark_strerror(codes[i]);
        CHECK(s != NULL && strlen(s) > 0);
        /* Each code has its own description. */
        for (size_t j = 0; j < i; j++) CHECK(strcmp(s, ironbark_strerror(codes[j])) != 0);
    }
    CHECK(strcmp(ironbark_strerror(12345), "unknown status code") == 0);
    CHECK(strcmp(ironbark_strerror(IRONBARK_EKEYSIZE), "key too large") == 0);
}

static void test_open_errors(const char *dir) {
    ironbark_options o;
    ironbark_db *db = (ironbark_db *)&o; /* non-null garbage: must be cleared */

    CHECK_RC(ironbark_options_init(NULL), IRONBARK_EINVAL);
    CHECK(strstr(ironbark_last_error(), "opts is null") != NULL);
    CHECK_RC(ironbark_options_init(&o), IRONBARK_OK);
    CHECK(o.page_size == 4096 && o.max_readers == 126 && o.create == 1 && o.read_only == 0 &&
          o.durability == IRONBARK_DURABILITY_IMMEDIATE && o.salvage_damaged_log == 0);

    CHECK_RC(ironbark_open(NULL, NULL, &db), IRONBARK_EINVAL);
    CHECK(db == NULL);
    CHECK_RC(ironbark_open(db_path(dir, "x.ib"), NULL, NULL), IRONBARK_EINVAL);

    o.page_size = 1000;
    CHECK_RC(ironbark_open(db_path(dir, "badpage.ib"), &o, &db), IRONBARK_EPAGESIZE);
    CHECK(strstr(ironbark_last_error(), "page size 1000") != NULL);
    ironbark_options_init(&o);
    o.max_readers = 0;
    CHECK_RC(ironbark_open(db_path(dir, "badreaders.ib"), &o, &db), IRONBARK_EOPTION);
    ironbark_options_init(&o);
    o.durability = 7;
    CHECK_RC(ironbark_open(db_path(dir, "baddur.ib"), &o, &db), IRONBARK_EOPTION);
    CHECK(strstr(ironbark_last_error(), "durability 7") != NULL);
    ironbark_options_init(&o);
    o.create = 0;
    CHECK_RC(ironbark_open(db_path(dir, "missing.ib"), &o, &db), IRONBARK_EIO);
    CHECK(db == NULL);

    /* A file that is not a database. */
    FILE *f = fopen(db_path(dir, "garbage.ib"), "wb");
    CHECK(f != NULL);
    for (int i = 0; i < 16384; i++) fputc('x', f);
    fclose(f);
    CHECK_RC(ironbark_open(db_path(dir, "garbage.ib"), NULL, &db), IRONBARK_ENOTIRONBARK);

    /* A path that is not UTF-8. */
    CHECK_RC(ironbark_open("\xff\xfe.ib", NULL, &db), IRONBARK_EINVAL);
}

/* The commits test_salvage_damaged_log's child makes after its base load,
 * one durable logged commit each, and the one whose log record it damages. */
#define SALVAGE_COMMITS 24
#define SALVAGE_DAMAGED 12
#define SALVAGE_BASE 100

/* The child of test_salvage_damaged_log: a base load, then SALVAGE_COMMITS
 * durable commits (key kNNN, and "last" = NNN), then an exit that skips the
 * close, so that the commits are in the redo log only (the close would
 * checkpoint them and empty it). Exits non-zero on any failure. */
static void salvage_child(const char *path) {
    ironbark_options o;
    ironbark_db *db = NULL;
    ironbark_txn *w = NULL;
    ironbark_tree *t = NULL;
    char key[32], val[32];
    if (ironbark_options_init(&o) != IRONBARK_OK) _exit(10);
    o.durability = IRONBARK_DURABILITY_IMMEDIATE;
    if (ironbark_open(path, &o, &db) != IRONBARK_OK) _exit(11);
    if (ironbark_txn_begin(db, IRONBARK_TXN_WRITE, &w) != IRONBARK_OK) _exit(12);
    if (ironbark_tree_open(w, "t", IRONBARK_TREE_CREATE, &t) != IRONBARK_OK) _exit(13);
    for (int i = 0; i < SALVAGE_BASE; i++) {
        snprintf(key, sizeof key, "base%03d", i);
        if (ironbark_put(w, t, B(key), strlen(key), B("b"), 1) != IRONBARK_OK) _exit(14);
    }
    if (ironbark_txn_commit(w) != IRONBARK_OK) _exit(15);
    for (int i = 0; i < SALVAGE_COMMITS; i++) {
        snprintf(key, sizeof key, "k%03d", i);
        snprintf(val, sizeof val, "%d", i);
        if (ironbark_txn_begin(db, IRONBARK_TXN_WRITE, &w) != IRONBARK_OK ||
            ironbark_put(w, t, B(key), strlen(key), B(val), strlen(val)) != IRONBARK_OK ||
            ironbark_put(w, t, B("last"), 4, B(val), strlen(val)) != IRONBARK_OK ||
            ironbark_txn_commit(w) != IRONBARK_OK)
            _exit(16);
    }
    _exit(0);
}

static uint64_t le_bytes(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

/* The tree "t" of a salvaged database: the base load and the commits
 * before the damaged one, nothing after. */
static void check_salvaged(ironbark_db *db) {
    ironbark_txn *r = NULL;
    ironbark_tree *t = NULL;
    const uint8_t *v;
    size_t vl;
    uint64_t count = 0;
    char key[32], val[32];
    CHECK_RC(ironbark_txn_begin(db, IRONBARK_TXN_READ_ONLY, &r), IRONBARK_OK);
    CHECK_RC(ironbark_tree_open(r, "t", 0, &t), IRONBARK_OK);
    CHECK_RC(ironbark_tree_count(r, t, &count), IRONBARK_OK);
    CHECK(count == SALVAGE_BASE + SALVAGE_DAMAGED + 1);
    for (int i = 0; i < SALVAGE_COMMITS; i++) {
        snprintf(key, sizeof key, "k%03d", i);
        CHECK_RC(ironbark_get(r, t, B(key), strlen(key), &v, &vl),
                 i < SALVAGE_DAMAGED ? IRONBARK_OK : IRONBARK_NOTFOUND);
    }
    snprintf(val, sizeof val, "%d", SALVAGE_DAMAGED - 1);
    CHECK_RC(ironbark_get(r, t, B("last"), 4, &v, &vl), IRONBARK_OK);
    CHECK(bytes_eq(v, vl, val));
    ironbark_tree_close(t);
    ironbark_txn_abort(r);
}

/* A redo log whose record of a durable commit is damaged, with intact
 * records after it that prove it was durable: the default open fails with
 * IRONBARK_ECORRUPTED and changes nothing; salvage_damaged_log opens at
 * the commit before it. The log is made by a forked child that dies
 * without closing (docs/file-format.md, "The redo log", for the layout). */
static void test_salvage_damaged_log(const char *dir) {
    char path[4096], log_path[4200];
    snprintf(path, sizeof path, "%s", db_path(dir, "salvage.ib"));
    snprintf(log_path, sizeof log_path, "%s-log", path);

    pid_t child = fork();
    CHECK(child >= 0);
    if (child < 0) return;
    if (child == 0) salvage_child(path);
    int status = 0;
    CHECK(waitpid(child, &status, 0) == child);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);

    FILE *f = fopen(log_path, "rb");
    CHECK(f != NULL);
    if (f == NULL) return;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    rewind(f);
    uint8_t *log = size > 0 ? malloc((size_t)size) : NULL;
    CHECK(log != NULL && fread(log, 1, (size_t)size, f) == (size_t)size);
    fclose(f);
    if (log == NULL) return;

    /* The chain from offset 0: each record continues the txn of the one
     * before; the zeros the file grows by end it. */
    size_t starts[4096];
    size_t n = 0, at = 0;
    uint64_t prev_txn = 0;
    while (n < sizeof starts / sizeof starts[0] && at + 32 <= (size_t)size &&
           memcmp(log + at + 8, "IBLG", 4) == 0) {
        uint64_t len = le_bytes(log + at + 12, 4), txn = le_bytes(log + at + 16, 8);
        if (n > 0 && txn != prev_txn + 1) break;
        starts[n++] = at;
        prev_txn = txn;
        at += (32 + len + 7) / 8 * 8;
    }
    /* The last SALVAGE_COMMITS records are the commits after the base load. */
    CHECK(n >= SALVAGE_COMMITS);
    if (n < SALVAGE_COMMITS) {
        free(log);
        return;
    }
    size_t damaged = starts[n - SALVAGE_COMMITS + SALVAGE_DAMAGED];
    /* A payload byte: its checksum fails, the records after it still chain
     * to its stored checksum. */
    log[damaged + 32 + 1] ^= 0x55;
    f = fopen(log_path, "r+b");
    CHECK(f != NULL);
    if (f != NULL) {
        CHECK(fwrite(log, 1, (size_t)size, f) == (size_t)size);
        fclose(f);
    }

    ironbark_options o;
    ironbark_db *db = NULL;
    ironbark_options_init(&o);
    CHECK_RC(ironbark_open(path, &o, &db), IRONBARK_ECORRUPTED);
    CHECK(db == NULL);
    CHECK(strstr(ironbark_last_error(), "salvage_damaged_log") != NULL);
    /* The failed open changed nothing. */
    f = fopen(log_path, "rb");
    CHECK(f != NULL);
    if (f != NULL) {
        uint8_t *again = malloc((size_t)size + 1);
        CHECK(again != NULL && fread(again, 1, (size_t)size + 1, f) == (size_t)size &&
              memcmp(again, log, (size_t)size) == 0);
        free(again);
        fclose(f);
    }
    free(log);

    o.salvage_damaged_log = 1;
    CHECK_RC(ironbark_open(path, &o, &db), IRONBARK_OK);
    if (db != NULL) {
        check_salvaged(db);
        ironbark_close(db);
        db = NULL;
    }
    /* The salvage checkpointed: the database opens without the option. */
    CHECK_RC(ironbark_open(path, NULL, &db), IRONBARK_OK);
    if (db != NULL) {
        check_salvaged(db);
        ironbark_close(db);
    }
}

static void test_null_handles(void) {
    ironbark_txn *txn = NULL;
    ironbark_tree *tree = NULL;
    ironbark_cursor *cur = NULL;
    const uint8_t *v;
    size_t n;
    uint64_t count;
    ironbark_stat st;

    CHECK_RC(ironbark_sync(NULL), IRONBARK_EINVAL);
    CHECK_RC(ironbark_max_key_len(NULL, &n), IRONBARK_EINVAL);
    CHECK_RC(ironbark_stats(NULL, &st), IRONBARK_EINVAL);
    CHECK_RC(ironbark_txn_begin(NULL, 0, &txn), IRONBARK_EINVAL);
    CHECK(strstr(ironbark_last_error(), "db is null") != NULL);
    CHECK_RC(ironbark_txn_commit(NULL), IRONBARK_EINVAL);
    CHECK_RC(ironbark_tree_open(NULL, "t", 0, &tree), IRONBARK_EINVAL);
    CHECK_RC(ironbark_tree_count(NULL, NULL, &count), IRONBARK_EINVAL);
    CHECK_RC(ironbark_get(NULL, NULL, B("k"), 1, &v, &n), IRONBARK_EINVAL);
    CHECK_RC(ironbark_put(NULL, NULL, B("k"), 1, B("v"), 1), IRONBARK_EINVAL);
    CHECK_RC(ironbark_put_many(NULL, NULL, NULL, NULL, NULL, NULL, 0), IRONBARK_EINVAL);
    CHECK_RC(ironbark_delete(NULL, NULL, B("k"), 1), IRONBARK_EINVAL);
    CHECK_RC(ironbark_cursor_open(NULL, NULL, NULL, 0, NULL, 0, 0, &cur), IRONBARK_EINVAL);
    CHECK_RC(ironbark_cursor_next(NULL, &v, &n, &v, &n), IRONBARK_EINVAL);
    CHECK_RC(ironbark_cursor_seek(NULL, B("k"), 1), IRONBARK_EINVAL);
    uint8_t *owned = NULL, *owned2 = NULL;
    CHECK_RC(ironbark_append(NULL, NULL, B("k"), 1, B("v"), 1), IRONBARK_EINVAL);
    CHECK_RC(ironbark_first(NULL, NULL, &v, &n, &v, &n), IRONBARK_EINVAL);
    CHECK_RC(ironbark_last(NULL, NULL, &v, &n, &v, &n), IRONBARK_EINVAL);
    CHECK_RC(ironbark_get_ge(NULL, NULL, B("k"), 1, &v, &n, &v, &n), IRONBARK_EINVAL);
    CHECK_RC(ironbark_get_gt(NULL, NULL, B("k"), 1, &v, &n, &v, &n), IRONBARK_EINVAL);
    CHECK_RC(ironbark_get_le(NULL, NULL, B("k"), 1, &v, &n, &v, &n), IRONBARK_EINVAL);
    CHECK_RC(ironbark_get_lt(NULL, NULL, B("k"), 1, &v, &n, &v, &n), IRONBARK_EINVAL);
    CHECK_RC(ironbark_contains_key(NULL, NULL, B("k"), 1), IRONBARK_EINVAL);
    CHECK_RC(ironbark_insert(NULL, NULL, B("k"), 1, B("v"), 1, &owned, &n), IRONBARK_EINVAL);
    CHECK_RC(ironbark_pop_first(NULL, NULL, &owned, &n, &owned2, &n), IRONBARK_EINVAL);
    CHECK_RC(ironbark_pop_last(NULL, NULL, &owned, &n, &owned2, &n), IRONBARK_EINVAL);
    CHECK(owned == NULL && owned2 == NULL);
    CHECK_RC(ironbark_clear(NULL, NULL, &count), IRONBARK_EINVAL);
    CHECK_RC(ironbark_delete_range(NULL, NULL, NULL, 0, NULL, 0, 0, &count), IRONBARK_EINVAL);
    CHECK_RC(ironbark_put_reserve(NULL, NULL, B("k"), 1, 4, &owned), IRONBARK_EINVAL);
    CHECK(owned == NULL);
    CHECK_RC(ironbark_cursor_open_prefix(NULL, NULL, B("k"), 1, 0, &cur), IRONBARK_EINVAL);
    CHECK(cur == NULL);
    ironbark_savepoint *sp = NULL;
    uint64_t ik = 0;
    CHECK_RC(ironbark_savepoint_take(NULL, &sp), IRONBARK_EINVAL);
    CHECK(sp == NULL);
    CHECK_RC(ironbark_savepoint_rollback(NULL, NULL), IRONBARK_EINVAL);
    CHECK_RC(ironbark_savepoint_release(NULL, NULL), IRONBARK_EINVAL);
    CHECK_RC(ironbark_put_dup(NULL, NULL, B("k"), 1, B("v"), 1), IRONBARK_EINVAL);
    CHECK_RC(ironbark_delete_dup(NULL, NULL, B("k"), 1, B("v"), 1), IRONBARK_EINVAL);
    CHECK_RC(ironbark_delete_dups(NULL, NULL, B("k"), 1, &count), IRONBARK_EINVAL);
    CHECK_RC(ironbark_count_dups(NULL, NULL, B("k"), 1, &count), IRONBARK_EINVAL);
    CHECK_RC(ironbark_contains_dup(NULL, NULL, B("k"), 1, B("v"), 1), IRONBARK_EINVAL);
    CHECK_RC(ironbark_cursor_open_dups(NULL, NULL, B("k"), 1, 0, &cur), IRONBARK_EINVAL);
    CHECK_RC(ironbark_put_int(NULL, NULL, 1, B("v"), 1), IRONBARK_EINVAL);
    CHECK_RC(ironbark_get_int(NULL, NULL, 1, &v, &n), IRONBARK_EINVAL);
    CHECK_RC(ironbark_delete_int(NULL, NULL, 1), IRONBARK_EINVAL);
    CHECK_RC(ironbark_cursor_open_int(NULL, NULL, NULL, NULL, 0, &cur), IRONBARK_EINVAL);
    CHECK_RC(ironbark_cursor_next_int(NULL, &ik, &v, &n), IRONBARK_EINVAL);
    CHECK(cur == NULL);
    ironbark_savepoint_close(NULL);
    /* Closing null is a no-op. */
    ironbark_free(NULL);
    ironbark_close(NULL);
    ironbark_txn_abort(NULL);
    ironbark_tree_close(NULL);
    ironbark_cursor_close(NULL);
    passed++;
}

/* Counts the entries a cursor yields, checking they are strictly ordered. */
static int drain(ironbark_cursor *cur, int reverse, char *first, char *last) {
    const uint8_t *k, *v;
    size_t kl, vl;
    int n = 0, rc;
    char prev[64] = "";
    while ((rc = ironbark_cursor_next(cur, &k, &kl, &v, &vl)) == IRONBARK_OK) {
        char key[64];
        snprintf(key, sizeof key, "%.*s", (int)kl, (const char *)k);
        if (n > 0) CHECK(reverse ? strcmp(key, prev) < 0 : strcmp(key, prev) > 0);
        if (n == 0 && first) strcpy(first, key);
        strcpy(prev, key);
        n++;
    }
    CHECK_RC(rc, IRONBARK_NOTFOUND);
    if (last) strcpy(last, prev);
    return n;
}

static void test_main_flow(const char *dir) {
    ironbark_db *db = NULL;
    ironbark_txn *w = NULL, *r = NULL, *other = NULL;
    ironbark_tree *users = NULL, *missing = NULL;
    const uint8_t *v, *k;
    size_t vl, kl, maxkey = 0;
    uint64_t count = 0;
    char key[32], val[32], first[64], last[64];

    CHECK_RC(ironbark_open(db_path(dir, "main.ib"), NULL, &db), IRONBARK_OK);
    CHECK(db != NULL);
    CHECK_RC(ironbark_max_key_len(db, &maxkey), IRONBARK_OK);
    CHECK(maxkey == 1317);
    CHECK_RC(ironbark_max_key_len(db, NULL), IRONBARK_EINVAL);

    CHECK_RC(ironbark_txn_begin(db, 0, NULL), IRONBARK_EINVAL);
    CHECK_RC(ironbark_txn_begin(db, 0x80, &w), IRONBARK_EINVAL);
    CHECK(strstr(ironbark_last_error(), "unknown txn flags") != NULL);
    CHECK_RC(ironbark_txn_begin(db, IRONBARK_TXN_WRITE, &w), IRONBARK_OK);

    /* Only one writer: a second one fails at once with NOWAIT. */
    CHECK_RC(ironbark_txn_begin(db, IRONBARK_TXN_NOWAIT, &other), IRONBARK_EBUSY);
    CHECK(other == NULL);

    /* Trees. */
    CHECK_RC(ironbark_tree_open(w, "users", 0, &users), IRONBARK_ENOTREE);
    CHECK(strstr(ironbark_last_error(), "no tree named \"users\"") != NULL);
    CHECK_RC(ironbark_tree_open(w, "", IRONBARK_TREE_CREATE, &users), IRONBARK_ETREENAME);
    CHECK_RC(ironbark_tree_open(w, NULL, IRONBARK_TREE_CREATE, &users), IRONBARK_EINVAL);
    CHECK_RC(ironbark_tree_open(w, "\xc3\x28", IRONBARK_TREE_CREATE, &users), IRONBARK_EINVAL);
    CHECK_RC(ironbark_tree_open(w, "users", 0x10, &users), IRONBARK_EINVAL);
    CHECK_RC(ironbark_tree_open(w, "users", IRONBARK_TREE_CREATE, NULL), IRONBARK_EINVAL);
    CHECK_RC(ironbark_tree_open(w, "users", IRONBARK_TREE_CREATE, &users), IRONBARK_OK);

    /* Puts, including the error paths. */
    for (int i = 0; i < 100; i++) {
        snprintf(key, sizeof key, "key%03d", i);
        snprintf(val, sizeof val, "value-%d", i);
        CHECK_RC(ironbark_put(w, users, B(key), strlen(key), B(val), strlen(val)), IRONBARK_OK);
    }
    uint8_t *big = calloc(maxkey + 1, 1);
    CHECK_RC(ironbark_put(w, users, big, maxkey + 1, B("v"), 1), IRONBARK_EKEYSIZE);
    CHECK(strstr(ironbark_last_error(), "larger than the limit of 1317") != NULL);
    free(big);
    CHECK_RC(ironbark_put(w, users, NULL, 3, B("v"), 1), IRONBARK_EINVAL);
    CHECK_RC(ironbark_put(w, users, B("k"), 1, NULL, 3), IRONBARK_EINVAL);
    CHECK_RC(ironbark_put(w, NULL, B("k"), 1, B("v"), 1), IRONBARK_EINVAL);
    /* An empty value (null pointer, length 0) is a value. */
    CHECK_RC(ironbark_put(w, users, B("empty"), 5, NULL, 0), IRONBARK_OK);
    CHECK_RC(ironbark_get(w, users, B("empty"), 5, &v, &vl), IRONBARK_OK);
    CHECK(vl == 0);
    CHECK_RC(ironbark_delete(w, users, B("empty"), 5), IRONBARK_OK);

    /* The write transaction sees its own changes. */
    CHECK_RC(ironbark_get(w, users, B("key042"), 6, &v, &vl), IRONBARK_OK);
    CHECK(bytes_eq(v, vl, "value-42"));
    CHECK_RC(ironbark_get(w, users, B("key042"), 6, NULL, &vl), IRONBARK_EINVAL);
    CHECK_RC(ironbark_delete(w, users, B("key099"), 6), IRONBARK_OK);
    CHECK_RC(ironbark_delete(w, users, B("key099"), 6), IRONBARK_NOTFOUND);
    CHECK_RC(ironbark_get(w, users, B("key099"), 6, &v, &vl), IRONBARK_NOTFOUND);
    CHECK_RC(ironbark_tree_count(w, users, &count), IRONBARK_OK);
    CHECK(count == 99);
    CHECK_RC(ironbark_tree_count(w, users, NULL), IRONBARK_EINVAL);

    /* A write cursor survives changes made between its steps. */
    ironbark_cursor *wc = NULL;
    CHECK_RC(ironbark_cursor_open(w, users, B("key090"), 6, NULL, 0, 0, &wc), IRONBARK_OK);
    int seen = 0;
    while (ironbark_cursor_next(wc, &k, &kl, &v, &vl) == IRONBARK_OK) {
        char kb[16];
        snprintf(kb, sizeof kb, "%.*s", (int)kl, (const char *)k);
        CHECK_RC(ironbark_delete(w, users, B(kb), kl), IRONBARK_OK);
        seen++;
    }
    CHECK(seen == 9); /* key090..key098 */
    ironbark_cursor_close(wc);

    /* A reverse write cursor with both bounds, and seek. */
    CHECK_RC(ironbark_cursor_open(w, users, B("key010"), 6, B("key020"), 6,
                                  IRONBARK_CURSOR_REVERSE, &wc),
             IRONBARK_OK);
    CHECK(drain(wc, 1, first, last) == 10);
    CHECK(strcmp(first, "key019") == 0 && strcmp(last, "key010") == 0);
    CHECK_RC(ironbark_cursor_seek(wc, B("key0155"), 7), IRONBARK_OK);
    CHECK_RC(ironbark_cursor_next(wc, &k, &kl, &v, &vl), IRONBARK_OK);
    CHECK(bytes_eq(k, kl, "key015") && bytes_eq(v, vl, "value-15"));
    ironbark_cursor_close(wc);
    CHECK_RC(ironbark_cursor_open(w, users, NULL, 0, NULL, 0, 0, &wc), IRONBARK_OK);
    CHECK_RC(ironbark_tree_count(w, users, &count), IRONBARK_OK);
    CHECK(count == 90);
    CHECK_RC(ironbark_txn_commit(w), IRONBARK_OK);
    /* The write cursor outlived its transaction: it says so. */
    CHECK_RC(ironbark_cursor_next(wc, &k, &kl, &v, &vl), IRONBARK_ETXNENDED);
    CHECK_RC(ironbark_cursor_seek(wc, B("key000"), 6), IRONBARK_ETXNENDED);
    ironbark_cursor_close(wc);

    /* An aborted transaction leaves nothing behind. */
    CHECK_RC(ironbark_txn_begin(db, IRONBARK_TXN_NOWAIT, &w), IRONBARK_OK);
    CHECK_RC(ironbark_put(w, users, B("ghost"), 5, B("boo"), 3), IRONBARK_OK);
    ironbark_txn_abort(w);

    /* A read snapshot. */
    CHECK_RC(ironbark_txn_begin(db, IRONBARK_TXN_READ_ONLY, &r), IRONBARK_OK);
    CHECK_RC(ironbark_get(r, users, B("ghost"), 5, &v, &vl), IRONBARK_NOTFOUND);
    CHECK_RC(ironbark_get(r, users, B("key007"), 6, &v, &vl), IRONBARK_OK);
    const uint8_t *kept = v;
    size_t kept_len = vl;
    CHECK(bytes_eq(v, vl, "value-7"));
    CHECK_RC(ironbark_put(r, users, B("k"), 1, B("v"), 1), IRONBARK_EREADONLY);
    CHECK(strstr(ironbark_last_error(), "put in a read transaction") != NULL);
    CHECK_RC(ironbark_delete(r, users, B("key007"), 6), IRONBARK_EREADONLY);
    CHECK_RC(ironbark_tree_count(r, users, &count), IRONBARK_OK);
    CHECK(count == 90);
    CHECK_RC(ironbark_tree_open(r, "nope", IRONBARK_TREE_CREATE, &missing), IRONBARK_ENOTREE);
    CHECK(missing == NULL);

    /* A commit meanwhile does not change the snapshot, nor move the value. */
    CHECK_RC(ironbark_txn_begin(db, 0, &w), IRONBARK_OK);
    CHECK_RC(ironbark_put(w, users, B("key007"), 6, B("changed"), 7), IRONBARK_OK);
    CHECK_RC(ironbark_txn_commit(w), IRONBARK_OK);
    CHECK_RC(ironbark_get(r, users, B("key007"), 6, &v, &vl), IRONBARK_OK);
    CHECK(bytes_eq(v, vl, "value-7"));
    CHECK(bytes_eq(kept, kept_len, "value-7"));

    /* Cursors: whole tree both ways, bounds, inclusive end, seek. */
    ironbark_cursor *c = NULL;
    CHECK_RC(ironbark_cursor_open(r, users, NULL, 0, NULL, 0, 0, &c), IRONBARK_OK);
    CHECK(drain(c, 0, first, last) == 90);
    CHECK(strcmp(first, "key000") == 0 && strcmp(last, "key089") == 0);
    /* At the end it stays at the end. */
    CHECK_RC(ironbark_cursor_next(c, &k, &kl, &v, &vl), IRONBARK_NOTFOUND);
    ironbark_cursor_close(c);

    CHECK_RC(ironbark_cursor_open(r, users, NULL, 0, NULL, 0, IRONBARK_CURSOR_REVERSE, &c),
             IRONBARK_OK);
    CHECK(drain(c, 1, first, last) == 90);
    CHECK(strcmp(first, "key089") == 0 && strcmp(last, "key000") == 0);
    ironbark_cursor_close(c);

    CHECK_RC(ironbark_cursor_open(r, users, B("key010"), 6, B("key020"), 6, 0, &c), IRONBARK_OK);
    CHECK(drain(c, 0, first, last) == 10);
    CHECK(strcmp(first, "key010") == 0 && strcmp(last, "key019") == 0);
    ironbark_cursor_close(c);

    CHECK_RC(ironbark_cursor_open(r, users, B("key010"), 6, B("key020"), 6,
                                  IRONBARK_CURSOR_END_INCLUSIVE | IRONBARK_CURSOR_REVERSE, &c),
             IRONBARK_OK);
    CHECK(drain(c, 1, first, last) == 11);
    CHECK(strcmp(first, "key020") == 0 && strcmp(last, "key010") == 0);
    ironbark_cursor_close(c);

    CHECK_RC(ironbark_cursor_open(r, users, NULL, 0, NULL, 0, 0, &c), IRONBARK_OK);
    CHECK_RC(ironbark_cursor_seek(c, B("key0505"), 7), IRONBARK_OK);
    CHECK_RC(ironbark_cursor_next(c, &k, &kl, &v, &vl), IRONBARK_OK);
    CHECK(bytes_eq(k, kl, "key051") && bytes_eq(v, vl, "value-51"));
    CHECK_RC(ironbark_cursor_next(c, &k, &kl, &v, &vl), IRONBARK_OK);
    CHECK(bytes_eq(k, kl, "key052"));
    CHECK_RC(ironbark_cursor_seek(c, B("key050"), 6), IRONBARK_OK);
    CHECK_RC(ironbark_cursor_next(c, &k, &kl, &v, &vl), IRONBARK_OK);
    CHECK(bytes_eq(k, kl, "key050"));
    CHECK_RC(ironbark_cursor_seek(c, B("zzz"), 3), IRONBARK_OK);
    CHECK_RC(ironbark_cursor_next(c, &k, &kl, &v, &vl), IRONBARK_NOTFOUND);
    CHECK_RC(ironbark_cursor_seek(c, NULL, 2), IRONBARK_EINVAL);
    CHECK_RC(ironbark_cursor_next(c, NULL, &kl, &v, &vl), IRONBARK_EINVAL);
    ironbark_cursor_close(c);

    /* Seek in reverse: the last key <= the target, within the bounds. */
    CHECK_RC(ironbark_cursor_open(r, users, B("key040"), 6, NULL, 0, IRONBARK_CURSOR_REVERSE, &c),
             IRONBARK_OK);
    CHECK_RC(ironbark_cursor_seek(c, B("key0505"), 7), IRONBARK_OK);
    CHECK_RC(ironbark_cursor_next(c, &k, &kl, &v, &vl), IRONBARK_OK);
    CHECK(bytes_eq(k, kl, "key050"));
    CHECK(drain(c, 1, first, last) == 10);
    CHECK(strcmp(first, "key049") == 0 && strcmp(last, "key040") == 0);
    ironbark_cursor_close(c);

    CHECK_RC(ironbark_cursor_open(r, users, NULL, 0, NULL, 0, 0x40, &c), IRONBARK_EINVAL);
    CHECK_RC(ironbark_cursor_open(r, users, NULL, 0, NULL, 0, 0, NULL), IRONBARK_EINVAL);
    CHECK_RC(ironbark_cursor_open(r, NULL, NULL, 0, NULL, 0, 0, &c), IRONBARK_EINVAL);

    /* A read cursor keeps its snapshot after the transaction ends. */
    CHECK_RC(ironbark_cursor_open(r, users, B("key080"), 6, NULL, 0, 0, &c), IRONBARK_OK);
    CHECK_RC(ironbark_txn_commit(r), IRONBARK_OK);
    CHECK(drain(c, 0, first, last) == 10);
    ironbark_cursor_close(c);

    /* Stats. */
    ironbark_stat st;
    memset(&st, 0, sizeof st);
    CHECK_RC(ironbark_stats(db, NULL), IRONBARK_EINVAL);
    CHECK_RC(ironbark_stats(db, &st), IRONBARK_OK);
    CHECK(st.page_size == 4096 && st.tree_count == 1 && st.entries == 90);
    CHECK(st.last_txn_id >= 2 && st.durable_txn_id == st.last_txn_id);
    CHECK(st.max_readers == 126 && st.live_readers == 0);
    CHECK(st.file_size_bytes >= st.page_count * st.page_size);

    /* A commit without sync, then sync. */
    CHECK_RC(ironbark_txn_begin(db, IRONBARK_TXN_NOSYNC, &w), IRONBARK_OK);
    CHECK_RC(ironbark_put(w, users, B("late"), 4, B("entry"), 5), IRONBARK_OK);
    CHECK_RC(ironbark_txn_commit(w), IRONBARK_OK);
    CHECK_RC(ironbark_stats(db, &st), IRONBARK_OK);
    CHECK(st.durable_txn_id < st.last_txn_id);
    CHECK_RC(ironbark_sync(db), IRONBARK_OK);
    CHECK_RC(ironbark_stats(db, &st), IRONBARK_OK);
    CHECK(st.durable_txn_id == st.last_txn_id && st.entries == 91);

    /* Closing the database while a transaction is open is harmless: the
     * transaction keeps it open. */
    CHECK_RC(ironbark_txn_begin(db, IRONBARK_TXN_READ_ONLY, &r), IRONBARK_OK);
    ironbark_close(db);
    CHECK_RC(ironbark_get(r, users, B("late"), 4, &v, &vl), IRONBARK_OK);
    CHECK(bytes_eq(v, vl, "entry"));
    ironbark_txn_abort(r);
    ironbark_tree_close(users);

    /* Reopen: everything committed is there. */
    CHECK_RC(ironbark_open(db_path(dir, "main.ib"), NULL, &db), IRONBARK_OK);
    CHECK_RC(ironbark_txn_begin(db, IRONBARK_TXN_READ_ONLY, &r), IRONBARK_OK);
    CHECK_RC(ironbark_tree_open(r, "users", 0, &users), IRONBARK_OK);
    CHECK_RC(ironbark_get(r, users, B("key007"), 6, &v, &vl), IRONBARK_OK);
    CHECK(bytes_eq(v, vl, "changed"));
    ironbark_tree_close(users);
    ironbark_txn_abort(r);
    ironbark_close(db);
}

/* The same on every run: a 64-bit linear congruential generator. */
static uint64_t rand_state = 20240611;
static uint64_t next_rand(void) {
    rand_state = rand_state * 6364136223846793005ull + 1442695040888963407ull;
    return rand_state >> 33;
}

/* Whether trees a and b hold the same entries; *count is how many. */
static int same_entries(ironbark_txn *txn, ironbark_tree *a, ironbark_tree *b, uint64_t *count) {
    ironbark_cursor *ca = NULL, *cb = NULL;
    const uint8_t *ka, *va, *kb, *vb;
    size_t ka_len, va_len, kb_len, vb_len;
    int same = 1, ra, rb;
    *count = 0;
    CHECK_RC(ironbark_cursor_open(txn, a, NULL, 0, NULL, 0, 0, &ca), IRONBARK_OK);
    CHECK_RC(ironbark_cursor_open(txn, b, NULL, 0, NULL, 0, 0, &cb), IRONBARK_OK);
    do {
        ra = ironbark_cursor_next(ca, &ka, &ka_len, &va, &va_len);
        rb = ironbark_cursor_next(cb, &kb, &kb_len, &vb, &vb_len);
        if (ra != rb) {
            same = 0;
        } else if (ra == IRONBARK_OK) {
            same &= ka_len == kb_len && va_len == vb_len && memcmp(ka, kb, ka_len) == 0 &&
                    (va_len == 0 || memcmp(va, vb, va_len) == 0);
            (*count)++;
        }
    } while (same && ra == IRONBARK_OK);
    CHECK_RC(ra, IRONBARK_NOTFOUND);
    ironbark_cursor_close(ca);
    ironbark_cursor_close(cb);
    return same;
}

#define MANY 700

static void test_put_many(const char *dir) {
    static char key_buf[MANY][24], val_buf[MANY][24];
    static const uint8_t *keys[MANY], *vals[MANY];
    static size_t key_lens[MANY], val_lens[MANY];
    ironbark_db *db = NULL;
    ironbark_txn *w = NULL, *r = NULL;
    ironbark_tree *one = NULL, *many = NULL, *errs = NULL, *m = NULL;
    size_t maxkey = 0;
    uint64_t count = 0, entries = 0;

    /* Scattered keys of several lengths, some repeated within a run of 16
     * (the later value wins), some empty values (null with length 0). */
    for (int i = 0; i < MANY; i++) {
        if (i > 0 && next_rand() % 6 == 0) {
            int earlier = i - 1 - (int)(next_rand() % (i < 15 ? (uint64_t)i : 15));
            key_lens[i] = key_lens[earlier];
            memcpy(key_buf[i], key_buf[earlier], key_lens[i]);
        } else {
            uint64_t mask = (1ull << (4 * (1 + next_rand() % 12))) - 1;
            key_lens[i] = (size_t)snprintf(key_buf[i], sizeof key_buf[i], "k%llx",
                                           (unsigned long long)(next_rand() & mask));
        }
        keys[i] = B(key_buf[i]);
        if (i % 50 == 7) {
            vals[i] = NULL;
            val_lens[i] = 0;
        } else {
            val_lens[i] = (size_t)snprintf(val_buf[i], sizeof val_buf[i], "v%d", i);
            vals[i] = B(val_buf[i]);
        }
    }

    CHECK_RC(ironbark_open(db_path(dir, "put_many.ib"), NULL, &db), IRONBARK_OK);
    CHECK_RC(ironbark_max_key_len(db, &maxkey), IRONBARK_OK);
    CHECK_RC(ironbark_txn_begin(db, 0, &w), IRONBARK_OK);
    CHECK_RC(ironbark_tree_open(w, "one", IRONBARK_TREE_CREATE, &one), IRONBARK_OK);
    CHECK_RC(ironbark_tree_open(w, "many", IRONBARK_TREE_CREATE, &many), IRONBARK_OK);
    for (int i = 0; i < MANY; i++) {
        CHECK_RC(ironbark_put(w, one, keys[i], key_lens[i], vals[i], val_lens[i]), IRONBARK_OK);
    }
    /* Calls of several sizes, around the batches of 16. */
    size_t sizes[] = {0, 1, 15, 16, 17, 33, 100, MANY - 182};
    size_t at = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        CHECK_RC(ironbark_put_many(w, many, keys + at, key_lens + at, vals + at, val_lens + at,
                                   sizes[i]),
                 IRONBARK_OK);
        at += sizes[i];
    }
    CHECK(at == MANY);
    CHECK(same_entries(w, one, many, &entries));
    CHECK(entries > 400 && entries < MANY);
    CHECK_RC(ironbark_txn_commit(w), IRONBARK_OK);
    CHECK_RC(ironbark_txn_begin(db, IRONBARK_TXN_READ_ONLY, &r), IRONBARK_OK);
    CHECK(same_entries(r, one, many, &count));
    CHECK(count == entries);
    /* Writes belong to write transactions. */
    CHECK_RC(ironbark_put_many(r, many, keys, key_lens, vals, val_lens, 1), IRONBARK_EREADONLY);
    CHECK(strstr(ironbark_last_error(), "put_many in a read transaction") != NULL);
    ironbark_txn_abort(r);
    ironbark_tree_close(one);
    ironbark_tree_close(many);
    ironbark_close(db);

    /* And after a reopen. */
    CHECK_RC(ironbark_open(db_path(dir, "put_many.ib"), NULL, &db), IRONBARK_OK);
    CHECK_RC(ironbark_txn_begin(db, 0, &w), IRONBARK_OK);
    CHECK_RC(ironbark_tree_open(w, "one", 0, &one), IRONBARK_OK);
    CHECK_RC(ironbark_tree_open(w, "many", 0, &many), IRONBARK_OK);
    CHECK(same_entries(w, one, many, &count));
    CHECK(count == entries);

    /* Null arrays are the empty batch with count 0 only; a bad argument
     * stores nothing, even after good pairs. */
    CHECK_RC(ironbark_tree_open(w, "errs", IRONBARK_TREE_CREATE, &errs), IRONBARK_OK);
    CHECK_RC(ironbark_put_many(w, errs, NULL, NULL, NULL, NULL, 0), IRONBARK_OK);
    CHECK_RC(ironbark_put_many(w, errs, NULL, key_lens, vals, val_lens, 3), IRONBARK_EINVAL);
    CHECK(strstr(ironbark_last_error(), "keys is null with count 3") != NULL);
    CHECK_RC(ironbark_put_many(w, errs, keys, NULL, vals, val_lens, 3), IRONBARK_EINVAL);
    CHECK_RC(ironbark_put_many(w, errs, keys, key_lens, NULL, val_lens, 3), IRONBARK_EINVAL);
    CHECK_RC(ironbark_put_many(w, errs, keys, key_lens, vals, NULL, 3), IRONBARK_EINVAL);
    CHECK_RC(ironbark_put_many(w, errs, keys, key_lens, vals, val_lens, SIZE_MAX),
             IRONBARK_EINVAL);
    CHECK(strstr(ironbark_last_error(), "too large") != NULL);
    CHECK_RC(ironbark_put_many(w, NULL, keys, key_lens, vals, val_lens, 3), IRONBARK_EINVAL);
    const uint8_t *saved = keys[5];
    keys[5] = NULL;
    CHECK_RC(ironbark_put_many(w, errs, keys, key_lens, vals, val_lens, 10), IRONBARK_EINVAL);
    CHECK(strstr(ironbark_last_error(), "key is null with length") != NULL);
    CHECK(strstr(ironbark_last_error(), "(pair 5)") != NULL);
    keys[5] = saved;
    saved = vals[9];
    vals[9] = NULL;
    CHECK_RC(ironbark_put_many(w, errs, keys, key_lens, vals, val_lens, 10), IRONBARK_EINVAL);
    CHECK(strstr(ironbark_last_error(), "(pair 9)") != NULL);
    vals[9] = saved;
    CHECK_RC(ironbark_tree_count(w, errs, &count), IRONBARK_OK);
    CHECK(count == 0);

    /* A pair the engine refuses ends the call: the pairs before it are
     * stored, those after it are not, and the transaction goes on. */
    static const uint8_t *err_keys[40], *err_vals[40];
    static size_t err_key_lens[40], err_val_lens[40];
    static char err_buf[40][8];
    uint8_t *big = calloc(maxkey + 1, 1);
    for (int i = 0; i < 40; i++) {
        err_key_lens[i] = (size_t)snprintf(err_buf[i], sizeof err_buf[i], "e%02d", i);
        err_keys[i] = B(err_buf[i]);
        err_vals[i] = B("x");
        err_val_lens[i] = 1;
    }
    err_keys[20] = big;
    err_key_lens[20] = maxkey + 1;
    CHECK_RC(ironbark_put_many(w, errs, err_keys, err_key_lens, err_vals, err_val_lens, 40),
             IRONBARK_EKEYSIZE);
    CHECK(strstr(ironbark_last_error(), "larger than the limit of 1317") != NULL);
    free(big);
    CHECK_RC(ironbark_tree_count(w, errs, &count), IRONBARK_OK);
    CHECK(count == 20);
    CHECK_RC(ironbark_contains_key(w, errs, B("e19"), 3), IRONBARK_OK);
    CHECK_RC(ironbark_contains_key(w, errs, B("e21"), 3), IRONBARK_NOTFOUND);
    CHECK_RC(ironbark_put_many(w, errs, err_keys + 21, err_key_lens + 21, err_vals + 21,
                               err_val_lens + 21, 19),
             IRONBARK_OK);

    /* Plain trees only. */
    CHECK_RC(ironbark_tree_open(w, "m", IRONBARK_TREE_CREATE | IRONBARK_TREE_MULTIMAP, &m),
             IRONBARK_OK);
    CHECK_RC(ironbark_put_many(w, m, keys, key_lens, vals, val_lens, 1), IRONBARK_EWRONGKIND);
    CHECK_RC(ironbark_txn_commit(w), IRONBARK_OK);

    CHECK_RC(ironbark_txn_begin(db, IRONBARK_TXN_READ_ONLY, &r), IRONBARK_OK);
    CHECK_RC(ironbark_tree_count(r, errs, &count), IRONBARK_OK);
    CHECK(count == 39);
    CHECK_RC(ironbark_tree_count(r, m, &count), IRONBARK_OK);
    CHECK(count == 0);
    ironbark_txn_abort(r);
    ironbark_tree_close(m);
    ironbark_tree_close(errs);
    ironbark_tree_close(one);
    ironbark_tree_close(many);
    ironbark_close(db);
}

static void test_read_only_and_readers(const char *dir) {
    ironbark_options o;
    ironbark_db *db = NULL;
    ironbark_txn *t = NULL, *t2 = NULL;

    /* Create, then reopen read-only. */
    CHECK_RC(ironbark_open(db_path(dir, "ro.ib"), NULL, &db), IRONBARK_OK);
    ironbark_close(db);
    ironbark_options_init(&o);
    o.read_only = 1;
    CHECK_RC(ironbark_open(db_path(dir, "ro.ib"), &o, &db), IRONBARK_OK);
    CHECK_RC(ironbark_txn_begin(db, 0, &t), IRONBARK_EREADONLY);
    CHECK_RC(ironbark_txn_begin(db, IRONBARK_TXN_READ_ONLY, &t), IRONBARK_OK);
    ironbark_txn_abort(t);
    ironbark_close(db);

    /* One reader slot: a second snapshot is refused. */
    ironbark_options_init(&o);
    o.max_readers = 1;
    o.durability = IRONBARK_DURABILITY_NONE;
    o.page_size = 8192;
    CHECK_RC(ironbark_open(db_path(dir, "readers.ib"), &o, &db), IRONBARK_OK);
    CHECK_RC(ironbark_txn_begin(db, IRONBARK_TXN_READ_ONLY, &t), IRONBARK_OK);
    CHECK_RC(ironbark_txn_begin(db, IRONBARK_TXN_READ_ONLY, &t2), IRONBARK_EREADERSFULL);
    CHECK(t2 == NULL);
    ironbark_txn_abort(t);
    ironbark_stat st;
    CHECK_RC(ironbark_stats(db, &st), IRONBARK_OK);
    CHECK(st.page_size == 8192 && st.max_readers == 1 && st.tree_count == 0);
    ironbark_close(db);
}

/* Misuse the engine detects gets its own code, not IRONBARK_EUNKNOWN: a
 * blocking second write transaction (or a sync) on the thread that holds
 * the write transaction, and a tree handle used with another database. */
static void test_thread_and_handle_misuse(const char *dir) {
    ironbark_db *a = NULL, *b = NULL;
    ironbark_txn *w = NULL, *w2 = NULL, *r = NULL;
    ironbark_tree *t = NULL;
    const uint8_t *v;
    size_t vl;

    CHECK_RC(ironbark_open(db_path(dir, "misuse-a.ib"), NULL, &a), IRONBARK_OK);
    CHECK_RC(ironbark_open(db_path(dir, "misuse-b.ib"), NULL, &b), IRONBARK_OK);

    CHECK_RC(ironbark_txn_begin(a, IRONBARK_TXN_WRITE, &w), IRONBARK_OK);
    /* Waiting for the lock this thread holds would never end. */
    CHECK_RC(ironbark_txn_begin(a, IRONBARK_TXN_WRITE, &w2), IRONBARK_EWRITETXNTHREAD);
    CHECK(w2 == NULL);
    CHECK(strstr(ironbark_last_error(), "already holds the write transaction") != NULL);
    CHECK_RC(ironbark_sync(a), IRONBARK_EWRITETXNTHREAD);
    /* Without waiting it is still plain EBUSY. */
    CHECK_RC(ironbark_txn_begin(a, IRONBARK_TXN_NOWAIT, &w2), IRONBARK_EBUSY);
    CHECK_RC(ironbark_tree_open(w, "t", IRONBARK_TREE_CREATE, &t), IRONBARK_OK);
    CHECK_RC(ironbark_put(w, t, B("k"), 1, B("v"), 1), IRONBARK_OK);
    CHECK_RC(ironbark_txn_commit(w), IRONBARK_OK);
    /* Once the writer is gone, both work again. */
    CHECK_RC(ironbark_sync(a), IRONBARK_OK);

    /* A handle of database a, used in a transaction of database b (which
     * has a tree of the same name). */
    ironbark_tree *tb = NULL;
    CHECK_RC(ironbark_txn_begin(b, IRONBARK_TXN_WRITE, &w), IRONBARK_OK);
    CHECK_RC(ironbark_tree_open(w, "t", IRONBARK_TREE_CREATE, &tb), IRONBARK_OK);
    CHECK_RC(ironbark_put(w, t, B("k"), 1, B("x"), 1), IRONBARK_EFOREIGNTREE);
    CHECK(strstr(ironbark_last_error(), "belongs to another database") != NULL);
    CHECK_RC(ironbark_put(w, tb, B("k"), 1, B("x"), 1), IRONBARK_OK);
    CHECK_RC(ironbark_txn_commit(w), IRONBARK_OK);
    CHECK_RC(ironbark_txn_begin(b, IRONBARK_TXN_READ_ONLY, &r), IRONBARK_OK);
    CHECK_RC(ironbark_get(r, t, B("k"), 1, &v, &vl), IRONBARK_EFOREIGNTREE);
    CHECK_RC(ironbark_get(r, tb, B("k"), 1, &v, &vl), IRONBARK_OK);
    CHECK(bytes_eq(v, vl, "x"));
    ironbark_txn_abort(r);

    CHECK(strcmp(ironbark_strerror(IRONBARK_EFOREIGNTREE),
                 "the tree handle belongs to another database") == 0);
    ironbark_tree_close(tb);
    ironbark_tree_close(t);
    ironbark_close(b);
    ironbark_close(a);
}

/* The calls beyond get/put/delete: append, first/last, the nearest-key
 * lookups, contains_key, insert, pop_first/pop_last, clear, delete_range,
 * put_reserve and the prefix cursor, with their error paths, in both kinds
 * of transaction. */
static void test_more_calls(const char *dir) {
    ironbark_db *db = NULL;
    ironbark_txn *w = NULL, *r = NULL;
    ironbark_tree *t = NULL, *empty = NULL;
    ironbark_cursor *c = NULL;
    const uint8_t *k, *v;
    size_t kl, vl;
    uint8_t *ok_key = NULL, *ok_val = NULL, *space = NULL;
    size_t okl = 99, ovl = 99;
    uint64_t count = 0;
    char key[32], first[64], last[64];

    CHECK_RC(ironbark_open(db_path(dir, "more.ib"), NULL, &db), IRONBARK_OK);
    CHECK_RC(ironbark_txn_begin(db, IRONBARK_TXN_WRITE, &w), IRONBARK_OK);
    CHECK_RC(ironbark_tree_open(w, "t", IRONBARK_TREE_CREATE, &t), IRONBARK_OK);
    CHECK_RC(ironbark_tree_open(w, "empty", IRONBARK_TREE_CREATE, &empty), IRONBARK_OK);

    /* append: keys b00, b02, ..., b98 in order; an out-of-order key is
     * refused, changing nothing, and the transaction goes on. */
    for (int i = 0; i < 100; i += 2) {
        snprintf(key, sizeof key, "b%02d", i);
        CHECK_RC(ironbark_append(w, t, B(key), strlen(key), B(key), strlen(key)), IRONBARK_OK);
    }
    CHECK_RC(ironbark_append(w, t, B("b50"), 3, B("x"), 1), IRONBARK_EKEYORDER);
    CHECK(strstr(ironbark_last_error(), "key out of order") != NULL);
    CHECK_RC(ironbark_append(w, t, B("b98"), 3, B("x"), 1), IRONBARK_EKEYORDER);
    CHECK_RC(ironbark_append(w, t, NULL, 2, B("x"), 1), IRONBARK_EINVAL);
    CHECK_RC(ironbark_append(w, NULL, B("c"), 1, B("x"), 1), IRONBARK_EINVAL);
    CHECK_RC(ironbark_get(w, t, B("b50"), 3, &v, &vl), IRONBARK_OK);
    CHECK(bytes_eq(v, vl, "b50"));
    CHECK_RC(ironbark_tree_count(w, t, &count), IRONBARK_OK);
    CHECK(count == 50);

    /* first/last, in the write transaction. */
    CHECK_RC(ironbark_first(w, t, &k, &kl, &v, &vl), IRONBARK_OK);
    CHECK(bytes_eq(k, kl, "b00") && bytes_eq(v, vl, "b00"));
    CHECK_RC(ironbark_last(w, t, &k, &kl, &v, &vl), IRONBARK_OK);
    CHECK(bytes_eq(k, kl, "b98"));
    CHECK_RC(ironbark_first(w, empty, &k, &kl, &v, &vl), IRONBARK_NOTFOUND);
    CHECK_RC(ironbark_last(w, empty, &k, &kl, &v, &vl), IRONBARK_NOTFOUND);
    CHECK_RC(ironbark_first(w, t, NULL, &kl, &v, &vl), IRONBARK_EINVAL);
    CHECK_RC(ironbark_last(w, t, &k, &kl, &v, NULL), IRONBARK_EINVAL);

    /* Nearest-key lookups around present and absent keys. */
    CHECK_RC(ironbark_get_ge(w, t, B("b50"), 3, &k, &kl, &v, &vl), IRONBARK_OK);
    CHECK(bytes_eq(k, kl, "b50"));
    CHECK_RC(ironbark_get_ge(w, t, B("b51"), 3, &k, &kl, &v, &vl), IRONBARK_OK);
    CHECK(bytes_eq(k, kl, "b52") && bytes_eq(v, vl, "b52"));
    CHECK_RC(ironbark_get_gt(w, t, B("b50"), 3, &k, &kl, &v, &vl), IRONBARK_OK);
    CHECK(bytes_eq(k, kl, "b52"));
    CHECK_RC(ironbark_get_le(w, t, B("b51"), 3, &k, &kl, &v, &vl), IRONBARK_OK);
    CHECK(bytes_eq(k, kl, "b50"));
    CHECK_RC(ironbark_get_le(w, t, B("b50"), 3, &k, &kl, &v, &vl), IRONBARK_OK);
    CHECK(bytes_eq(k, kl, "b50"));
    CHECK_RC(ironbark_get_lt(w, t, B("b50"), 3, &k, &kl, &v, &vl), IRONBARK_OK);
    CHECK(bytes_eq(k, kl, "b48"));
    CHECK_RC(ironbark_get_ge(w, t, B("c"), 1, &k, &kl, &v, &vl), IRONBARK_NOTFOUND);
    CHECK_RC(ironbark_get_gt(w, t, B("b98"), 3, &k, &kl, &v, &vl), IRONBARK_NOTFOUND);
    CHECK_RC(ironbark_get_lt(w, t, B("b00"), 3, &k, &kl, &v, &vl), IRONBARK_NOTFOUND);
    /* The empty target (null, length 0) is the smallest key. */
    CHECK_RC(ironbark_get_le(w, t, NULL, 0, &k, &kl, &v, &vl), IRONBARK_NOTFOUND);
    CHECK_RC(ironbark_get_ge(w, t, NULL, 0, &k, &kl, &v, &vl), IRONBARK_OK);
    CHECK(bytes_eq(k, kl, "b00"));
    CHECK_RC(ironbark_get_ge(w, t, NULL, 5, &k, &kl, &v, &vl), IRONBARK_EINVAL);
    CHECK_RC(ironbark_get_gt(w, t, B("b"), 1, &k, NULL, &v, &vl), IRONBARK_EINVAL);
    CHECK_RC(ironbark_get_lt(w, NULL, B("b"), 1, &k, &kl, &v, &vl), IRONBARK_EINVAL);

    /* contains_key. */
    CHECK_RC(ironbark_contains_key(w, t, B("b42"), 3), IRONBARK_OK);
    CHECK_RC(ironbark_contains_key(w, t, B("b43"), 3), IRONBARK_NOTFOUND);
    CHECK_RC(ironbark_contains_key(w, t, NULL, 3), IRONBARK_EINVAL);

    /* insert: the replaced value comes back as an owned copy. */
    CHECK_RC(ironbark_insert(w, t, B("b43"), 3, B("new"), 3, &ok_val, &ovl), IRONBARK_NOTFOUND);
    CHECK(ok_val == NULL && ovl == 0);
    CHECK_RC(ironbark_insert(w, t, B("b43"), 3, B("newer"), 5, &ok_val, &ovl), IRONBARK_OK);
    CHECK(ok_val != NULL && bytes_eq(ok_val, ovl, "new"));
    ironbark_free(ok_val);
    /* An empty old value is a value: a non-null copy of length 0. */
    CHECK_RC(ironbark_put(w, t, B("b45"), 3, NULL, 0), IRONBARK_OK);
    CHECK_RC(ironbark_insert(w, t, B("b45"), 3, B("x"), 1, &ok_val, &ovl), IRONBARK_OK);
    CHECK(ok_val != NULL && ovl == 0);
    ironbark_free(ok_val);
    CHECK_RC(ironbark_get(w, t, B("b43"), 3, &v, &vl), IRONBARK_OK);
    CHECK(bytes_eq(v, vl, "newer"));
    CHECK_RC(ironbark_insert(w, t, B("b43"), 3, B("x"), 1, NULL, &ovl), IRONBARK_EINVAL);
    CHECK_RC(ironbark_insert(w, t, B("b43"), 3, B("x"), 1, &ok_val, NULL), IRONBARK_EINVAL);
    CHECK(ok_val == NULL);
    CHECK_RC(ironbark_get(w, t, B("b43"), 3, &v, &vl), IRONBARK_OK);
    CHECK(bytes_eq(v, vl, "newer")); /* the refused calls stored nothing */
    uint8_t *big = calloc(2000, 1);
    CHECK_RC(ironbark_insert(w, t, big, 2000, B("x"), 1, &ok_val, &ovl), IRONBARK_EKEYSIZE);
    free(big);

    /* pop_first/pop_last: owned copies, removed from the tree. */
    CHECK_RC(ironbark_pop_first(w, t, &ok_key, &okl, &ok_val, &ovl), IRONBARK_OK);
    CHECK(bytes_eq(ok_key, okl, "b00") && bytes_eq(ok_val, ovl, "b00"));
    ironbark_free(ok_key);
    ironbark_free(ok_val);
    CHECK_RC(ironbark_pop_last(w, t, &ok_key, &okl, &ok_val, &ovl), IRONBARK_OK);
    CHECK(bytes_eq(ok_key, okl, "b98") && bytes_eq(ok_val, ovl, "b98"));
    ironbark_free(ok_key);
    ironbark_free(ok_val);
    CHECK_RC(ironbark_contains_key(w, t, B("b98"), 3), IRONBARK_NOTFOUND);
    CHECK_RC(ironbark_pop_first(w, empty, &ok_key, &okl, &ok_val, &ovl), IRONBARK_NOTFOUND);
    CHECK(ok_key == NULL && ok_val == NULL);
    CHECK_RC(ironbark_pop_last(w, t, &ok_key, NULL, &ok_val, &ovl), IRONBARK_EINVAL);
    CHECK_RC(ironbark_tree_count(w, t, &count), IRONBARK_OK);
    CHECK(count == 50); /* 50 appended + b43, b45 - b00, b98 */

    /* delete_range: [b10, b20) then [b80, b90] with the inclusive flag,
     * then from b94 to the end. */
    CHECK_RC(ironbark_delete_range(w, t, B("b10"), 3, B("b20"), 3, 0, &count), IRONBARK_OK);
    CHECK(count == 5);
    CHECK_RC(ironbark_delete_range(w, t, B("b80"), 3, B("b90"), 3, IRONBARK_CURSOR_END_INCLUSIVE,
                                   &count),
             IRONBARK_OK);
    CHECK(count == 6);
    CHECK_RC(ironbark_delete_range(w, t, B("b94"), 3, NULL, 0, 0, &count), IRONBARK_OK);
    CHECK(count == 2); /* b94, b96 */
    CHECK_RC(ironbark_delete_range(w, t, B("b20"), 3, B("b10"), 3, 0, &count), IRONBARK_OK);
    CHECK(count == 0); /* an inverted range removes nothing */
    CHECK_RC(ironbark_delete_range(w, t, NULL, 0, NULL, 0, IRONBARK_CURSOR_REVERSE, &count),
             IRONBARK_EINVAL);
    CHECK(strstr(ironbark_last_error(), "unknown delete_range flags") != NULL);
    CHECK_RC(ironbark_delete_range(w, t, NULL, 0, NULL, 0, 0, NULL), IRONBARK_EINVAL);
    CHECK_RC(ironbark_delete_range(w, t, NULL, 4, NULL, 0, 0, &count), IRONBARK_EINVAL);
    CHECK_RC(ironbark_tree_count(w, t, &count), IRONBARK_OK);
    CHECK(count == 37);
    CHECK_RC(ironbark_get_ge(w, t, B("b10"), 3, &k, &kl, &v, &vl), IRONBARK_OK);
    CHECK(bytes_eq(k, kl, "b20"));

    /* put_reserve: the value written in place. */
    CHECK_RC(ironbark_put_reserve(w, t, B("r"), 1, 6, &space), IRONBARK_OK);
    CHECK(space != NULL);
    CHECK(space[0] == 0 && space[5] == 0); /* zeroed */
    memcpy(space, "placed", 6);
    CHECK_RC(ironbark_get(w, t, B("r"), 1, &v, &vl), IRONBARK_OK);
    CHECK(bytes_eq(v, vl, "placed"));
    CHECK_RC(ironbark_put_reserve(w, t, B("r0"), 2, 0, &space), IRONBARK_OK);
    CHECK_RC(ironbark_put_reserve(w, t, B("r"), 1, 6, NULL), IRONBARK_EINVAL);
    CHECK_RC(ironbark_put_reserve(w, t, NULL, 1, 6, &space), IRONBARK_EINVAL);
    CHECK(space == NULL);
    CHECK_RC(ironbark_put_reserve(w, t, B("r"), 1, ((size_t)1 << 30) + 1, &space),
             IRONBARK_EVALSIZE);

    /* Prefix cursors, forwards, backwards, with a seek, an empty prefix
     * (every key) and a prefix of 0xff bytes (to the end). */
    CHECK_RC(ironbark_put(w, t, B("b\xff"), 2, B("ff"), 2), IRONBARK_OK);
    CHECK_RC(ironbark_put(w, t, B("\xff\xff" "a"), 3, B("ff"), 2), IRONBARK_OK);
    CHECK_RC(ironbark_cursor_open_prefix(w, t, B("b2"), 2, 0, &c), IRONBARK_OK);
    CHECK(drain(c, 0, first, last) == 5);
    CHECK(strcmp(first, "b20") == 0 && strcmp(last, "b28") == 0);
    ironbark_cursor_close(c);
    CHECK_RC(ironbark_cursor_open_prefix(w, t, B("b4"), 2, IRONBARK_CURSOR_REVERSE, &c),
             IRONBARK_OK);
    CHECK(drain(c, 1, first, last) == 7); /* b40..b48 with b43, b45 */
    CHECK(strcmp(first, "b48") == 0 && strcmp(last, "b40") == 0);
    ironbark_cursor_close(c);
    CHECK_RC(ironbark_txn_commit(w), IRONBARK_OK);

    /* The read calls in a read transaction; the write calls refused. */
    CHECK_RC(ironbark_txn_begin(db, IRONBARK_TXN_READ_ONLY, &r), IRONBARK_OK);
    CHECK_RC(ironbark_get(r, t, B("r"), 1, &v, &vl), IRONBARK_OK);
    CHECK(bytes_eq(v, vl, "placed")); /* written in place, committed */
    CHECK_RC(ironbark_first(r, t, &k, &kl, &v, &vl), IRONBARK_OK);
    CHECK(bytes_eq(k, kl, "b02"));
    CHECK_RC(ironbark_last(r, t, &k, &kl, &v, &vl), IRONBARK_OK);
    CHECK(kl == 3 && memcmp(k, "\xff\xff" "a", 3) == 0);
    CHECK_RC(ironbark_get_gt(r, t, B("b4"), 2, &k, &kl, &v, &vl), IRONBARK_OK);
    CHECK(bytes_eq(k, kl, "b40"));
    CHECK_RC(ironbark_get_lt(r, t, B("b4"), 2, &k, &kl, &v, &vl), IRONBARK_OK);
    CHECK(bytes_eq(k, kl, "b38"));
    CHECK_RC(ironbark_contains_key(r, t, B("r0"), 2), IRONBARK_OK);
    CHECK_RC(ironbark_get(r, t, B("r0"), 2, &v, &vl), IRONBARK_OK);
    CHECK(vl == 0);
    CHECK_RC(ironbark_append(r, t, B("z"), 1, B("v"), 1), IRONBARK_EREADONLY);
    CHECK(strstr(ironbark_last_error(), "append in a read transaction") != NULL);
    CHECK_RC(ironbark_insert(r, t, B("z"), 1, B("v"), 1, &ok_val, &ovl), IRONBARK_EREADONLY);
    CHECK_RC(ironbark_pop_first(r, t, &ok_key, &okl, &ok_val, &ovl), IRONBARK_EREADONLY);
    CHECK_RC(ironbark_pop_last(r, t, &ok_key, &okl, &ok_val, &ovl), IRONBARK_EREADONLY);
    CHECK_RC(ironbark_clear(r, t, &count), IRONBARK_EREADONLY);
    CHECK_RC(ironbark_delete_range(r, t, NULL, 0, NULL, 0, 0, &count), IRONBARK_EREADONLY);
    CHECK_RC(ironbark_put_reserve(r, t, B("z"), 1, 1, &space), IRONBARK_EREADONLY);
    CHECK_RC(ironbark_cursor_open_prefix(r, t, NULL, 0, 0, &c), IRONBARK_OK);
    CHECK(drain(c, 0, first, last) == 41);
    CHECK(strcmp(first, "b02") == 0);
    ironbark_cursor_close(c);
    CHECK_RC(ironbark_cursor_open_prefix(r, t, B("\xff\xff"), 2, 0, &c), IRONBARK_OK);
    CHECK_RC(ironbark_cursor_next(c, &k, &kl, &v, &vl), IRONBARK_OK);
    CHECK(kl == 3 && memcmp(k, "\xff\xff" "a", 3) == 0);
    CHECK_RC(ironbark_cursor_next(c, &k, &kl, &v, &vl), IRONBARK_NOTFOUND);
    ironbark_cursor_close(c);
    CHECK_RC(ironbark_cursor_open_prefix(r, t, B("b"), 1, 0, &c), IRONBARK_OK);
    CHECK_RC(ironbark_cursor_seek(c, B("b7"), 2), IRONBARK_OK);
    CHECK_RC(ironbark_cursor_next(c, &k, &kl, &v, &vl), IRONBARK_OK);
    CHECK(bytes_eq(k, kl, "b70"));
    CHECK(drain(c, 0, first, last) == 6); /* b72..b78, b92, then b\xff */
    CHECK(strcmp(last, "b\xff") == 0);
    ironbark_cursor_close(c);
    c = (ironbark_cursor *)&count; /* non-null garbage: must be cleared */
    CHECK_RC(ironbark_cursor_open_prefix(r, t, B("b"), 1, IRONBARK_CURSOR_END_INCLUSIVE, &c),
             IRONBARK_EINVAL);
    CHECK(c == NULL);
    CHECK_RC(ironbark_cursor_open_prefix(r, t, NULL, 1, 0, &c), IRONBARK_EINVAL);
    CHECK_RC(ironbark_cursor_open_prefix(r, t, B("b"), 1, 0, NULL), IRONBARK_EINVAL);
    ironbark_txn_abort(r);

    /* clear: every entry goes, the handle stays. */
    CHECK_RC(ironbark_txn_begin(db, IRONBARK_TXN_WRITE, &w), IRONBARK_OK);
    CHECK_RC(ironbark_clear(w, t, NULL), IRONBARK_EINVAL);
    CHECK_RC(ironbark_clear(w, t, &count), IRONBARK_OK);
    CHECK(count == 41);
    CHECK_RC(ironbark_clear(w, t, &count), IRONBARK_OK);
    CHECK(count == 0);
    CHECK_RC(ironbark_first(w, t, &k, &kl, &v, &vl), IRONBARK_NOTFOUND);
    CHECK_RC(ironbark_put(w, t, B("again"), 5, B("ok"), 2), IRONBARK_OK);
    CHECK_RC(ironbark_txn_commit(w), IRONBARK_OK);
    CHECK_RC(ironbark_txn_begin(db, IRONBARK_TXN_READ_ONLY, &r), IRONBARK_OK);
    CHECK_RC(ironbark_tree_count(r, t, &count), IRONBARK_OK);
    CHECK(count == 1);
    ironbark_txn_abort(r);

    ironbark_tree_close(empty);
    ironbark_tree_close(t);
    ironbark_close(db);
}

/* Savepoints: take, roll back (again and again), nest, release; a
 * savepoint rolled back past or released is refused. */
static void test_savepoints(const char *dir) {
    ironbark_db *db = NULL;
    ironbark_txn *w = NULL, *r = NULL;
    ironbark_tree *t = NULL, *later = NULL;
    ironbark_savepoint *outer = NULL, *inner = NULL, *again = NULL;
    const uint8_t *v;
    size_t vl;
    uint64_t count = 0;

    CHECK_RC(ironbark_open(db_path(dir, "savepoints.ib"), NULL, &db), IRONBARK_OK);
    CHECK_RC(ironbark_txn_begin(db, IRONBARK_TXN_WRITE, &w), IRONBARK_OK);
    CHECK_RC(ironbark_tree_open(w, "t", IRONBARK_TREE_CREATE, &t), IRONBARK_OK);
    CHECK_RC(ironbark_put(w, t, B("kept"), 4, B("1"), 1), IRONBARK_OK);
    CHECK_RC(ironbark_savepoint_take(w, NULL), IRONBARK_EINVAL);
    CHECK_RC(ironbark_savepoint_take(w, &outer), IRONBARK_OK);
    CHECK(outer != NULL);
    CHECK_RC(ironbark_put(w, t, B("bob"), 3, B("2"), 1), IRONBARK_OK);
    CHECK_RC(ironbark_tree_open(w, "later", IRONBARK_TREE_CREATE, &later), IRONBARK_OK);
    CHECK_RC(ironbark_savepoint_take(w, &inner), IRONBARK_OK);
    CHECK_RC(ironbark_delete(w, t, B("kept"), 4), IRONBARK_OK);
    CHECK_RC(ironbark_savepoint_rollback(w, inner), IRONBARK_OK);
    CHECK_RC(ironbark_get(w, t, B("kept"), 4, &v, &vl), IRONBARK_OK); /* back */
    CHECK(bytes_eq(v, vl, "1"));
    CHECK_RC(ironbark_tree_count(w, t, &count), IRONBARK_OK);
    CHECK(count == 2);
    /* The same savepoint again: it stays after a rollback. */
    CHECK_RC(ironbark_put(w, t, B("x"), 1, B("3"), 1), IRONBARK_OK);
    CHECK_RC(ironbark_savepoint_rollback(w, inner), IRONBARK_OK);
    CHECK_RC(ironbark_get(w, t, B("x"), 1, &v, &vl), IRONBARK_NOTFOUND);
    /* Back to the outer one: bob and the tree created since go, and the
     * inner savepoint with them. */
    CHECK_RC(ironbark_savepoint_rollback(w, outer), IRONBARK_OK);
    CHECK_RC(ironbark_get(w, t, B("bob"), 3, &v, &vl), IRONBARK_NOTFOUND);
    CHECK_RC(ironbark_tree_count(w, t, &count), IRONBARK_OK);
    CHECK(count == 1);
    CHECK_RC(ironbark_put(w, later, B("k"), 1, B("v"), 1), IRONBARK_ESTALETREE);
    CHECK_RC(ironbark_savepoint_rollback(w, inner), IRONBARK_ESAVEPOINT);
    CHECK(strstr(ironbark_last_error(), "rolled back past") != NULL);
    CHECK_RC(ironbark_get(w, t, B("kept"), 4, &v, &vl), IRONBARK_OK); /* unchanged */
    /* Releasing the discarded one is refused too, and frees its handle. */
    CHECK_RC(ironbark_savepoint_release(w, inner), IRONBARK_ESAVEPOINT);
    inner = NULL;
    CHECK_RC(ironbark_savepoint_rollback(w, NULL), IRONBARK_EINVAL);
    /* Release keeps the changes; the released savepoint is gone. */
    CHECK_RC(ironbark_savepoint_take(w, &again), IRONBARK_OK);
    CHECK_RC(ironbark_put(w, t, B("after"), 5, B("4"), 1), IRONBARK_OK);
    CHECK_RC(ironbark_savepoint_release(w, outer), IRONBARK_OK); /* and `again` with it */
    outer = NULL;
    CHECK_RC(ironbark_savepoint_rollback(w, again), IRONBARK_ESAVEPOINT);
    ironbark_savepoint_close(again);
    CHECK_RC(ironbark_get(w, t, B("after"), 5, &v, &vl), IRONBARK_OK);
    CHECK_RC(ironbark_txn_commit(w), IRONBARK_OK);

    /* A savepoint of an ended transaction is foreign to the next one. */
    CHECK_RC(ironbark_txn_begin(db, IRONBARK_TXN_WRITE, &w), IRONBARK_OK);
    CHECK_RC(ironbark_savepoint_take(w, &outer), IRONBARK_OK);
    ironbark_txn_abort(w);
    CHECK_RC(ironbark_txn_begin(db, IRONBARK_TXN_WRITE, &w), IRONBARK_OK);
    CHECK_RC(ironbark_savepoint_rollback(w, outer), IRONBARK_ESAVEPOINT);
    CHECK(strstr(ironbark_last_error(), "another write transaction") != NULL);
    ironbark_savepoint_close(outer);
    ironbark_txn_abort(w);

    /* Read transactions take none. */
    CHECK_RC(ironbark_txn_begin(db, IRONBARK_TXN_READ_ONLY, &r), IRONBARK_OK);
    outer = (ironbark_savepoint *)&count; /* non-null garbage: must be cleared */
    CHECK_RC(ironbark_savepoint_take(r, &outer), IRONBARK_EREADONLY);
    CHECK(outer == NULL);
    CHECK_RC(ironbark_tree_count(r, t, &count), IRONBARK_OK);
    CHECK(count == 2); /* kept, after */
    ironbark_txn_abort(r);

    ironbark_tree_close(later);
    ironbark_tree_close(t);
    ironbark_close(db);
}

/* Multimaps: pairs, their cursors, counts, and the kind errors. */
static void test_multimaps(const char *dir) {
    ironbark_db *db = NULL;
    ironbark_txn *w = NULL, *r = NULL;
    ironbark_tree *m = NULL, *plain = NULL, *h = NULL;
    ironbark_cursor *c = NULL;
    const uint8_t *k, *v;
    size_t kl, vl, maxkey = 0;
    uint64_t count = 0;
    char val[32];

    CHECK_RC(ironbark_open(db_path(dir, "multimap.ib"), NULL, &db), IRONBARK_OK);
    CHECK_RC(ironbark_max_key_len(db, &maxkey), IRONBARK_OK);
    CHECK_RC(ironbark_txn_begin(db, IRONBARK_TXN_WRITE, &w), IRONBARK_OK);
    CHECK_RC(ironbark_tree_open(w, "tags", IRONBARK_TREE_CREATE | IRONBARK_TREE_MULTIMAP, &m),
             IRONBARK_OK);
    CHECK_RC(ironbark_tree_open(w, "plain", IRONBARK_TREE_CREATE, &plain), IRONBARK_OK);

    CHECK_RC(ironbark_put_dup(w, m, B("post-1"), 6, B("rust"), 4), IRONBARK_OK);
    CHECK_RC(ironbark_put_dup(w, m, B("post-1"), 6, B("db"), 2), IRONBARK_OK);
    CHECK_RC(ironbark_put_dup(w, m, B("post-1"), 6, B("rust"), 4), IRONBARK_KEYEXIST);
    CHECK_RC(ironbark_put_dup(w, m, B("post-2"), 6, B("rust"), 4), IRONBARK_OK);
    /* A key with a zero byte, and an empty value. */
    CHECK_RC(ironbark_put_dup(w, m, B("p\0z"), 3, NULL, 0), IRONBARK_OK);
    for (int i = 0; i < 300; i++) {
        snprintf(val, sizeof val, "v%04d", i);
        CHECK_RC(ironbark_put_dup(w, m, B("many"), 4, B(val), strlen(val)), IRONBARK_OK);
    }
    CHECK_RC(ironbark_tree_count(w, m, &count), IRONBARK_OK);
    CHECK(count == 304);
    CHECK_RC(ironbark_count_dups(w, m, B("post-1"), 6, &count), IRONBARK_OK);
    CHECK(count == 2);
    CHECK_RC(ironbark_count_dups(w, m, B("many"), 4, &count), IRONBARK_OK);
    CHECK(count == 300);
    CHECK_RC(ironbark_count_dups(w, m, B("none"), 4, &count), IRONBARK_OK);
    CHECK(count == 0);
    CHECK_RC(ironbark_count_dups(w, m, B("none"), 4, NULL), IRONBARK_EINVAL);
    CHECK_RC(ironbark_contains_dup(w, m, B("post-1"), 6, B("db"), 2), IRONBARK_OK);
    CHECK_RC(ironbark_contains_dup(w, m, B("post-1"), 6, B("go"), 2), IRONBARK_NOTFOUND);
    CHECK_RC(ironbark_contains_dup(w, m, B("p\0z"), 3, NULL, 0), IRONBARK_OK);
    CHECK_RC(ironbark_delete_dup(w, m, B("post-1"), 6, B("db"), 2), IRONBARK_OK);
    CHECK_RC(ironbark_delete_dup(w, m, B("post-1"), 6, B("db"), 2), IRONBARK_NOTFOUND);

    /* The values of one key, both ways, in a write transaction, which
     * also sees changes made between steps. */
    CHECK_RC(ironbark_cursor_open_dups(w, m, B("many"), 4, 0, &c), IRONBARK_OK);
    int n = 0, ordered = 1;
    while (ironbark_cursor_next(c, &k, &kl, &v, &vl) == IRONBARK_OK) {
        snprintf(val, sizeof val, "v%04d", n);
        if (!bytes_eq(k, kl, "many") || !bytes_eq(v, vl, val)) ordered = 0;
        if (n == 10) CHECK_RC(ironbark_delete_dup(w, m, B("many"), 4, B("v0011"), 5), IRONBARK_OK);
        n++;
        if (n == 11) n++; /* v0011 was deleted */
    }
    CHECK(ordered);
    CHECK(n == 300);
    ironbark_cursor_close(c);
    CHECK_RC(ironbark_cursor_open_dups(w, m, B("many"), 4, IRONBARK_CURSOR_REVERSE, &c),
             IRONBARK_OK);
    CHECK_RC(ironbark_cursor_next(c, &k, &kl, &v, &vl), IRONBARK_OK);
    CHECK(bytes_eq(v, vl, "v0299"));
    ironbark_cursor_close(c);
    CHECK_RC(ironbark_cursor_open_dups(w, m, B("many"), 4, IRONBARK_CURSOR_END_INCLUSIVE, &c),
             IRONBARK_EINVAL);
    CHECK(c == NULL);
    CHECK_RC(ironbark_cursor_open_dups(w, m, B("none"), 4, 0, &c), IRONBARK_OK);
    CHECK_RC(ironbark_cursor_next(c, &k, &kl, &v, &vl), IRONBARK_NOTFOUND);
    ironbark_cursor_close(c);

    /* delete_dups removes every value of a key. */
    CHECK_RC(ironbark_put_dup(w, m, B("gone"), 4, B("a"), 1), IRONBARK_OK);
    CHECK_RC(ironbark_put_dup(w, m, B("gone"), 4, B("b"), 1), IRONBARK_OK);
    CHECK_RC(ironbark_delete_dups(w, m, B("gone"), 4, &count), IRONBARK_OK);
    CHECK(count == 2);
    CHECK_RC(ironbark_delete_dups(w, m, B("gone"), 4, NULL), IRONBARK_EINVAL);

    /* Pair size, kind errors. */
    uint8_t *big = calloc(maxkey, 1);
    CHECK_RC(ironbark_put_dup(w, m, B("k"), 1, big, maxkey), IRONBARK_EPAIRSIZE);
    CHECK(strstr(ironbark_last_error(), "pair") != NULL);
    free(big);
    CHECK_RC(ironbark_put(w, m, B("k"), 1, B("v"), 1), IRONBARK_EWRONGKIND);
    CHECK(strstr(ironbark_last_error(), "is a multimap, not a plain tree") != NULL);
    CHECK_RC(ironbark_get(w, m, B("k"), 1, &v, &vl), IRONBARK_EWRONGKIND);
    CHECK_RC(ironbark_put_dup(w, plain, B("k"), 1, B("v"), 1), IRONBARK_EWRONGKIND);
    CHECK_RC(ironbark_count_dups(w, plain, B("k"), 1, &count), IRONBARK_EWRONGKIND);
    CHECK_RC(ironbark_put_int(w, m, 1, B("v"), 1), IRONBARK_EWRONGKIND);
    h = (ironbark_tree *)&count; /* non-null garbage: must be cleared */
    CHECK_RC(ironbark_tree_open(w, "tags", 0, &h), IRONBARK_EWRONGKIND);
    CHECK(h == NULL);
    CHECK(strstr(ironbark_last_error(), "tags") != NULL);
    CHECK_RC(ironbark_tree_open(w, "tags", IRONBARK_TREE_CREATE, &h), IRONBARK_EWRONGKIND);
    CHECK_RC(ironbark_tree_open(w, "plain", IRONBARK_TREE_CREATE | IRONBARK_TREE_MULTIMAP, &h),
             IRONBARK_EWRONGKIND);
    CHECK_RC(ironbark_tree_open(w, "tags", IRONBARK_TREE_MULTIMAP | IRONBARK_TREE_INTKEY32, &h),
             IRONBARK_EWRONGKIND);
    CHECK_RC(ironbark_tree_open(w, "tags", 0x10, &h), IRONBARK_EINVAL);
    CHECK_RC(ironbark_txn_commit(w), IRONBARK_OK);

    /* A read transaction: the handle of an existing multimap, a cursor
     * over its pairs (keys decoded, zero bytes included), seek. */
    CHECK_RC(ironbark_txn_begin(db, IRONBARK_TXN_READ_ONLY, &r), IRONBARK_OK);
    CHECK_RC(ironbark_tree_open(r, "tags", IRONBARK_TREE_MULTIMAP, &h), IRONBARK_OK);
    CHECK_RC(ironbark_count_dups(r, h, B("many"), 4, &count), IRONBARK_OK);
    CHECK(count == 299);
    CHECK_RC(ironbark_contains_dup(r, h, B("post-2"), 6, B("rust"), 4), IRONBARK_OK);
    CHECK_RC(ironbark_cursor_open(r, h, B("p"), 1, NULL, 0, 0, &c), IRONBARK_OK);
    CHECK_RC(ironbark_cursor_next(c, &k, &kl, &v, &vl), IRONBARK_OK);
    CHECK(kl == 3 && memcmp(k, "p\0z", 3) == 0 && vl == 0);
    CHECK_RC(ironbark_cursor_next(c, &k, &kl, &v, &vl), IRONBARK_OK);
    CHECK(bytes_eq(k, kl, "post-1") && bytes_eq(v, vl, "rust"));
    CHECK_RC(ironbark_cursor_next(c, &k, &kl, &v, &vl), IRONBARK_OK);
    CHECK(bytes_eq(k, kl, "post-2") && bytes_eq(v, vl, "rust"));
    CHECK_RC(ironbark_cursor_next(c, &k, &kl, &v, &vl), IRONBARK_NOTFOUND);
    /* A seek stays within the bounds: "man" is below the start "p". */
    CHECK_RC(ironbark_cursor_seek(c, B("man"), 3), IRONBARK_OK);
    CHECK_RC(ironbark_cursor_next(c, &k, &kl, &v, &vl), IRONBARK_OK);
    CHECK(kl == 3 && memcmp(k, "p\0z", 3) == 0);
    CHECK_RC(ironbark_cursor_seek(c, B("post-"), 5), IRONBARK_OK);
    CHECK_RC(ironbark_cursor_next(c, &k, &kl, &v, &vl), IRONBARK_OK);
    CHECK(bytes_eq(k, kl, "post-1") && bytes_eq(v, vl, "rust"));
    ironbark_cursor_close(c);
    CHECK_RC(ironbark_cursor_open(r, h, NULL, 0, NULL, 0, 0, &c), IRONBARK_OK);
    CHECK_RC(ironbark_cursor_seek(c, B("man"), 3), IRONBARK_OK);
    CHECK_RC(ironbark_cursor_next(c, &k, &kl, &v, &vl), IRONBARK_OK);
    CHECK(bytes_eq(k, kl, "many") && bytes_eq(v, vl, "v0000"));
    ironbark_cursor_close(c);
    CHECK_RC(ironbark_cursor_open(r, h, NULL, 0, B("many"), 4,
                                  IRONBARK_CURSOR_REVERSE | IRONBARK_CURSOR_END_INCLUSIVE, &c),
             IRONBARK_OK);
    CHECK_RC(ironbark_cursor_next(c, &k, &kl, &v, &vl), IRONBARK_OK);
    CHECK(bytes_eq(k, kl, "many") && bytes_eq(v, vl, "v0299"));
    ironbark_cursor_close(c);
    CHECK_RC(ironbark_cursor_open_dups(r, h, B("many"), 4, 0, &c), IRONBARK_OK);
    n = 0;
    while (ironbark_cursor_next(c, &k, &kl, &v, &vl) == IRONBARK_OK) n++;
    CHECK(n == 299);
    ironbark_cursor_close(c);
    CHECK_RC(ironbark_put_dup(r, h, B("k"), 1, B("v"), 1), IRONBARK_EREADONLY);
    CHECK_RC(ironbark_delete_dup(r, h, B("k"), 1, B("v"), 1), IRONBARK_EREADONLY);
    CHECK_RC(ironbark_delete_dups(r, h, B("k"), 1, &count), IRONBARK_EREADONLY);
    ironbark_tree_close(h);
    CHECK_RC(ironbark_tree_open(r, "plain", IRONBARK_TREE_MULTIMAP, &h), IRONBARK_EWRONGKIND);
    CHECK_RC(ironbark_tree_open(r, "nothing", IRONBARK_TREE_MULTIMAP, &h), IRONBARK_ENOTREE);
    ironbark_txn_abort(r);

    ironbark_tree_close(plain);
    ironbark_tree_close(m);
    ironbark_close(db);
}

/* Integer-key trees of both widths, their cursors and the width errors. */
static void test_int_trees(const char *dir) {
    ironbark_db *db = NULL;
    ironbark_txn *w = NULL, *r = NULL;
    ironbark_tree *t32 = NULL, *t64 = NULL, *h = NULL, *im = NULL;
    ironbark_cursor *c = NULL;
    const uint8_t *k, *v;
    size_t kl, vl;
    uint64_t key = 0, count = 0, lo, hi;

    CHECK_RC(ironbark_open(db_path(dir, "ints.ib"), NULL, &db), IRONBARK_OK);
    CHECK_RC(ironbark_txn_begin(db, IRONBARK_TXN_WRITE, &w), IRONBARK_OK);
    CHECK_RC(ironbark_tree_open(w, "ids", IRONBARK_TREE_CREATE | IRONBARK_TREE_INTKEY32, &t32),
             IRONBARK_OK);
    CHECK_RC(ironbark_tree_open(w, "big", IRONBARK_TREE_CREATE | IRONBARK_TREE_INTKEY64, &t64),
             IRONBARK_OK);
    CHECK_RC(ironbark_tree_open(w, "x", IRONBARK_TREE_INTKEY32 | IRONBARK_TREE_INTKEY64, &h),
             IRONBARK_EINVAL);
    /* Numeric order, not byte order of the decimal text. */
    uint64_t keys[] = {65536, 1, 256, 2, 4294967295u};
    for (int i = 0; i < 5; i++)
        CHECK_RC(ironbark_put_int(w, t32, keys[i], B("v"), 1), IRONBARK_OK);
    CHECK_RC(ironbark_put_int(w, t32, 7, B("seven"), 5), IRONBARK_OK);
    CHECK_RC(ironbark_put_int(w, t32, 4294967296u, B("v"), 1), IRONBARK_EINTKEYSIZE);
    CHECK(strstr(ironbark_last_error(), "4294967296") != NULL);
    CHECK_RC(ironbark_put_int(w, t64, UINT64_MAX, B("max"), 3), IRONBARK_OK);
    CHECK_RC(ironbark_get_int(w, t64, UINT64_MAX, &v, &vl), IRONBARK_OK);
    CHECK(bytes_eq(v, vl, "max"));
    CHECK_RC(ironbark_get_int(w, t32, 7, &v, &vl), IRONBARK_OK);
    CHECK(bytes_eq(v, vl, "seven"));
    CHECK_RC(ironbark_get_int(w, t32, 8, &v, &vl), IRONBARK_NOTFOUND);
    CHECK_RC(ironbark_get_int(w, t32, 4294967296u, &v, &vl), IRONBARK_NOTFOUND);
    CHECK_RC(ironbark_get_int(w, t32, 7, NULL, &vl), IRONBARK_EINVAL);
    CHECK_RC(ironbark_delete_int(w, t32, 7), IRONBARK_OK);
    CHECK_RC(ironbark_delete_int(w, t32, 7), IRONBARK_NOTFOUND);
    CHECK_RC(ironbark_tree_count(w, t32, &count), IRONBARK_OK);
    CHECK(count == 5);

    /* A write cursor from 2 to 65536 included. */
    lo = 2;
    hi = 65536;
    CHECK_RC(ironbark_cursor_open_int(w, t32, &lo, &hi, IRONBARK_CURSOR_END_INCLUSIVE, &c),
             IRONBARK_OK);
    uint64_t want[] = {2, 256, 65536};
    int n = 0;
    while (ironbark_cursor_next_int(c, &key, &v, &vl) == IRONBARK_OK) {
        CHECK(n < 3 && key == want[n]);
        n++;
    }
    CHECK(n == 3);
    CHECK_RC(ironbark_cursor_next(c, &k, &kl, &v, &vl), IRONBARK_EWRONGKIND);
    CHECK_RC(ironbark_cursor_seek(c, B("k"), 1), IRONBARK_EWRONGKIND);
    ironbark_cursor_close(c);
    CHECK_RC(ironbark_cursor_open_int(w, t32, NULL, NULL, IRONBARK_CURSOR_REVERSE, &c), IRONBARK_OK);
    CHECK_RC(ironbark_cursor_next_int(c, &key, &v, &vl), IRONBARK_OK);
    CHECK(key == 4294967295u);
    CHECK_RC(ironbark_cursor_next_int(c, NULL, &v, &vl), IRONBARK_EINVAL);
    ironbark_cursor_close(c);
    CHECK_RC(ironbark_cursor_open_int(w, t32, NULL, NULL, 0x40, &c), IRONBARK_EINVAL);

    /* Kind and width errors. */
    CHECK_RC(ironbark_put(w, t32, B("k"), 1, B("v"), 1), IRONBARK_EWRONGKIND);
    CHECK(strstr(ironbark_last_error(), "integer-key tree") != NULL);
    CHECK_RC(ironbark_cursor_open(w, t32, NULL, 0, NULL, 0, 0, &c), IRONBARK_EWRONGKIND);
    CHECK_RC(ironbark_tree_open(w, "ids", IRONBARK_TREE_CREATE | IRONBARK_TREE_INTKEY64, &h),
             IRONBARK_EWRONGKIND);
    CHECK_RC(ironbark_tree_open(w, "ids", IRONBARK_TREE_INTKEY64, &h), IRONBARK_EWRONGKIND);
    CHECK_RC(ironbark_tree_open(w, "ids", 0, &h), IRONBARK_EWRONGKIND);
    CHECK_RC(ironbark_tree_open(w, "ids", IRONBARK_TREE_INTKEY32, &h), IRONBARK_OK);
    ironbark_tree_close(h);
    CHECK_RC(ironbark_cursor_open_int(w, h = NULL, NULL, NULL, 0, &c), IRONBARK_EINVAL);
    /* A multimap of integer keys takes keys of its width as bytes. */
    CHECK_RC(ironbark_tree_open(w, "im", IRONBARK_TREE_CREATE | IRONBARK_TREE_MULTIMAP |
                                             IRONBARK_TREE_INTKEY32, &im),
             IRONBARK_OK);
    CHECK_RC(ironbark_put_dup(w, im, B("\0\0\0\7"), 4, B("x"), 1), IRONBARK_OK);
    CHECK_RC(ironbark_put_dup(w, im, B("seven"), 5, B("x"), 1), IRONBARK_EINTKEYSIZE);
    CHECK_RC(ironbark_txn_commit(w), IRONBARK_OK);

    /* A read cursor and lookups. */
    CHECK_RC(ironbark_txn_begin(db, IRONBARK_TXN_READ_ONLY, &r), IRONBARK_OK);
    CHECK_RC(ironbark_cursor_open_int(r, t32, NULL, &hi, 0, &c), IRONBARK_OK); /* < 65536 */
    uint64_t want2[] = {1, 2, 256};
    n = 0;
    while (ironbark_cursor_next_int(c, &key, &v, &vl) == IRONBARK_OK) {
        CHECK(n < 3 && key == want2[n] && bytes_eq(v, vl, "v"));
        n++;
    }
    CHECK(n == 3);
    ironbark_cursor_close(c);
    CHECK_RC(ironbark_get_int(r, t64, UINT64_MAX, &v, &vl), IRONBARK_OK);
    CHECK(bytes_eq(v, vl, "max"));
    CHECK_RC(ironbark_put_int(r, t64, 1, B("v"), 1), IRONBARK_EREADONLY);
    CHECK_RC(ironbark_delete_int(r, t64, 1), IRONBARK_EREADONLY);
    CHECK_RC(ironbark_tree_open(r, "big", IRONBARK_TREE_INTKEY64, &h), IRONBARK_OK);
    CHECK_RC(ironbark_tree_count(r, h, &count), IRONBARK_OK);
    CHECK(count == 1);
    ironbark_tree_close(h);
    CHECK_RC(ironbark_tree_open(r, "im", IRONBARK_TREE_MULTIMAP | IRONBARK_TREE_INTKEY32, &h),
             IRONBARK_OK);
    CHECK_RC(ironbark_count_dups(r, h, B("\0\0\0\7"), 4, &count), IRONBARK_OK);
    CHECK(count == 1);
    ironbark_tree_close(h);
    ironbark_txn_abort(r);

    ironbark_tree_close(im);
    ironbark_tree_close(t64);
    ironbark_tree_close(t32);
    ironbark_close(db);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIRECTORY\n", argv[0]);
        return 2;
    }
    test_errors_and_strings();
    /* It forks: first, while this process has no database open (the child
     * must not inherit one, nor another thread's locks). */
    test_salvage_damaged_log(argv[1]);
    test_open_errors(argv[1]);
    test_null_handles();
    test_main_flow(argv[1]);
    test_put_many(argv[1]);
    test_read_only_and_readers(argv[1]);
    test_thread_and_handle_misuse(argv[1]);
    test_more_calls(argv[1]);
    test_savepoints(argv[1]);
    test_multimaps(argv[1]);
    test_int_trees(argv[1]);
    printf("%d checks passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
