/* The C interface every shimmed engine (LevelDB, WiredTiger, BerkeleyDB)
 * exposes to ironbark-bench, with the engine's prefix (ldb_, wt_, bdb_).
 *
 * Every function returns 0 on success (or 1 = found / entry, 0 = missing /
 * end for get and scan_next) and -1 on error, with a message in err.
 * Pointers returned by get and scan_next stay valid until the next call on
 * the same session (release, get, scan_*).
 *
 * snapshot_hold opens a read snapshot that the session keeps, while it goes
 * on writing, until snapshot_release (or session_close): it returns 1 when
 * held, 0 when the engine cannot hold one this way, -1 on error.
 * snapshot_get looks a key up in it, as get does (its value stays valid
 * until the next call on the session). */
#ifndef IBSHIM_H
#define IBSHIM_H

#include <stddef.h>
#include <stdint.h>

typedef struct ib_op {
    const char *key;
    size_t key_len;
    const char *value; /* NULL for a delete */
    size_t value_len;
} ib_op;

#define IBSHIM_DECLARE(P)                                                                  \
    int P##open(const char *dir, int sync, uint64_t cache_bytes, void **db, char *err,     \
                size_t errlen);                                                            \
    int P##close(void *db, char *err, size_t errlen);                                      \
    int P##session_open(void *db, void **session, char *err, size_t errlen);               \
    void P##session_close(void *session);                                                  \
    int P##write(void *session, const ib_op *ops, size_t n, char *err, size_t errlen);     \
    int P##get(void *session, const char *key, size_t key_len, const char **value,         \
               size_t *value_len, char *err, size_t errlen);                               \
    int P##scan_start(void *session, const char *start, size_t start_len, int reverse,     \
                      char *err, size_t errlen);                                           \
    int P##scan_next(void *session, const char **key, size_t *key_len, const char **value, \
                     size_t *value_len, char *err, size_t errlen);                         \
    void P##release(void *session);                                                        \
    int P##snapshot_hold(void *session, char *err, size_t errlen);                         \
    int P##snapshot_get(void *session, const char *key, size_t key_len, const char **value,\
                        size_t *value_len, char *err, size_t errlen);                      \
    void P##snapshot_release(void *session);

#endif
