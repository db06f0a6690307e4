/* LevelDB (Debian libleveldb-dev 1.23) through its C API: no compression,
 * an LRU block cache of the requested size, sync writes only when durable. */
#include <leveldb/c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ibshim.h"

IBSHIM_DECLARE(ldb_)

typedef struct {
    leveldb_t *db;
    leveldb_options_t *options;
    leveldb_cache_t *cache;
    int sync;
} ldb_db;

typedef struct {
    ldb_db *d;
    leveldb_readoptions_t *ropts;
    leveldb_writeoptions_t *wopts;
    leveldb_writebatch_t *batch;
    char *value; /* from leveldb_get, freed on release */
    leveldb_iterator_t *it;
    int reverse;
    int first;
    /* The held snapshot and the read options that read through it. */
    const leveldb_snapshot_t *snap;
    leveldb_readoptions_t *snap_ropts;
} ldb_session;

static int fail(char *err, size_t errlen, char *msg) {
    snprintf(err, errlen, "leveldb: %s", msg ? msg : "unknown error");
    if (msg) leveldb_free(msg);
    return -1;
}

int ldb_open(const char *dir, int sync, uint64_t cache_bytes, void **out, char *err,
             size_t errlen) {
    ldb_db *d = calloc(1, sizeof *d);
    char *msg = NULL;
    d->sync = sync;
    d->options = leveldb_options_create();
    d->cache = leveldb_cache_create_lru((size_t)cache_bytes);
    leveldb_options_set_create_if_missing(d->options, 1);
    leveldb_options_set_compression(d->options, leveldb_no_compression);
    leveldb_options_set_cache(d->options, d->cache);
    d->db = leveldb_open(d->options, dir, &msg);
    if (msg) {
        leveldb_options_destroy(d->options);
        leveldb_cache_destroy(d->cache);
        free(d);
        return fail(err, errlen, msg);
    }
    *out = d;
    return 0;
}

int ldb_close(void *db, char *err, size_t errlen) {
    ldb_db *d = db;
    (void)err;
    (void)errlen;
    leveldb_close(d->db);
    leveldb_options_destroy(d->options);
    leveldb_cache_destroy(d->cache);
    free(d);
    return 0;
}

int ldb_session_open(void *db, void **out, char *err, size_t errlen) {
    ldb_session *s = calloc(1, sizeof *s);
    (void)err;
    (void)errlen;
    s->d = db;
    s->ropts = leveldb_readoptions_create();
    s->wopts = leveldb_writeoptions_create();
    leveldb_writeoptions_set_sync(s->wopts, s->d->sync);
    s->batch = leveldb_writebatch_create();
    *out = s;
    return 0;
}

void ldb_release(void *session) {
    ldb_session *s = session;
    if (s->value) {
        leveldb_free(s->value);
        s->value = NULL;
    }
    if (s->it) {
        leveldb_iter_destroy(s->it);
        s->it = NULL;
    }
}

void ldb_snapshot_release(void *session) {
    ldb_session *s = session;
    if (s->snap) {
        leveldb_readoptions_destroy(s->snap_ropts);
        leveldb_release_snapshot(s->d->db, s->snap);
        s->snap = NULL;
        s->snap_ropts = NULL;
    }
}

int ldb_snapshot_hold(void *session, char *err, size_t errlen) {
    ldb_session *s = session;
    (void)err;
    (void)errlen;
    ldb_snapshot_release(s);
    s->snap = leveldb_create_snapshot(s->d->db);
    s->snap_ropts = leveldb_readoptions_create();
    leveldb_readoptions_set_snapshot(s->snap_ropts, s->snap);
    return 1;
}

int ldb_snapshot_get(void *session, const char *key, size_t key_len, const char **value,
                     size_t *value_len, char *err, size_t errlen) {
    ldb_session *s = session;
    char *msg = NULL;
    ldb_release(s);
    if (!s->snap) {
        snprintf(err, errlen, "leveldb: no snapshot is held");
        return -1;
    }
    s->value = leveldb_get(s->d->db, s->snap_ropts, key, key_len, value_len, &msg);
    if (msg) return fail(err, errlen, msg);
    if (!s->value) return 0;
    *value = s->value;
    return 1;
}

void ldb_session_close(void *session) {
    ldb_session *s = session;
    ldb_release(s);
    ldb_snapshot_release(s);
    leveldb_readoptions_destroy(s->ropts);
    leveldb_writeoptions_destroy(s->wopts);
    leveldb_writebatch_destroy(s->batch);
    free(s);
}

int ldb_write(void *session, const ib_op *ops, size_t n, char *err, size_t errlen) {
    ldb_session *s = session;
    char *msg = NULL;
    size_t i;
    leveldb_writebatch_clear(s->batch);
    for (i = 0; i < n; i++) {
        if (ops[i].value)
            leveldb_writebatch_put(s->batch, ops[i].key, ops[i].key_len, ops[i].value,
                                   ops[i].value_len);
        else
            leveldb_writebatch_delete(s->batch, ops[i].key, ops[i].key_len);
    }
    leveldb_write(s->d->db, s->wopts, s->batch, &msg);
    if (msg) return fail(err, errlen, msg);
    return 0;
}

int ldb_get(void *session, const char *key, size_t key_len, const char **value,
            size_t *value_len, char *err, size_t errlen) {
    ldb_session *s = session;
    char *msg = NULL;
    ldb_release(s);
    s->value = leveldb_get(s->d->db, s->ropts, key, key_len, value_len, &msg);
    if (msg) return fail(err, errlen, msg);
    if (!s->value) return 0;
    *value = s->value;
    return 1;
}

int ldb_scan_start(void *session, const char *start, size_t start_len, int reverse, char *err,
                   size_t errlen) {
    ldb_session *s = session;
    (void)err;
    (void)errlen;
    ldb_release(s);
    s->it = leveldb_create_iterator(s->d->db, s->ropts);
    s->reverse = reverse;
    s->first = 1;
    if (!start) {
        if (reverse)
            leveldb_iter_seek_to_last(s->it);
        else
            leveldb_iter_seek_to_first(s->it);
        return 0;
    }
    leveldb_iter_seek(s->it, start, start_len);
    if (reverse) {
        if (!leveldb_iter_valid(s->it)) {
            leveldb_iter_seek_to_last(s->it);
        } else {
            size_t kl;
            const char *k = leveldb_iter_key(s->it, &kl);
            size_t m = kl < start_len ? kl : start_len;
            int c = memcmp(k, start, m);
            if (c > 0 || (c == 0 && kl > start_len)) leveldb_iter_prev(s->it);
        }
    }
    return 0;
}

int ldb_scan_next(void *session, const char **key, size_t *key_len, const char **value,
                  size_t *value_len, char *err, size_t errlen) {
    ldb_session *s = session;
    char *msg = NULL;
    if (!s->it) return 0;
    if (!s->first) {
        if (s->reverse)
            leveldb_iter_prev(s->it);
        else
            leveldb_iter_next(s->it);
    }
    s->first = 0;
    if (!leveldb_iter_valid(s->it)) {
        leveldb_iter_get_error(s->it, &msg);
        if (msg) return fail(err, errlen, msg);
        return 0;
    }
    *key = leveldb_iter_key(s->it, key_len);
    *value = leveldb_iter_value(s->it, value_len);
    return 1;
}
