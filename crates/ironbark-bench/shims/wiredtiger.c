/* WiredTiger 3.2.1 (Debian libwiredtiger-dev) B-tree: no compression, a
 * cache of the requested size, one session and cursor per thread. Durable
 * runs log every commit with an fsync; non-durable runs have no log and
 * checkpoint at close. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wiredtiger.h>

#include "ibshim.h"

IBSHIM_DECLARE(wt_)

#define URI "table:bench"

typedef struct {
    WT_CONNECTION *conn;
} wt_db;

typedef struct {
    WT_SESSION *session;
    WT_CURSOR *cursor;
    int reverse;
    int first;
    int positioned;
    /* The held snapshot: a session of its own with a snapshot-isolation
     * transaction open, and its cursor (a session has one transaction). */
    WT_SESSION *snap_session;
    WT_CURSOR *snap_cursor;
} wt_session;

static int fail(char *err, size_t errlen, const char *what, int ret) {
    snprintf(err, errlen, "wiredtiger: %s: %s", what, wiredtiger_strerror(ret));
    return -1;
}

int wt_open(const char *dir, int sync, uint64_t cache_bytes, void **out, char *err,
            size_t errlen) {
    char config[512];
    WT_CONNECTION *conn = NULL;
    WT_SESSION *session = NULL;
    int ret;
    unsigned long long cache_mb = cache_bytes >> 20;
    if (cache_mb < 64) cache_mb = 64;
    snprintf(config, sizeof config,
             "create,cache_size=%lluM,session_max=1024,statistics=(none),%s", cache_mb,
             sync ? "log=(enabled=true,file_max=64MB),transaction_sync=(enabled=true,method=fsync)"
                  : "log=(enabled=false)");
    if ((ret = wiredtiger_open(dir, NULL, config, &conn)) != 0)
        return fail(err, errlen, "open", ret);
    if ((ret = conn->open_session(conn, NULL, NULL, &session)) != 0) {
        conn->close(conn, NULL);
        return fail(err, errlen, "open_session", ret);
    }
    ret = session->create(session, URI, "key_format=u,value_format=u,block_compressor=");
    session->close(session, NULL);
    if (ret != 0) {
        conn->close(conn, NULL);
        return fail(err, errlen, "create", ret);
    }
    wt_db *d = calloc(1, sizeof *d);
    d->conn = conn;
    *out = d;
    return 0;
}

int wt_close(void *db, char *err, size_t errlen) {
    wt_db *d = db;
    int ret = d->conn->close(d->conn, NULL); /* checkpoints */
    free(d);
    if (ret != 0) return fail(err, errlen, "close", ret);
    return 0;
}

int wt_session_open(void *db, void **out, char *err, size_t errlen) {
    wt_db *d = db;
    wt_session *s = calloc(1, sizeof *s);
    int ret;
    if ((ret = d->conn->open_session(d->conn, NULL, NULL, &s->session)) != 0) {
        free(s);
        return fail(err, errlen, "open_session", ret);
    }
    if ((ret = s->session->open_cursor(s->session, URI, NULL, NULL, &s->cursor)) != 0) {
        s->session->close(s->session, NULL);
        free(s);
        return fail(err, errlen, "open_cursor", ret);
    }
    *out = s;
    return 0;
}

void wt_release(void *session) {
    wt_session *s = session;
    if (s->positioned) {
        s->cursor->reset(s->cursor);
        s->positioned = 0;
    }
}

void wt_snapshot_release(void *session) {
    wt_session *s = session;
    if (s->snap_session) {
        /* Closing the session rolls its transaction back. */
        s->snap_session->close(s->snap_session, NULL);
        s->snap_session = NULL;
        s->snap_cursor = NULL;
    }
}

int wt_snapshot_hold(void *session, char *err, size_t errlen) {
    wt_session *s = session;
    WT_CONNECTION *conn = s->session->connection;
    WT_SESSION *ss = NULL;
    WT_CURSOR *c = NULL;
    int ret;
    wt_snapshot_release(s);
    if ((ret = conn->open_session(conn, NULL, NULL, &ss)) != 0)
        return fail(err, errlen, "open_session", ret);
    if ((ret = ss->begin_transaction(ss, "isolation=snapshot")) != 0 ||
        (ret = ss->open_cursor(ss, URI, NULL, NULL, &c)) != 0) {
        ss->close(ss, NULL);
        return fail(err, errlen, "snapshot", ret);
    }
    /* The snapshot is taken at the transaction's first read. */
    ret = c->next(c);
    if (ret != 0 && ret != WT_NOTFOUND) {
        ss->close(ss, NULL);
        return fail(err, errlen, "snapshot read", ret);
    }
    c->reset(c);
    s->snap_session = ss;
    s->snap_cursor = c;
    return 1;
}

int wt_snapshot_get(void *session, const char *key, size_t key_len, const char **value,
                    size_t *value_len, char *err, size_t errlen) {
    wt_session *s = session;
    WT_CURSOR *c = s->snap_cursor;
    WT_ITEM k, v;
    int ret;
    if (!c) {
        snprintf(err, errlen, "wiredtiger: no snapshot is held");
        return -1;
    }
    memset(&k, 0, sizeof k);
    memset(&v, 0, sizeof v);
    k.data = key;
    k.size = key_len;
    c->set_key(c, &k);
    ret = c->search(c);
    if (ret == WT_NOTFOUND) return 0;
    if (ret != 0) return fail(err, errlen, "snapshot search", ret);
    if ((ret = c->get_value(c, &v)) != 0) return fail(err, errlen, "get_value", ret);
    *value = v.data;
    *value_len = v.size;
    return 1;
}

void wt_session_close(void *session) {
    wt_session *s = session;
    wt_snapshot_release(s);
    s->session->close(s->session, NULL);
    free(s);
}

int wt_write(void *session, const ib_op *ops, size_t n, char *err, size_t errlen) {
    wt_session *s = session;
    WT_CURSOR *c = s->cursor;
    WT_ITEM k, v;
    size_t i;
    int ret;
    wt_release(s);
    memset(&k, 0, sizeof k);
    memset(&v, 0, sizeof v);
    if ((ret = s->session->begin_transaction(s->session, NULL)) != 0)
        return fail(err, errlen, "begin_transaction", ret);
    for (i = 0; i < n; i++) {
        k.data = ops[i].key;
        k.size = ops[i].key_len;
        c->set_key(c, &k);
        if (ops[i].value) {
            v.data = ops[i].value;
            v.size = ops[i].value_len;
            c->set_value(c, &v);
            ret = c->insert(c);
        } else {
            ret = c->remove(c);
            if (ret == WT_NOTFOUND) ret = 0;
        }
        if (ret != 0) {
            s->session->rollback_transaction(s->session, NULL);
            return fail(err, errlen, "write", ret);
        }
    }
    if ((ret = s->session->commit_transaction(s->session, NULL)) != 0)
        return fail(err, errlen, "commit_transaction", ret);
    return 0;
}

int wt_get(void *session, const char *key, size_t key_len, const char **value,
           size_t *value_len, char *err, size_t errlen) {
    wt_session *s = session;
    WT_CURSOR *c = s->cursor;
    WT_ITEM k, v;
    int ret;
    wt_release(s);
    memset(&k, 0, sizeof k);
    memset(&v, 0, sizeof v);
    k.data = key;
    k.size = key_len;
    c->set_key(c, &k);
    ret = c->search(c);
    if (ret == WT_NOTFOUND) return 0;
    if (ret != 0) return fail(err, errlen, "search", ret);
    s->positioned = 1;
    if ((ret = c->get_value(c, &v)) != 0) return fail(err, errlen, "get_value", ret);
    *value = v.data;
    *value_len = v.size;
    return 1;
}

int wt_scan_start(void *session, const char *start, size_t start_len, int reverse, char *err,
                  size_t errlen) {
    wt_session *s = session;
    WT_CURSOR *c = s->cursor;
    WT_ITEM k;
    int ret, exact = 0;
    wt_release(s);
    s->reverse = reverse;
    s->first = 1;
    if (!start) return 0; /* next/prev on a reset cursor start at the first/last key */
    memset(&k, 0, sizeof k);
    k.data = start;
    k.size = start_len;
    c->set_key(c, &k);
    ret = c->search_near(c, &exact);
    if (ret == WT_NOTFOUND) { /* empty table */
        s->first = -1;
        return 0;
    }
    if (ret != 0) return fail(err, errlen, "search_near", ret);
    s->positioned = 1;
    if (!reverse && exact < 0) ret = c->next(c);
    if (reverse && exact > 0) ret = c->prev(c);
    if (ret == WT_NOTFOUND) {
        s->first = -1;
        return 0;
    }
    if (ret != 0) return fail(err, errlen, "position", ret);
    s->first = 2; /* positioned on the first entry */
    return 0;
}

int wt_scan_next(void *session, const char **key, size_t *key_len, const char **value,
                 size_t *value_len, char *err, size_t errlen) {
    wt_session *s = session;
    WT_CURSOR *c = s->cursor;
    WT_ITEM k, v;
    int ret;
    if (s->first == -1) return 0;
    if (s->first == 2) {
        ret = 0;
    } else {
        ret = s->reverse ? c->prev(c) : c->next(c);
    }
    s->first = 0;
    if (ret == WT_NOTFOUND) {
        s->first = -1;
        return 0;
    }
    if (ret != 0) return fail(err, errlen, "next", ret);
    s->positioned = 1;
    memset(&k, 0, sizeof k);
    memset(&v, 0, sizeof v);
    if ((ret = c->get_key(c, &k)) != 0) return fail(err, errlen, "get_key", ret);
    if ((ret = c->get_value(c, &v)) != 0) return fail(err, errlen, "get_value", ret);
    *key = k.data;
    *key_len = k.size;
    *value = v.data;
    *value_len = v.size;
    return 1;
}
