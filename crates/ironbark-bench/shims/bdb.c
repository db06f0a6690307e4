/* BerkeleyDB 5.3 (Debian libdb5.3-dev) B-tree in a transactional
 * environment: a cache of the requested size, DB_TXN_NOSYNC unless durable,
 * deadlocks retried, a checkpoint at close. */
#include <db.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ibshim.h"

IBSHIM_DECLARE(bdb_)

typedef struct {
    DB_ENV *env;
    DB *db;
} bdb_db;

typedef struct {
    bdb_db *d;
    DBT key, value; /* DB_DBT_REALLOC buffers owned by the session */
    DBC *cursor;
    int reverse;
    int first;
} bdb_session;

static int fail(char *err, size_t errlen, const char *what, int ret) {
    snprintf(err, errlen, "bdb: %s: %s", what, db_strerror(ret));
    return -1;
}

int bdb_open(const char *dir, int sync, uint64_t cache_bytes, void **out, char *err,
             size_t errlen) {
    DB_ENV *env = NULL;
    DB *db = NULL;
    int ret;
    u_int32_t gb = (u_int32_t)(cache_bytes >> 30);
    u_int32_t bytes = (u_int32_t)(cache_bytes & ((1u << 30) - 1));
    if ((ret = db_env_create(&env, 0)) != 0) return fail(err, errlen, "db_env_create", ret);
    env->set_cachesize(env, gb, bytes, 1);
    env->set_lk_detect(env, DB_LOCK_DEFAULT);
    env->set_lk_max_locks(env, 100000);
    env->set_lk_max_objects(env, 100000);
    env->set_lk_max_lockers(env, 10000);
    env->set_lg_bsize(env, 8 << 20);
    env->log_set_config(env, DB_LOG_AUTO_REMOVE, 1);
    if (!sync) env->set_flags(env, DB_TXN_NOSYNC, 1);
    ret = env->open(env, dir,
                    DB_CREATE | DB_INIT_MPOOL | DB_INIT_TXN | DB_INIT_LOCK | DB_INIT_LOG |
                        DB_THREAD | DB_RECOVER,
                    0644);
    if (ret != 0) {
        env->close(env, 0);
        return fail(err, errlen, "env open", ret);
    }
    if ((ret = db_create(&db, env, 0)) != 0) {
        env->close(env, 0);
        return fail(err, errlen, "db_create", ret);
    }
    ret = db->open(db, NULL, "data.db", NULL, DB_BTREE, DB_CREATE | DB_THREAD | DB_AUTO_COMMIT,
                   0644);
    if (ret != 0) {
        db->close(db, 0);
        env->close(env, 0);
        return fail(err, errlen, "db open", ret);
    }
    bdb_db *d = calloc(1, sizeof *d);
    d->env = env;
    d->db = db;
    *out = d;
    return 0;
}

int bdb_close(void *db, char *err, size_t errlen) {
    bdb_db *d = db;
    int ret = d->env->txn_checkpoint(d->env, 0, 0, DB_FORCE);
    int ret2 = d->db->close(d->db, 0);
    int ret3 = d->env->close(d->env, 0);
    free(d);
    if (ret != 0) return fail(err, errlen, "checkpoint", ret);
    if (ret2 != 0) return fail(err, errlen, "db close", ret2);
    if (ret3 != 0) return fail(err, errlen, "env close", ret3);
    return 0;
}

int bdb_session_open(void *db, void **out, char *err, size_t errlen) {
    bdb_session *s = calloc(1, sizeof *s);
    (void)err;
    (void)errlen;
    s->d = db;
    s->key.flags = DB_DBT_REALLOC;
    s->value.flags = DB_DBT_REALLOC;
    *out = s;
    return 0;
}

void bdb_release(void *session) {
    bdb_session *s = session;
    if (s->cursor) {
        s->cursor->close(s->cursor);
        s->cursor = NULL;
    }
}

/* No held snapshot: a BerkeleyDB read transaction holds page read locks
 * that this same session's writes would wait on, and a lock-free snapshot
 * (DB_TXN_SNAPSHOT) needs a multiversion database (DB_MULTIVERSION), which
 * this shim does not open. longreader reports bdb as unsupported. */
int bdb_snapshot_hold(void *session, char *err, size_t errlen) {
    (void)session;
    (void)err;
    (void)errlen;
    return 0;
}

int bdb_snapshot_get(void *session, const char *key, size_t key_len, const char **value,
                     size_t *value_len, char *err, size_t errlen) {
    (void)session;
    (void)key;
    (void)key_len;
    (void)value;
    (void)value_len;
    snprintf(err, errlen, "bdb: no snapshot is held");
    return -1;
}

void bdb_snapshot_release(void *session) { (void)session; }

void bdb_session_close(void *session) {
    bdb_session *s = session;
    bdb_release(s);
    free(s->key.data);
    free(s->value.data);
    free(s);
}

int bdb_write(void *session, const ib_op *ops, size_t n, char *err, size_t errlen) {
    bdb_session *s = session;
    DB_ENV *env = s->d->env;
    DB *db = s->d->db;
    size_t i;
    int ret, tries;
    bdb_release(s);
    for (tries = 0; tries < 100; tries++) {
        DB_TXN *txn = NULL;
        if ((ret = env->txn_begin(env, NULL, &txn, 0)) != 0)
            return fail(err, errlen, "txn_begin", ret);
        for (i = 0, ret = 0; i < n && ret == 0; i++) {
            DBT k, v;
            memset(&k, 0, sizeof k);
            memset(&v, 0, sizeof v);
            k.data = (void *)ops[i].key;
            k.size = (u_int32_t)ops[i].key_len;
            if (ops[i].value) {
                v.data = (void *)ops[i].value;
                v.size = (u_int32_t)ops[i].value_len;
                ret = db->put(db, txn, &k, &v, 0);
            } else {
                ret = db->del(db, txn, &k, 0);
                if (ret == DB_NOTFOUND) ret = 0;
            }
        }
        if (ret == 0) {
            if ((ret = txn->commit(txn, 0)) != 0) return fail(err, errlen, "commit", ret);
            return 0;
        }
        txn->abort(txn);
        if (ret != DB_LOCK_DEADLOCK) return fail(err, errlen, "write", ret);
    }
    return fail(err, errlen, "write (deadlocks)", ret);
}

int bdb_get(void *session, const char *key, size_t key_len, const char **value,
            size_t *value_len, char *err, size_t errlen) {
    bdb_session *s = session;
    DB *db = s->d->db;
    DBT k;
    int ret, tries;
    bdb_release(s);
    memset(&k, 0, sizeof k);
    k.data = (void *)key;
    k.size = (u_int32_t)key_len;
    for (tries = 0; tries < 100; tries++) {
        ret = db->get(db, NULL, &k, &s->value, 0);
        if (ret != DB_LOCK_DEADLOCK) break;
    }
    if (ret == DB_NOTFOUND) return 0;
    if (ret != 0) return fail(err, errlen, "get", ret);
    *value = s->value.data;
    *value_len = s->value.size;
    return 1;
}

int bdb_scan_start(void *session, const char *start, size_t start_len, int reverse, char *err,
                   size_t errlen) {
    bdb_session *s = session;
    DB *db = s->d->db;
    int ret;
    bdb_release(s);
    if ((ret = db->cursor(db, NULL, &s->cursor, 0)) != 0) return fail(err, errlen, "cursor", ret);
    s->reverse = reverse;
    s->first = 1;
    if (!start) return 0;
    /* Position on the first key >= start; scan_next returns it first. */
    s->key.size = (u_int32_t)start_len;
    s->key.data = realloc(s->key.data, start_len ? start_len : 1);
    memcpy(s->key.data, start, start_len);
    ret = s->cursor->get(s->cursor, &s->key, &s->value, DB_SET_RANGE);
    if (ret == DB_NOTFOUND) {
        s->first = reverse ? 3 : -1; /* reverse: start from the last key */
        return 0;
    }
    if (ret != 0) return fail(err, errlen, "DB_SET_RANGE", ret);
    s->first = 2;
    if (reverse) {
        size_t kl = s->key.size;
        size_t m = kl < start_len ? kl : start_len;
        int c = memcmp(s->key.data, start, m);
        if (c > 0 || (c == 0 && kl > start_len)) s->first = 4; /* step back once */
    }
    return 0;
}

int bdb_scan_next(void *session, const char **key, size_t *key_len, const char **value,
                  size_t *value_len, char *err, size_t errlen) {
    bdb_session *s = session;
    int ret;
    u_int32_t op;
    if (!s->cursor || s->first == -1) return 0;
    switch (s->first) {
    case 1: op = s->reverse ? DB_LAST : DB_FIRST; break;
    case 2: op = 0; break;
    case 3: op = DB_LAST; break;
    case 4: op = DB_PREV; break;
    default: op = s->reverse ? DB_PREV : DB_NEXT; break;
    }
    s->first = 0;
    ret = op ? s->cursor->get(s->cursor, &s->key, &s->value, op) : 0;
    if (ret == DB_NOTFOUND) {
        s->first = -1;
        return 0;
    }
    if (ret != 0) return fail(err, errlen, "cursor get", ret);
    *key = s->key.data;
    *key_len = s->key.size;
    *value = s->value.data;
    *value_len = s->value.size;
    return 1;
}
