/*
 * ironbark.h: the C API of ironbark, an embedded transactional ordered
 * key-value store. Link with libironbark_c.a (plus -lpthread -ldl -lm) or
 * libironbark_c.so. Hand-written; the tests of crates/ironbark-c check that
 * it declares every function the library exports. See docs/c-api.md.
 *
 * Conventions:
 * - Every function that can fail returns an int: IRONBARK_OK (0) on
 *   success, IRONBARK_NOTFOUND (1) for a missing key or the end of a
 *   cursor, a negative IRONBARK_E* code on error. ironbark_strerror(code)
 *   names the code; ironbark_last_error() gives the message of the last
 *   error on the calling thread.
 * - Null pointers are reported as IRONBARK_EINVAL, never dereferenced.
 * - Keys and values are byte strings (pointer + length); a null pointer
 *   with length 0 is the empty string.
 * - A write transaction, its cursors and the values read through them stay
 *   on the thread that began it.
 * - Entries a lookup finds (ironbark_get, ironbark_first, ironbark_get_ge,
 *   a cursor...) are pointers into the database, valid as ironbark_get
 *   says. Entries a call removes or replaces (ironbark_insert,
 *   ironbark_pop_first, ironbark_pop_last) are copies the caller owns and
 *   releases with ironbark_free.
 */
#ifndef IRONBARK_H
#define IRONBARK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Status and error codes. */
#define IRONBARK_OK 0
#define IRONBARK_NOTFOUND 1           /* no such key; cursor at its end */
#define IRONBARK_KEYEXIST 2           /* put_dup: the pair was there already */
#define IRONBARK_EINVAL (-1)          /* null pointer or invalid argument */
#define IRONBARK_EIO (-2)             /* the operating system reported an I/O error */
#define IRONBARK_ECORRUPTED (-3)      /* the file fails a check (checksum, structure) */
#define IRONBARK_ENOTIRONBARK (-4)    /* not an ironbark database file */
#define IRONBARK_EVERSION (-5)        /* incompatible file format version */
#define IRONBARK_EPAGESIZE (-6)       /* unsupported page size */
#define IRONBARK_EKEYSIZE (-7)        /* key longer than ironbark_max_key_len() */
#define IRONBARK_EVALSIZE (-8)        /* value longer than 1 GiB */
#define IRONBARK_ETREENAME (-9)       /* tree name empty or longer than 255 bytes */
#define IRONBARK_ENOTREE (-10)        /* no tree of that name */
#define IRONBARK_ETREEDROPPED (-11)   /* tree dropped in this transaction */
#define IRONBARK_EREADERSFULL (-12)   /* every reader slot is taken */
#define IRONBARK_EBUSY (-13)          /* another thread holds the write transaction */
#define IRONBARK_ELOCKED (-14)        /* another process holds the write lock */
#define IRONBARK_EREADONLY (-15)      /* read-only database or read transaction */
#define IRONBARK_EPOISONED (-16)      /* an earlier sync failed: reopen first */
#define IRONBARK_EOPTION (-17)        /* an option out of range */
#define IRONBARK_ETXNFAILED (-18)     /* an operation failed part-way: abort only */
#define IRONBARK_ETXNENDED (-19)      /* the cursor's transaction has ended */
#define IRONBARK_EPANIC (-20)         /* internal error (a bug): caught, not propagated */
#define IRONBARK_EUNKNOWN (-21)       /* an error kind newer than this header */
#define IRONBARK_ESTALETREE (-22)     /* tree handle of a tree dropped in an earlier txn */
#define IRONBARK_EFOREIGNTREE (-23)   /* tree handle of another database */
#define IRONBARK_ELOCKLESSREADER (-24) /* a lockless read-only process keeps writers out */
#define IRONBARK_EWRITETXNTHREAD (-25) /* this thread already holds the write txn */
#define IRONBARK_EKEYORDER (-26)      /* append: key not greater than the tree's last key */
#define IRONBARK_EWRONGKIND (-27)     /* tree opened or used as another kind than it is */
#define IRONBARK_EPAIRSIZE (-28)      /* multimap pair (key + value) over the key limit */
#define IRONBARK_EINTKEYSIZE (-29)    /* integer key too large for the tree's width */
#define IRONBARK_ESAVEPOINT (-30)     /* savepoint released, rolled back past, or foreign */
#define IRONBARK_EARENAFULL (-31)     /* newest commits do not fit this process's page arena */

/* Flags of ironbark_txn_begin. */
#define IRONBARK_TXN_WRITE 0u         /* a write transaction, waiting for the lock */
#define IRONBARK_TXN_READ_ONLY 1u     /* a read snapshot: never waits */
#define IRONBARK_TXN_NOWAIT 2u        /* write: fail with EBUSY/ELOCKED, don't wait */
#define IRONBARK_TXN_NOSYNC 4u        /* write: commit without fdatasync */

/* Flags of ironbark_tree_open. */
#define IRONBARK_TREE_CREATE 1u       /* create the tree if missing (write txn) */
#define IRONBARK_TREE_MULTIMAP 2u     /* a multimap: a sorted set of values per key */
#define IRONBARK_TREE_INTKEY32 4u     /* integer keys of 4 bytes (0..UINT32_MAX) */
#define IRONBARK_TREE_INTKEY64 8u     /* integer keys of 8 bytes */

/* Flags of ironbark_cursor_open. */
#define IRONBARK_CURSOR_REVERSE 1u    /* iterate from the end down to the start */
#define IRONBARK_CURSOR_END_INCLUSIVE 2u /* the end bound is included */

/* Durability of ironbark_options. */
#define IRONBARK_DURABILITY_IMMEDIATE 0 /* one fdatasync per commit */
#define IRONBARK_DURABILITY_NONE 1      /* no sync; ironbark_sync() makes durable */

typedef struct ironbark_db ironbark_db;
typedef struct ironbark_txn ironbark_txn;
typedef struct ironbark_tree ironbark_tree;
typedef struct ironbark_cursor ironbark_cursor;
typedef struct ironbark_savepoint ironbark_savepoint;

/* Options of ironbark_open; fill with ironbark_options_init first. */
typedef struct ironbark_options {
    uint32_t page_size;   /* for a new file: power of two, 1024..65536 (4096) */
    uint32_t max_readers; /* read transactions alive at once (126) */
    int32_t durability;   /* IRONBARK_DURABILITY_* (IMMEDIATE) */
    int32_t create;       /* create the file if missing (1) */
    int32_t read_only;    /* open for reading only (0) */
    /* Nonzero: a damaged redo log record that a later record proves was
     * durable opens the database at the last commit before it (the rest
     * dropped) instead of failing with IRONBARK_ECORRUPTED (0). Last, so
     * that the fields before it keep their offsets. */
    int32_t salvage_damaged_log;
} ironbark_options;

/* What ironbark_stats reports. */
typedef struct ironbark_stat {
    uint64_t page_size;
    uint64_t file_size_bytes;
    uint64_t page_count;       /* pages in use by the newest commit */
    uint64_t free_pages;
    uint64_t last_txn_id;      /* the newest commit */
    uint64_t durable_txn_id;   /* the newest commit known durable */
    uint64_t live_readers;
    uint64_t max_readers;
    uint64_t tree_count;
    uint64_t entries;          /* entries in all trees */
} ironbark_stat;

/* The library's version, e.g. "0.1.0". Static; never null. */
const char *ironbark_version(void);

/* A static description of a status code; never null. */
const char *ironbark_strerror(int code);

/* The message of the last error on this thread ("" if none): valid until
 * the next failing call on this thread. Never null. */
const char *ironbark_last_error(void);

/* Fills *opts with the defaults. */
int ironbark_options_init(ironbark_options *opts);

/* Opens (by default creating) the database at path. opts may be null for
 * the defaults. On success *db is a handle to free with ironbark_close. */
int ironbark_open(const char *path, const ironbark_options *opts, ironbark_db **db);

/* Closes the handle (null is ignored). Transactions still open keep the
 * database open until they end. */
void ironbark_close(ironbark_db *db);

/* Makes every commit so far durable (after IRONBARK_TXN_NOSYNC commits). */
int ironbark_sync(ironbark_db *db);

/* The longest key accepted, in bytes, into *len. */
int ironbark_max_key_len(ironbark_db *db, size_t *len);

/* Sizes and counts of the database into *stats. */
int ironbark_stats(ironbark_db *db, ironbark_stat *stats);

/* Begins a transaction: IRONBARK_TXN_READ_ONLY for a snapshot, else the
 * write transaction (one at a time; IRONBARK_TXN_NOWAIT, _NOSYNC). */
int ironbark_txn_begin(ironbark_db *db, unsigned flags, ironbark_txn **txn);

/* Commits a write transaction (ends a read one) and frees the handle,
 * whatever the result. */
int ironbark_txn_commit(ironbark_txn *txn);

/* Discards the transaction and frees the handle (null is ignored). */
void ironbark_txn_abort(ironbark_txn *txn);

/* A handle to the tree `name` (NUL-terminated UTF-8). With
 * IRONBARK_TREE_CREATE in a write transaction it is created if missing;
 * otherwise a missing tree is IRONBARK_ENOTREE. The handle is valid in any
 * later transaction of the same database while the tree exists.
 * The kind flags say what the tree is: none for a plain tree,
 * IRONBARK_TREE_MULTIMAP for a multimap (ironbark_put_dup...),
 * IRONBARK_TREE_INTKEY32 or _INTKEY64 for integer keys (ironbark_put_int...),
 * a multimap flag with an integer one for a multimap of integer keys (its
 * keys given as big-endian bytes of the width). A tree of another kind
 * or width is IRONBARK_EWRONGKIND, as is a handle given to a call for
 * another kind (ironbark_put on a multimap...). */
int ironbark_tree_open(ironbark_txn *txn, const char *name, unsigned flags, ironbark_tree **tree);

/* Frees a tree handle (null is ignored). */
void ironbark_tree_close(ironbark_tree *tree);

/* The number of entries of the tree (of a multimap: its pairs) into
 * *count. */
int ironbark_tree_count(ironbark_txn *txn, const ironbark_tree *tree, uint64_t *count);

/* Looks key up. IRONBARK_OK with *val and *val_len pointing at the value, in
 * place (zero-copy): valid until the transaction ends (a read transaction)
 * or until its next put/delete (a write transaction). IRONBARK_NOTFOUND if
 * the key is absent. */
int ironbark_get(ironbark_txn *txn, const ironbark_tree *tree,
                 const uint8_t *key, size_t key_len,
                 const uint8_t **val, size_t *val_len);

/* Stores val under key (replacing any value). Write transactions only. */
int ironbark_put(ironbark_txn *txn, const ironbark_tree *tree,
                 const uint8_t *key, size_t key_len,
                 const uint8_t *val, size_t val_len);

/* Stores count pairs, vals[i] (val_lens[i] bytes) under keys[i]
 * (key_lens[i] bytes), in order, as ironbark_put would one pair at a time
 * (of two pairs with one key, the later wins): faster than ironbark_put in
 * a loop for keys scattered over a large tree, whose paths it walks 16 at
 * a time. The arguments are checked first: a null array with count > 0,
 * or a null key or value with a non-zero length, is IRONBARK_EINVAL and
 * stores nothing. Then the first pair that fails (IRONBARK_EKEYSIZE...)
 * ends the call with its code, the pairs before it stored. No key or value
 * may be one found in this transaction (by ironbark_get...): the pairs
 * stored before it may move it. Write transactions only. */
int ironbark_put_many(ironbark_txn *txn, const ironbark_tree *tree,
                      const uint8_t *const *keys, const size_t *key_lens,
                      const uint8_t *const *vals, const size_t *val_lens,
                      size_t count);

/* Removes key: IRONBARK_OK if it was there, IRONBARK_NOTFOUND if not. */
int ironbark_delete(ironbark_txn *txn, const ironbark_tree *tree,
                    const uint8_t *key, size_t key_len);

/* A cursor over the keys from start (included; null = the first key) to
 * end (excluded unless IRONBARK_CURSOR_END_INCLUSIVE; null = past the last
 * key), ascending, or descending with IRONBARK_CURSOR_REVERSE. */
int ironbark_cursor_open(ironbark_txn *txn, const ironbark_tree *tree,
                         const uint8_t *start, size_t start_len,
                         const uint8_t *end, size_t end_len,
                         unsigned flags, ironbark_cursor **cursor);

/* The next entry in the cursor's direction: IRONBARK_OK with the key and
 * value in place (valid as for ironbark_get), IRONBARK_NOTFOUND at the
 * end. key, key_len, val and val_len must not be null. */
int ironbark_cursor_next(ironbark_cursor *cursor,
                         const uint8_t **key, size_t *key_len,
                         const uint8_t **val, size_t *val_len);

/* Repositions the cursor: the next entry is the first key >= key (or the
 * last key <= key in reverse), within the cursor's bounds. */
int ironbark_cursor_seek(ironbark_cursor *cursor, const uint8_t *key, size_t key_len);

/* Frees a buffer the library allocated for the caller (the copies that
 * ironbark_insert, ironbark_pop_first and ironbark_pop_last hand out);
 * null is ignored. */
void ironbark_free(void *ptr);

/* Stores val under key, which must be greater than every key of the tree:
 * the call for loading sorted data (no search per key, full pages). A key
 * not greater than the tree's last key is IRONBARK_EKEYORDER and changes
 * nothing; the transaction stays usable. Write transactions only. */
int ironbark_append(ironbark_txn *txn, const ironbark_tree *tree,
                    const uint8_t *key, size_t key_len,
                    const uint8_t *val, size_t val_len);

/* The entry with the smallest key: IRONBARK_OK with the key and value in
 * place (valid as for ironbark_get), IRONBARK_NOTFOUND if the tree is
 * empty. key, key_len, val and val_len must not be null. */
int ironbark_first(ironbark_txn *txn, const ironbark_tree *tree,
                   const uint8_t **key, size_t *key_len,
                   const uint8_t **val, size_t *val_len);

/* The entry with the largest key; as ironbark_first. */
int ironbark_last(ironbark_txn *txn, const ironbark_tree *tree,
                  const uint8_t **key, size_t *key_len,
                  const uint8_t **val, size_t *val_len);

/* Nearest-key lookups: the entry with the smallest key >= target (_ge) or
 * > target (_gt), or with the largest key <= target (_le) or < target
 * (_lt). IRONBARK_OK with the key and value in place (valid as for
 * ironbark_get), IRONBARK_NOTFOUND if there is none. key, key_len, val and
 * val_len must not be null. */
int ironbark_get_ge(ironbark_txn *txn, const ironbark_tree *tree,
                    const uint8_t *target, size_t target_len,
                    const uint8_t **key, size_t *key_len,
                    const uint8_t **val, size_t *val_len);
int ironbark_get_gt(ironbark_txn *txn, const ironbark_tree *tree,
                    const uint8_t *target, size_t target_len,
                    const uint8_t **key, size_t *key_len,
                    const uint8_t **val, size_t *val_len);
int ironbark_get_le(ironbark_txn *txn, const ironbark_tree *tree,
                    const uint8_t *target, size_t target_len,
                    const uint8_t **key, size_t *key_len,
                    const uint8_t **val, size_t *val_len);
int ironbark_get_lt(ironbark_txn *txn, const ironbark_tree *tree,
                    const uint8_t *target, size_t target_len,
                    const uint8_t **key, size_t *key_len,
                    const uint8_t **val, size_t *val_len);

/* IRONBARK_OK if the tree holds key, IRONBARK_NOTFOUND if not (the value
 * is not read). */
int ironbark_contains_key(ironbark_txn *txn, const ironbark_tree *tree,
                          const uint8_t *key, size_t key_len);

/* Stores val under key, like ironbark_put, and hands back the value it
 * replaced: IRONBARK_OK with *old a copy of it (release with
 * ironbark_free) and *old_len its length, or IRONBARK_NOTFOUND (the key
 * was new: *old is null, *old_len 0). old and old_len must not be null.
 * Write transactions only. */
int ironbark_insert(ironbark_txn *txn, const ironbark_tree *tree,
                    const uint8_t *key, size_t key_len,
                    const uint8_t *val, size_t val_len,
                    uint8_t **old, size_t *old_len);

/* Removes the entry with the smallest key and hands it back: IRONBARK_OK
 * with *key and *val copies (release both with ironbark_free), or
 * IRONBARK_NOTFOUND if the tree is empty (*key and *val null). None of
 * the four pointers may be null. Write transactions only. */
int ironbark_pop_first(ironbark_txn *txn, const ironbark_tree *tree,
                       uint8_t **key, size_t *key_len,
                       uint8_t **val, size_t *val_len);

/* Removes the entry with the largest key and hands it back; as
 * ironbark_pop_first. */
int ironbark_pop_last(ironbark_txn *txn, const ironbark_tree *tree,
                      uint8_t **key, size_t *key_len,
                      uint8_t **val, size_t *val_len);

/* Removes every entry of the tree (one visit per page; the tree and its
 * handles stay) and sets *count to how many there were. Write
 * transactions only. */
int ironbark_clear(ironbark_txn *txn, const ironbark_tree *tree, uint64_t *count);

/* Removes the entries with keys from start (included; null with length 0
 * = the first key) to end (excluded unless flags has
 * IRONBARK_CURSOR_END_INCLUSIVE; null with length 0 = past the last key)
 * and sets *count to how many. Other flags, and a null bound with a
 * non-zero length, are IRONBARK_EINVAL. Write transactions only. */
int ironbark_delete_range(ironbark_txn *txn, const ironbark_tree *tree,
                          const uint8_t *start, size_t start_len,
                          const uint8_t *end, size_t end_len,
                          unsigned flags, uint64_t *count);

/* Stores a value of val_len zero bytes under key and sets *space to them,
 * in the transaction's own page, for the caller to write the value in
 * place (no buffer of its own to copy from). *space is writable until the
 * next call on the transaction (any function given this txn, or a cursor
 * of it); what it holds then is the value. Write transactions only. */
int ironbark_put_reserve(ironbark_txn *txn, const ironbark_tree *tree,
                         const uint8_t *key, size_t key_len,
                         size_t val_len, uint8_t **space);

/* A cursor over the keys that start with prefix (a null prefix with
 * length 0, or any empty one, is every key), ascending, or descending
 * with IRONBARK_CURSOR_REVERSE (the only flag). Otherwise an ordinary
 * cursor: ironbark_cursor_next, _seek (within the prefix) and _close. */
int ironbark_cursor_open_prefix(ironbark_txn *txn, const ironbark_tree *tree,
                                const uint8_t *prefix, size_t prefix_len,
                                unsigned flags, ironbark_cursor **cursor);

/* Savepoints (write transactions only). ironbark_savepoint_take marks the
 * transaction's state; ironbark_savepoint_rollback undoes every change made
 * since (the savepoint stays, to roll back to again; those taken after it
 * are discarded); ironbark_savepoint_release forgets it and those taken
 * after it, keeping the changes, and frees the handle whatever the result.
 * A savepoint released, rolled back past, or of another transaction is
 * IRONBARK_ESAVEPOINT and changes nothing. ironbark_savepoint_close frees a
 * handle without releasing (null is ignored). Tree handles opened since a
 * savepoint are stale after a rollback to it. */
int ironbark_savepoint_take(ironbark_txn *txn, ironbark_savepoint **sp);
int ironbark_savepoint_rollback(ironbark_txn *txn, const ironbark_savepoint *sp);
int ironbark_savepoint_release(ironbark_txn *txn, ironbark_savepoint *sp);
void ironbark_savepoint_close(ironbark_savepoint *sp);

/* Multimaps (a tree opened with IRONBARK_TREE_MULTIMAP): each key holds a
 * sorted set of values; a pair is stored once. A key and value together
 * are limited to about ironbark_max_key_len() bytes (IRONBARK_EPAIRSIZE).
 * ironbark_put_dup adds the pair: IRONBARK_OK, or IRONBARK_KEYEXIST if it
 * was there already. ironbark_delete_dup removes it: IRONBARK_OK, or
 * IRONBARK_NOTFOUND. Write transactions only. */
int ironbark_put_dup(ironbark_txn *txn, const ironbark_tree *tree,
                     const uint8_t *key, size_t key_len,
                     const uint8_t *val, size_t val_len);
int ironbark_delete_dup(ironbark_txn *txn, const ironbark_tree *tree,
                        const uint8_t *key, size_t key_len,
                        const uint8_t *val, size_t val_len);

/* Removes every value of key and sets *count to how many. Write
 * transactions only. */
int ironbark_delete_dups(ironbark_txn *txn, const ironbark_tree *tree,
                         const uint8_t *key, size_t key_len, uint64_t *count);

/* The number of values of key into *count (0 if none). It counts whole
 * pages by their entry counts, reading no value. */
int ironbark_count_dups(ironbark_txn *txn, const ironbark_tree *tree,
                        const uint8_t *key, size_t key_len, uint64_t *count);

/* IRONBARK_OK if the multimap holds the pair, IRONBARK_NOTFOUND if not. */
int ironbark_contains_dup(ironbark_txn *txn, const ironbark_tree *tree,
                          const uint8_t *key, size_t key_len,
                          const uint8_t *val, size_t val_len);

/* A cursor over the values of key, ascending, or descending with
 * IRONBARK_CURSOR_REVERSE (the only flag). ironbark_cursor_next gives
 * each (key, value) pair. ironbark_cursor_open on a multimap handle is a
 * cursor over its pairs with keys in the bounds, in (key, value) order;
 * ironbark_cursor_seek moves it to the first pair of the first key >= the
 * one given (the last key <= it in reverse). On a multimap cursor the
 * value is valid as for ironbark_get, the key until the next call on the
 * cursor (a key with zero bytes is decoded into the cursor). In a write
 * transaction such a cursor finds its place again at each step, which
 * costs as many steps as the values of the current key before it. */
int ironbark_cursor_open_dups(ironbark_txn *txn, const ironbark_tree *tree,
                              const uint8_t *key, size_t key_len,
                              unsigned flags, ironbark_cursor **cursor);

/* Integer-key trees (opened with IRONBARK_TREE_INTKEY32 or _INTKEY64):
 * keys are unsigned integers in numeric order. A key above the width's
 * largest (UINT32_MAX for 4 bytes) is IRONBARK_EINTKEYSIZE for
 * ironbark_put_int (nothing is stored) and not found for _get_int and
 * _delete_int. ironbark_get_int gives the value in place (valid as for
 * ironbark_get); ironbark_delete_int answers IRONBARK_OK or
 * IRONBARK_NOTFOUND. */
int ironbark_put_int(ironbark_txn *txn, const ironbark_tree *tree, uint64_t key,
                     const uint8_t *val, size_t val_len);
int ironbark_get_int(ironbark_txn *txn, const ironbark_tree *tree, uint64_t key,
                     const uint8_t **val, size_t *val_len);
int ironbark_delete_int(ironbark_txn *txn, const ironbark_tree *tree, uint64_t key);

/* A cursor over the integer keys from *start (included; null = the first
 * key) to *end (excluded unless IRONBARK_CURSOR_END_INCLUSIVE; null = past
 * the last key), ascending or with IRONBARK_CURSOR_REVERSE descending.
 * Step it with ironbark_cursor_next_int (ironbark_cursor_next and _seek on
 * it are IRONBARK_EWRONGKIND), free it with ironbark_cursor_close. */
int ironbark_cursor_open_int(ironbark_txn *txn, const ironbark_tree *tree,
                             const uint64_t *start, const uint64_t *end,
                             unsigned flags, ironbark_cursor **cursor);

/* The next entry of an integer-key cursor: IRONBARK_OK with *key and the
 * value in place (valid as for ironbark_get), IRONBARK_NOTFOUND at the
 * end. key, val and val_len must not be null. */
int ironbark_cursor_next_int(ironbark_cursor *cursor, uint64_t *key,
                             const uint8_t **val, size_t *val_len);

/* Frees the cursor (null is ignored). Close cursors before their write
 * transaction ends; a cursor of an ended write transaction answers
 * IRONBARK_ETXNENDED. A read cursor keeps its snapshot until closed. */
void ironbark_cursor_close(ironbark_cursor *cursor);

#ifdef __cplusplus
}
#endif

#endif /* IRONBARK_H */
