"""Tests of the ironbark Python package: opening, transactions as context
managers, get/put/delete/range/prefix/iteration, zero-copy memoryviews,
the exceptions, threads and stats. Run by scripts/test.sh with pytest after
installing the package from source."""

import pathlib
import random
import subprocess
import sys
import threading
import time

import pytest

import ironbark


@pytest.fixture
def db(tmp_path):
    d = ironbark.open(tmp_path / "test.ib")
    yield d
    d.close()


def fill(db, n=100, tree=None):
    with db.begin(write=True) as txn:
        for i in range(n):
            txn.put(b"key%03d" % i, b"value-%d" % i, tree=tree)


def test_open_creates_the_file_and_reports_its_path(tmp_path):
    path = tmp_path / "new.ib"
    with ironbark.open(str(path)) as db:
        assert path.is_file()
        assert db.path == path
        assert not db.closed
        assert db.max_key_len == 1317
        assert not db.read_only
        assert "new.ib" in repr(db)
    assert db.closed
    with pytest.raises(ironbark.ClosedError):
        db.begin()


def test_open_rejects_bad_options(tmp_path):
    with pytest.raises(ironbark.InvalidOptionError, match="durability"):
        ironbark.open(tmp_path / "a.ib", durability="sometimes")
    with pytest.raises(ironbark.InvalidPageSizeError, match="1000"):
        ironbark.open(tmp_path / "b.ib", page_size=1000)
    with pytest.raises(ironbark.InvalidOptionError, match="max_readers"):
        ironbark.open(tmp_path / "c.ib", max_readers=0)
    with pytest.raises(ironbark.IoError, match="does not exist"):
        ironbark.open(tmp_path / "missing.ib", create=False)
    with pytest.raises(TypeError):
        ironbark.open(tmp_path / "d.ib", map_size=1 << 30)
    with pytest.raises(OverflowError):
        ironbark.open(tmp_path / "e.ib", page_size=-1)
    garbage = tmp_path / "garbage.ib"
    garbage.write_bytes(b"x" * 16384)
    with pytest.raises(ironbark.NotAnIronbarkFileError):
        ironbark.open(garbage)


def test_put_get_delete_round_trip(db):
    with db.begin(write=True) as txn:
        assert txn.write
        assert txn.put(b"alice", b"30")
        assert txn.put(b"bob", b"25")
        assert txn.get(b"alice") == b"30"  # sees its own writes
        assert txn.delete(b"bob") is True
        assert txn.delete(b"bob") is False
        assert txn.put(b"empty", b"")
    with db.begin() as txn:
        assert not txn.write
        assert txn.get(b"alice") == b"30"
        assert txn.get(b"bob") is None
        assert txn.get(b"bob", b"default") == b"default"
        assert txn.get(b"empty") == b""
        assert b"alice" in txn
        assert b"bob" not in txn
        assert txn.count() == 2
        assert txn.trees() == ["main"]


def test_put_without_overwrite_keeps_the_old_value(db):
    with db.begin(write=True) as txn:
        assert txn.put(b"k", b"first")
        assert txn.put(b"k", b"second", overwrite=False) is False
        assert txn.get(b"k") == b"first"


def test_append_takes_keys_in_order_only(db):
    with db.begin(write=True) as txn:
        for i in range(2000):
            txn.append(b"key%05d" % i, b"v%d" % i, tree="log")
        for bad in (b"key01999", b"key00000", b""):
            with pytest.raises(ironbark.KeyOutOfOrderError, match="out of order"):
                txn.append(bad, b"late", tree="log")
        # A refused append changes nothing; the transaction goes on.
        txn.append(b"key99999", b"last", tree="log")
        txn.append(b"a", b"first", tree="other")
    with db.begin() as txn:
        keys = [k for k, _ in txn.range(tree="log")]
        assert keys == [b"key%05d" % i for i in range(2000)] + [b"key99999"]
        assert txn.get(b"key01999", tree="log") == b"v1999"
        assert txn.get(b"a", tree="other") == b"first"
    with db.begin() as txn:
        with pytest.raises(ironbark.ReadOnlyError):
            txn.append(b"zzz", b"v", tree="log")
    assert issubclass(ironbark.KeyOutOfOrderError, ironbark.Error)


def _scattered_pairs(rng, n):
    """n pairs of random keys, some of them repeated within a batch of 16
    (the engine's) and across batches, and some empty values."""
    pairs = []
    for i in range(n):
        if pairs and rng.random() < 0.15:
            key = rng.choice(pairs[-16:])[0]
        else:
            key = rng.randbytes(rng.randint(1, 40))
        pairs.append((key, rng.randbytes(rng.choice([0, 3, 100, 600])) + b"#%d" % i))
    pairs.append((pairs[-1][0], b"the later wins"))
    return pairs


def test_put_many_stores_what_puts_one_at_a_time_store(tmp_path):
    rng = random.Random(20240611)
    # Commits of a batch each, the later ones replacing some earlier keys.
    batches = [_scattered_pairs(rng, n) for n in (700, 1, 300)]
    batches[2] += rng.sample(batches[0], 50)
    one_by_one, together = tmp_path / "one_by_one.ib", tmp_path / "together.ib"
    with ironbark.open(one_by_one) as a, ironbark.open(together) as b:
        for batch in batches:
            with a.begin(write=True) as txn:
                for key, value in batch:
                    assert txn.put(key, value)
            with b.begin(write=True) as txn:
                assert txn.put_many(batch) is None
                # The transaction sees its own puts.
                assert txn.get(batch[-1][0]) == batch[-1][1]
        with a.begin() as ra, b.begin() as rb:
            expected = list(ra)
            assert list(rb) == expected
    assert len(expected) > 500
    with ironbark.open(together, create=False) as b:
        with b.begin() as txn:
            assert list(txn) == expected
            assert txn.trees() == ["main"]


def test_put_many_stops_at_a_bad_pair_with_the_pairs_before_it_stored(db):
    good = [(b"k%03d" % i, b"v%d" % i) for i in range(100)]
    bad_items = [
        ("text", b"v"),  # a key that is not bytes
        (b"k", 42),  # a value that is not bytes
        (b"k", None),
        [b"k", b"v"],  # not a tuple
        (b"k",),  # a tuple of another length
        (b"k", b"v", b"w"),
        None,
    ]
    for at, bad in zip([0, 3, 15, 16, 17, 40, 99], bad_items):
        with db.begin(write=True) as txn:
            with pytest.raises(TypeError, match="put_many"):
                txn.put_many(good[:at] + [bad] + good[at:])
            assert [k for k, _ in txn] == [k for k, _ in good[:at]], (at, bad)
            txn.abort()
    # put raises the same exception for a bad argument.
    with db.begin(write=True) as txn:
        with pytest.raises(TypeError):
            txn.put("text", b"v")
        with pytest.raises(TypeError):
            txn.put_many(42)  # not iterable
        # An engine error stops the pairs the same way; the transaction
        # goes on and commits what was stored.
        too_long = (b"x" * (db.max_key_len + 1), b"v")
        with pytest.raises(ironbark.KeyTooLargeError):
            txn.put_many(good[:20] + [too_long] + good[20:])
        assert txn.count() == 20
        txn.put_many([(b"after", b"the error")])
    with db.begin() as txn:
        assert txn.count() == 21
        assert txn.get(b"k019") == b"v19" and txn.get(b"k020") is None
        assert txn.get(b"after") == b"the error"
        with pytest.raises(ironbark.ReadOnlyError, match="put_many in a read transaction"):
            txn.put_many(good)


def test_put_many_takes_a_generator_and_converts_it_as_it_goes(db):
    taken = 0

    def pairs(n, bad_at=None):
        nonlocal taken
        for i in range(n):
            taken += 1
            yield (b"bad" if i == bad_at else b"g%04d" % i, b"v%d" % i if i != bad_at else "text")

    with db.begin(write=True) as txn:
        txn.put_many(pairs(500))
        assert taken == 500
        assert txn.count() == 500
        # Not gathered into a list first: nothing after the bad pair is taken.
        taken = 0
        with pytest.raises(TypeError, match="value of pair 250"):
            txn.put_many(pairs(1000, bad_at=250))
        assert taken == 251
        txn.put_many(iter([]))
        txn.put_many({b"from": b"a dict's items"}.items())
    with db.begin() as txn:
        assert txn.count() == 501
        assert txn.get(b"g0499") == b"v499"
        assert txn.get(b"from") == b"a dict's items"

    # An exception of the iterable itself propagates, after the pairs
    # before it are stored.
    def failing():
        yield (b"first", b"1")
        yield (b"second", b"2")
        raise LookupError("the source failed")

    with db.begin(write=True) as txn:
        with pytest.raises(LookupError, match="the source failed"):
            txn.put_many(failing())
        assert txn.get(b"first") == b"1" and txn.get(b"second") == b"2"

    # An iterable that uses the transaction while put_many holds it is
    # refused, not let in.
    with db.begin(write=True) as txn:

        def meddling():
            yield (b"m1", b"1")
            txn.get(b"m1")
            yield (b"m2", b"2")

        with pytest.raises(RuntimeError):
            txn.put_many(meddling())
        assert txn.get(b"m1") == b"1" and txn.get(b"m2") is None


def test_put_many_with_the_tree_keyword(db):
    with db.begin(write=True) as txn:
        txn.put_many([(b"k", b"in users"), (b"j", b"too")], tree="users")
        txn.put_many([(b"k", b"in main")])
        txn.put_many([], tree="created")  # creates the tree, as put would
        with pytest.raises(ironbark.InvalidTreeNameError):
            txn.put_many([(b"k", b"v")], tree="")
        txn.put_dup(b"k", b"v", tree="multi")
        with pytest.raises(ironbark.WrongTreeKindError):
            txn.put_many([(b"k", b"v")], tree="multi")
        with pytest.raises(TypeError):
            txn.put_many([(b"k", b"v")], "users")  # the tree is a keyword
    with db.begin() as txn:
        assert txn.trees() == ["created", "main", "multi", "users"]
        assert list(txn.range(tree="users")) == [(b"j", b"too"), (b"k", b"in users")]
        assert list(txn) == [(b"k", b"in main")]
        assert txn.count(tree="created") == 0


def test_the_block_commits_on_success_and_aborts_on_an_exception(db):
    with db.begin(write=True) as txn:
        txn.put(b"kept", b"1")
    with pytest.raises(RuntimeError, match="boom"):
        with db.begin(write=True) as txn:
            txn.put(b"lost", b"1")
            raise RuntimeError("boom")
    with db.begin() as txn:
        assert txn.get(b"kept") == b"1"
        assert txn.get(b"lost") is None


def test_explicit_commit_and_abort_end_the_transaction(db):
    txn = db.begin(write=True)
    txn.put(b"a", b"1")
    txn.commit()
    assert txn.ended
    for call in (lambda: txn.get(b"a"), lambda: txn.put(b"b", b"2"), txn.commit, lambda: txn.txn_id):
        with pytest.raises(ironbark.ClosedError):
            call()
    txn.abort()  # a second end by abort is harmless

    txn = db.begin(write=True)
    txn.put(b"b", b"2")
    txn.abort()
    with db.begin(write=True) as txn:
        txn.put(b"c", b"3")
        txn.commit()  # committed inside the block: the exit does nothing more
    with db.begin() as txn:
        assert list(txn) == [(b"a", b"1"), (b"c", b"3")]


def test_a_read_transaction_refuses_writes(db):
    fill(db, 3)
    with db.begin() as txn:
        with pytest.raises(ironbark.ReadOnlyError, match="put in a read transaction"):
            txn.put(b"k", b"v")
        with pytest.raises(ironbark.ReadOnlyError):
            txn.delete(b"key001")
        with pytest.raises(ironbark.ReadOnlyError):
            txn.drop_tree("main")
    with pytest.raises(ValueError):
        db.begin(nowait=True)


def test_a_snapshot_does_not_see_later_commits(db):
    fill(db, 10)
    snapshot = db.begin()
    first_id = snapshot.txn_id
    with db.begin(write=True) as txn:
        txn.put(b"key005", b"changed")
        txn.put(b"new", b"entry")
    assert snapshot.get(b"key005") == b"value-5"
    assert snapshot.get(b"new") is None
    snapshot.abort()
    with db.begin() as txn:
        assert txn.txn_id == first_id + 1
        assert txn.get(b"key005") == b"changed"


def test_named_trees(db):
    with db.begin(write=True) as txn:
        txn.put(b"k", b"in users", tree="users")
        txn.put(b"k", b"in main")
        with pytest.raises(ironbark.InvalidTreeNameError):
            txn.put(b"k", b"v", tree="")
    with db.begin() as txn:
        assert txn.get(b"k", tree="users") == b"in users"
        assert txn.get(b"k") == b"in main"
        assert txn.trees() == ["main", "users"]
        assert txn.count(tree="users") == 1
        with pytest.raises(ironbark.NoSuchTreeError, match="nope"):
            txn.get(b"k", tree="nope")
        with pytest.raises(ironbark.NoSuchTreeError):
            txn.range(tree="nope")
    with db.begin(write=True) as txn:
        assert txn.drop_tree("users") is True
        assert txn.drop_tree("users") is False
        assert txn.trees() == ["main"]


def test_an_empty_database_reads_as_empty(db):
    with db.begin() as txn:
        assert txn.get(b"anything") is None
        assert list(txn) == []
        assert list(txn.prefix(b"a")) == []
        assert txn.count() == 0
        assert txn.trees() == []
    with db.begin(write=True) as txn:
        assert txn.delete(b"anything") is False


def test_range_bounds_and_direction(db):
    fill(db, 100)
    with db.begin() as txn:
        everything = list(txn)
        assert len(everything) == 100
        assert everything[0] == (b"key000", b"value-0")
        assert everything[-1] == (b"key099", b"value-99")
        assert [k for k, _ in everything] == sorted(k for k, _ in everything)
        assert [k for k, _ in txn.range(reverse=True)] == [k for k, _ in reversed(everything)]
        keys = [k for k, _ in txn.range(b"key010", b"key020")]
        assert keys == [b"key%03d" % i for i in range(10, 20)]
        keys = [k for k, _ in txn.range(b"key010", b"key020", inclusive_end=True, reverse=True)]
        assert keys == [b"key%03d" % i for i in range(20, 9, -1)]
        assert [k for k, _ in txn.range(b"key0505")][:2] == [b"key051", b"key052"]
        assert [k for k, _ in txn.range(end=b"key003")] == [b"key000", b"key001", b"key002"]
        assert list(txn.range(b"zzz")) == []
        assert list(txn.range(b"key050", b"key010")) == []


def test_prefix(db):
    with db.begin(write=True) as txn:
        for k in [b"a", b"ab", b"abc", b"abd", b"ac", b"b", b"a\xff", b"a\xff\x01", b"\xff\xff", b"\xff\xff\x00"]:
            txn.put(k, b"v")
    with db.begin() as txn:
        assert [k for k, _ in txn.prefix(b"ab")] == [b"ab", b"abc", b"abd"]
        assert [k for k, _ in txn.prefix(b"ab", reverse=True)] == [b"abd", b"abc", b"ab"]
        assert [k for k, _ in txn.prefix(b"a\xff")] == [b"a\xff", b"a\xff\x01"]
        assert [k for k, _ in txn.prefix(b"\xff\xff")] == [b"\xff\xff", b"\xff\xff\x00"]
        assert len(list(txn.prefix(b""))) == 10
        assert list(txn.prefix(b"zz")) == []


def test_iterating_a_write_transaction_while_changing_it(db):
    fill(db, 20)
    with db.begin(write=True) as txn:
        seen = []
        for key, value in txn.range(b"key005"):
            seen.append(key)
            txn.delete(key)
            if not key.startswith(b"z"):
                txn.put(b"z" + key, value)  # sorts after every key: seen later
        moved = [b"key%03d" % i for i in range(5, 20)]
        assert seen == moved + [b"z" + k for k in moved]
        assert [k for k, _ in txn] == [b"key%03d" % i for i in range(5)]
        it = iter(txn)
    with pytest.raises(ironbark.ClosedError):
        next(it)


def test_a_read_iterator_keeps_its_snapshot_after_the_transaction(db):
    fill(db, 10)
    txn = db.begin()
    it = txn.range(b"key005")
    assert next(it) == (b"key005", b"value-5")
    txn.abort()
    assert [k for k, _ in it] == [b"key%03d" % i for i in range(6, 10)]


def test_buffers_are_zero_copy_memoryviews(db):
    fill(db, 5)
    with db.begin(buffers=True) as txn:
        value = txn.get(b"key003")
        assert isinstance(value, memoryview)
        assert value.readonly
        assert value.format == "B" and value.nbytes == 7
        assert bytes(value) == b"value-3"
        assert value.tobytes() == b"value-3"
        with pytest.raises(TypeError):
            value[0] = 0
        # Two reads of one value are views of the same bytes in the map.
        again = txn.get(b"key003")
        assert _address(value) == _address(again)
        key, val = next(txn.range(b"key001"))
        assert isinstance(key, memoryview) and bytes(key) == b"key001"
        assert bytes(val) == b"value-1"
    # The view holds its snapshot: still valid after the transaction, and
    # unaffected by later writes.
    with db.begin(write=True) as w:
        w.put(b"key003", b"overwritten")
    assert bytes(value) == b"value-3"
    stats = db.stats()
    assert stats["live_readers"] == 1  # held by the views above
    del value, again, key, val
    assert db.stats()["live_readers"] == 0


def _address(view):
    """The address of the bytes a buffer exports (memoryview has no way to say)."""
    import ctypes

    class Py_buffer(ctypes.Structure):
        _fields_ = [
            ("buf", ctypes.c_void_p),
            ("obj", ctypes.py_object),
            ("len", ctypes.c_ssize_t),
            ("itemsize", ctypes.c_ssize_t),
            ("readonly", ctypes.c_int),
            ("ndim", ctypes.c_int),
            ("format", ctypes.c_char_p),
            ("shape", ctypes.c_void_p),
            ("strides", ctypes.c_void_p),
            ("suboffsets", ctypes.c_void_p),
            ("internal", ctypes.c_void_p),
        ]

    get = ctypes.pythonapi.PyObject_GetBuffer
    get.argtypes = [ctypes.py_object, ctypes.POINTER(Py_buffer), ctypes.c_int]
    release = ctypes.pythonapi.PyBuffer_Release
    release.argtypes = [ctypes.POINTER(Py_buffer)]
    b = Py_buffer()
    assert get(view, ctypes.byref(b), 0) == 0
    try:
        return b.buf
    finally:
        release(ctypes.byref(b))


def test_write_transactions_return_copies_even_with_buffers(db):
    with db.begin(write=True, buffers=True) as txn:
        txn.put(b"k", b"v")
        assert type(txn.get(b"k")) is bytes
        assert all(type(x) is bytes for x in next(iter(txn)))


def test_limits_and_types(db):
    with db.begin(write=True) as txn:
        with pytest.raises(ironbark.KeyTooLargeError, match="larger than the limit of 1317"):
            txn.put(b"k" * 1322, b"v")
        with pytest.raises(TypeError):
            txn.put("text", b"v")
        with pytest.raises(TypeError):
            txn.put(b"k", 42)
        with pytest.raises(TypeError):
            txn.get(None)
        big = b"x" * (1 << 20)
        txn.put(b"big", big)
        assert txn.get(b"big") == big
    # The failed put left the transaction committable.
    with db.begin() as txn:
        assert len(txn.get(b"big")) == 1 << 20


def test_every_error_is_an_ironbark_error():
    names = [n for n in ironbark.__all__ if n.endswith("Error")]
    assert len(names) == 29
    for name in names:
        cls = getattr(ironbark, name)
        assert issubclass(cls, ironbark.Error) and issubclass(cls, Exception)
    # Each engine error kind has its own class; the two that refine an
    # older one stay catchable as it.
    assert issubclass(ironbark.WriteTxnOnThisThreadError, ironbark.BusyError)
    assert issubclass(ironbark.LocklessReaderError, ironbark.LockedError)
    assert not issubclass(ironbark.StaleTreeError, ironbark.TreeDroppedError)
    # A full page arena of a process that does not write is a bound, not
    # damage.
    assert not issubclass(ironbark.ArenaFullError, ironbark.CorruptedError)


def test_one_writer_at_a_time(db):
    w = db.begin(write=True)
    with pytest.raises(ironbark.BusyError):
        db.begin(write=True, nowait=True)
    # Waiting for itself would never end: refused at once, with its own
    # class (a BusyError, as before it had one).
    with pytest.raises(
        ironbark.WriteTxnOnThisThreadError, match="already holds the write transaction"
    ):
        db.begin(write=True)
    # A sync would wait for the write lock too: the engine refuses it.
    with pytest.raises(ironbark.WriteTxnOnThisThreadError, match="already holds"):
        db.sync()
    # A writer in another thread waits (with the interpreter lock released)
    # until this one commits.
    done = []

    def other():
        with db.begin(write=True) as txn:
            txn.put(b"from-thread", b"1")
        done.append(True)

    t = threading.Thread(target=other)
    t.start()
    time.sleep(0.2)
    assert not done
    w.put(b"from-main", b"1")
    w.commit()
    t.join(timeout=10)
    assert done
    with db.begin() as txn:
        assert txn.get(b"from-main") == b"1" and txn.get(b"from-thread") == b"1"


def test_readers_in_threads(db):
    fill(db, 50)
    errors = []

    def reader():
        try:
            for _ in range(20):
                with db.begin() as txn:
                    assert len(list(txn)) == 50
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=reader) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_readers_full(tmp_path):
    db = ironbark.open(tmp_path / "r.ib", max_readers=1)
    first = db.begin()
    with pytest.raises(ironbark.ReadersFullError):
        db.begin()
    first.abort()
    db.begin().abort()


def test_read_only_open(tmp_path):
    path = tmp_path / "ro.ib"
    with ironbark.open(path) as db:
        fill(db, 3)
    db = ironbark.open(path, read_only=True)
    assert db.read_only
    with pytest.raises(ironbark.ReadOnlyError):
        db.begin(write=True)
    with db.begin() as txn:
        assert txn.count() == 3


def test_stats_and_sync(db):
    fill(db, 30, tree="users")
    with db.begin(write=True, sync=False) as txn:
        txn.put(b"late", b"entry")
    s = db.stats()
    assert s["page_size"] == 4096
    assert s["durable_txn_id"] < s["last_txn_id"]
    assert s["trees"]["users"]["entries"] == 30
    assert s["trees"]["main"]["entries"] == 1
    assert s["file_size_bytes"] >= s["page_count"] * s["page_size"]
    db.sync()
    s = db.stats()
    assert s["durable_txn_id"] == s["last_txn_id"]


def test_logged_commits_on_by_default_and_off_on_request(tmp_path):
    for logged in [True, False]:
        path = tmp_path / f"logged-{logged}.ib"
        with ironbark.open(path, logged_commits=logged) as db:
            for i in range(5):
                with db.begin(write=True) as txn:
                    txn.put(b"k%d" % i, b"v")
            assert (db.stats()["logged_commits"] == 5) == logged
            assert (db.stats()["logged_commits"] == 0) == (not logged)
        with ironbark.open(path) as db:
            with db.begin() as txn:
                assert txn.count() == 5
    with ironbark.open(tmp_path / "default.ib") as db:
        with db.begin(write=True) as txn:
            txn.put(b"k", b"v")
        assert db.stats()["logged_commits"] == 1


def test_checkpoint_log_bytes_bounds_the_redo_log(tmp_path):
    # With a 16 KiB bound, 300 single-put commits of ~140-byte records
    # (about 42 KiB of log) checkpoint at least twice; with the default
    # bound (at least 64 MiB) none of them does.
    def checkpoints(**options):
        with ironbark.open(tmp_path / ("%d.ib" % len(options)), durability="none", **options) as db:
            before = db.stats()
            for i in range(300):
                with db.begin(write=True) as txn:
                    txn.put(b"key%03d" % (i % 50), b"v" * 100)
            after = db.stats()
            assert after["log_bytes"] > before["log_bytes"]
            commits = after["commits"] - before["commits"]
            logged = after["logged_commits"] - before["logged_commits"]
            return commits - logged - 1  # `stats` checkpoints once

    assert checkpoints() == 0
    assert checkpoints(checkpoint_log_bytes=16 * 1024) >= 2


def test_a_transaction_past_max_dirty_bytes_spills_and_commits(tmp_path):
    path = tmp_path / "spill.ib"
    with ironbark.open(path, max_dirty_bytes=64 * 1024) as db:
        with db.begin(write=True) as txn:
            for i in range(5000):
                txn.put(b"key%06d" % i, b"v" * 200)
        assert db.stats()["spills"] > 0
        with db.begin() as txn:
            assert txn.count() == 5000
            assert txn.get(b"key004321") == b"v" * 200
    with ironbark.open(path) as db:
        with db.begin() as txn:
            assert txn.count() == 5000


# The process that leaves a redo log of durable commits and no checkpoint:
# a base load, then one logged durable commit per key k000..k023, then an
# exit that skips the close (and so the checkpoint that would empty the log).
DAMAGED_LOG_WRITER = """
import os, sys
import ironbark
db = ironbark.open(sys.argv[1], durability="immediate", logged_commits=True)
with db.begin(write=True) as txn:
    for i in range(100):
        txn.put(b"base%03d" % i, b"b" * 40)
for i in range(24):
    with db.begin(write=True) as txn:
        txn.put(b"k%03d" % i, b"v%d" % i)
        txn.put(b"last", b"%d" % i)
os._exit(0)
"""


def log_records(log):
    """(offset, payload length, txn) of each record of the redo log's chain
    from offset 0 (docs/file-format.md, "The redo log"), up to the zeros
    the file grows by or a record that does not continue the chain."""
    records = []
    at = 0
    while at + 32 <= len(log) and log[at + 8 : at + 12] == b"IBLG":
        length = int.from_bytes(log[at + 12 : at + 16], "little")
        txn = int.from_bytes(log[at + 16 : at + 24], "little")
        if records and txn != records[-1][2] + 1:
            break
        records.append((at, length, txn))
        at += (32 + length + 7) // 8 * 8
    return records


def test_a_damaged_durable_log_record_is_corrupted_unless_salvaged(tmp_path):
    path = tmp_path / "damaged.ib"
    subprocess.run([sys.executable, "-c", DAMAGED_LOG_WRITER, str(path)], check=True)
    log_path = tmp_path / "damaged.ib-log"
    log = bytearray(log_path.read_bytes())
    records = log_records(log)
    # The last 24 records are the commits of k000..k023, in order.
    assert len(records) >= 24, records
    damaged = 12
    at, length, _ = records[-24 + damaged]
    assert length > 1
    # A payload byte: the checksum fails, and the intact records after it
    # (written once it was synced) prove it was durable.
    log[at + 32 + 1] ^= 0x55
    log_path.write_bytes(bytes(log))

    with pytest.raises(ironbark.CorruptedError, match="salvage_damaged_log"):
        ironbark.open(path)
    assert log_path.read_bytes() == log, "the failed open changed the log"

    base = [b"base%03d" % i for i in range(100)]
    kept = [b"k%03d" % i for i in range(damaged)]
    expected = sorted(base + kept + [b"last"])
    with ironbark.open(path, salvage_damaged_log=True) as db:
        with db.begin() as txn:
            assert [k for k, _ in txn] == expected
            assert txn.get(b"last") == b"%d" % (damaged - 1)
    # The salvage checkpointed: the database now opens without the option.
    with ironbark.open(path) as db:
        with db.begin() as txn:
            assert [k for k, _ in txn] == expected


def test_data_survives_reopen(tmp_path):
    path = tmp_path / "persist.ib"
    with ironbark.open(path) as db:
        fill(db, 10)
    with ironbark.open(path, create=False) as db:
        with db.begin() as txn:
            assert txn.get(b"key009") == b"value-9"


def test_the_package_ships_type_information():
    root = pathlib.Path(ironbark.__file__).parent
    assert (root / "py.typed").is_file()
    stub = (root / "_ironbark.pyi").read_text()
    for name in ("def open(", "class Database", "class Transaction", "def prefix(", "class NoSuchTreeError"):
        assert name in stub


def test_a_transaction_belongs_to_the_thread_that_began_it(db):
    fill(db, 3)
    for write in (False, True):
        txn = db.begin(write=write)
        it = iter(txn)
        next(it)
        errors = []

        def use():
            for call in (lambda: txn.get(b"key001"), lambda: next(it), txn.commit, txn.abort):
                try:
                    call()
                except RuntimeError as e:
                    errors.append(str(e))

        t = threading.Thread(target=use)
        t.start()
        t.join()
        assert len(errors) == 4
        assert all("only by the thread that began it" in e for e in errors)
        assert "another thread" not in repr(txn)
        # Still usable by its own thread.
        assert txn.get(b"key001") == b"value-1"
        assert next(it)[0] == b"key001"
        txn.commit()


def test_a_write_transaction_dropped_without_end_releases_the_lock(db):
    txn = db.begin(write=True)
    txn.put(b"k", b"v")
    del txn  # aborted
    with db.begin(write=True, nowait=True) as txn:
        assert txn.get(b"k") is None


def test_ranges_in_a_write_transaction(db):
    fill(db, 30)
    with db.begin(write=True) as txn:
        txn.put(b"key0155", b"new")  # visible to its own ranges
        keys = [k for k, _ in txn.range(b"key010", b"key020", reverse=True)]
        assert keys == [b"key019", b"key018", b"key017", b"key016", b"key0155"] + [
            b"key%03d" % i for i in range(15, 9, -1)
        ]
        assert [k for k, _ in txn.prefix(b"key015")] == [b"key015", b"key0155"]
        assert [k for k, _ in txn.range(b"key028", inclusive_end=True)] == [b"key028", b"key029"]
        txn.abort()
    with db.begin() as txn:
        assert txn.get(b"key0155") is None


def test_first_last_and_nearest_key_lookups(db):
    with db.begin(write=True) as txn:
        for k in (b"a", b"c", b"e"):
            txn.put(k, k.upper())
        txn.put(b"x", b"1", tree="other")
        # The write transaction sees its own entries.
        assert txn.first() == (b"a", b"A")
        assert txn.get_gt(b"c") == (b"e", b"E")
    with db.begin() as txn:
        assert txn.first() == (b"a", b"A")
        assert txn.last() == (b"e", b"E")
        assert txn.get_ge(b"c") == (b"c", b"C")
        assert txn.get_ge(b"d") == (b"e", b"E")
        assert txn.get_ge(b"f") is None
        assert txn.get_gt(b"c") == (b"e", b"E")
        assert txn.get_gt(b"e") is None
        assert txn.get_le(b"d") == (b"c", b"C")
        assert txn.get_le(b"c") == (b"c", b"C")
        assert txn.get_le(b"") is None
        assert txn.get_lt(b"c") == (b"a", b"A")
        assert txn.get_lt(b"a") is None
        assert txn.first(tree="other") == (b"x", b"1")
        assert txn.last(tree="other") == (b"x", b"1")
        with pytest.raises(ironbark.NoSuchTreeError):
            txn.first(tree="missing")
        with pytest.raises(TypeError):
            txn.get_ge("c")
    with db.begin(buffers=True) as txn:
        key, value = txn.get_le(b"d")
        assert isinstance(key, memoryview) and isinstance(value, memoryview)
        assert (bytes(key), bytes(value)) == (b"c", b"C")


def test_lookups_in_an_empty_database_find_nothing(db):
    with db.begin() as txn:
        assert txn.first() is None
        assert txn.last() is None
        assert txn.get_ge(b"") is None
        assert txn.get_lt(b"z") is None
        assert not txn.contains_key(b"a")
    with db.begin(write=True) as txn:
        assert txn.pop_first() is None
        assert txn.pop_last() is None
        assert txn.clear() == 0
        assert txn.delete_range() == 0
        assert txn.trees() == []  # nothing was created


def test_contains_key(db):
    with db.begin(write=True) as txn:
        txn.put(b"k", b"")
        txn.put(b"k", b"v", tree="t")
        assert txn.contains_key(b"k")
        assert not txn.contains_key(b"missing")
    with db.begin() as txn:
        assert txn.contains_key(b"k")  # an empty value is a value
        assert txn.contains_key(b"k", tree="t")
        assert not txn.contains_key(b"v", tree="t")
        with pytest.raises(ironbark.NoSuchTreeError):
            txn.contains_key(b"k", tree="missing")


def test_insert_returns_the_replaced_value(db):
    with db.begin(write=True) as txn:
        assert txn.insert(b"k", b"old") is None
        assert txn.insert(b"k", b"new") == b"old"
        assert txn.insert(b"k", b"") == b"new"
        assert txn.insert(b"k", b"last") == b""
        assert txn.insert(b"k", b"1", tree="created") is None
        with pytest.raises(ironbark.KeyTooLargeError):
            txn.insert(b"x" * 2000, b"v")
        assert txn.get(b"k") == b"last"
    with db.begin() as txn:
        assert txn.get(b"k") == b"last"
        assert txn.get(b"k", tree="created") == b"1"
        with pytest.raises(ironbark.ReadOnlyError, match="insert in a read transaction"):
            txn.insert(b"k", b"v")


def test_pop_first_and_last(db):
    fill(db, 5)
    with db.begin(write=True) as txn:
        assert txn.pop_first() == (b"key000", b"value-0")
        assert txn.pop_last() == (b"key004", b"value-4")
        assert txn.count() == 3
        assert txn.first() == (b"key001", b"value-1")
        with pytest.raises(ironbark.NoSuchTreeError):
            txn.pop_first(tree="missing")
    with db.begin() as txn:
        assert txn.count() == 3
        with pytest.raises(ironbark.ReadOnlyError):
            txn.pop_first()
        with pytest.raises(ironbark.ReadOnlyError):
            txn.pop_last()


def test_clear_empties_the_tree_and_keeps_it(db):
    fill(db, 50)
    fill(db, 3, tree="kept")
    with db.begin(write=True) as txn:
        assert txn.clear() == 50
        assert txn.count() == 0
        assert txn.clear() == 0
        txn.put(b"again", b"1")  # the tree is still there
    with db.begin() as txn:
        assert list(txn) == [(b"again", b"1")]
        assert txn.count(tree="kept") == 3
        with pytest.raises(ironbark.ReadOnlyError):
            txn.clear()


def test_delete_range_takes_the_bounds_of_range(db):
    fill(db, 100)
    with db.begin(write=True) as txn:
        assert txn.delete_range(b"key010", b"key020") == 10
        assert txn.delete_range(b"key090", b"key095", inclusive_end=True) == 6
        assert txn.delete_range(start=b"key098") == 2
        assert txn.delete_range(end=b"key005") == 5
        assert txn.delete_range(b"key050", b"key040") == 0
        assert txn.get_ge(b"key010") == (b"key020", b"value-20")
        assert txn.get_le(b"key097") == (b"key097", b"value-97")
        assert txn.count() == 77
        with pytest.raises(ironbark.NoSuchTreeError):
            txn.delete_range(tree="missing")
    with db.begin() as txn:
        assert txn.count() == 77
        assert txn.first() == (b"key005", b"value-5")
        with pytest.raises(ironbark.ReadOnlyError):
            txn.delete_range()
    with db.begin(write=True) as txn:
        assert txn.delete_range() == 77
        assert txn.first() is None


def test_savepoints_roll_back_nest_and_release(db):
    with db.begin(write=True) as txn:
        txn.put(b"kept", b"1")
        outer = txn.savepoint()
        txn.put(b"bob", b"2")
        inner = txn.savepoint()
        txn.delete(b"kept")
        txn.rollback_to(inner)
        assert txn.get(b"kept") == b"1"
        # The same savepoint again: it stays after a rollback.
        txn.put(b"x", b"3")
        txn.rollback_to(inner)
        assert txn.get(b"x") is None
        txn.rollback_to(outer)  # bob goes, and `inner` with it
        assert txn.get(b"bob") is None
        assert txn.count() == 1
        with pytest.raises(ironbark.InvalidSavepointError, match="rolled back past"):
            txn.rollback_to(inner)
        with pytest.raises(ironbark.InvalidSavepointError):
            txn.release(inner)
        assert txn.get(b"kept") == b"1"  # the refused calls changed nothing
        again = txn.savepoint()
        txn.put(b"after", b"4")
        txn.release(outer)  # and `again` with it; the changes stay
        with pytest.raises(ironbark.InvalidSavepointError, match="released"):
            txn.release(outer)
        with pytest.raises(ironbark.InvalidSavepointError):
            txn.rollback_to(again)
        assert "released" in repr(outer)
    with db.begin() as txn:
        assert sorted(k for k, _ in txn) == [b"after", b"kept"]
        with pytest.raises(ironbark.ReadOnlyError):
            txn.savepoint()
    # A savepoint of another (ended) transaction is refused.
    with db.begin(write=True) as txn:
        old = txn.savepoint()
        txn.abort()
    with db.begin(write=True) as txn:
        with pytest.raises(ironbark.InvalidSavepointError, match="another write transaction"):
            txn.rollback_to(old)
    assert issubclass(ironbark.InvalidSavepointError, ironbark.Error)


def test_multimaps_keep_sorted_sets_of_values(db):
    with db.begin(write=True) as txn:
        txn.open_multimap("empty")
        assert txn.put_dup(b"post-1", b"rust", tree="tags")  # created
        assert txn.put_dup(b"post-1", b"db", tree="tags")
        assert txn.put_dup(b"post-1", b"rust", tree="tags") is False
        assert txn.put_dup(b"post-2", b"rust", tree="tags")
        assert txn.put_dup(b"p\0z", b"", tree="tags")
        for i in range(500):
            txn.put_dup(b"many", b"v%04d" % i, tree="tags")
        assert txn.get_dups(b"post-1", tree="tags") == [b"db", b"rust"]
        assert txn.get_dups(b"post-1", tree="tags", reverse=True) == [b"rust", b"db"]
        assert txn.get_dups(b"none", tree="tags") == []
        assert txn.count_dups(b"many", tree="tags") == 500
        assert txn.count_dups(b"none", tree="tags") == 0
        assert txn.count(tree="tags") == 504
        assert txn.count(tree="empty") == 0
        assert txn.contains_dup(b"post-1", b"db", tree="tags")
        assert not txn.contains_dup(b"post-1", b"go", tree="tags")
        assert txn.delete_dup(b"post-1", b"db", tree="tags")
        assert txn.delete_dup(b"post-1", b"db", tree="tags") is False
        txn.put_dup(b"gone", b"a", tree="tags")
        txn.put_dup(b"gone", b"b", tree="tags")
        assert txn.delete_dups(b"gone", tree="tags") == 2
        assert txn.delete_dups(b"gone", tree="tags") == 0
        assert txn.multimap_range(b"p", tree="tags") == [
            (b"p\0z", b""),
            (b"post-1", b"rust"),
            (b"post-2", b"rust"),
        ]
    with db.begin(buffers=True) as txn:
        values = txn.get_dups(b"many", tree="tags")
        assert len(values) == 500 and isinstance(values[0], memoryview)
        assert [bytes(v) for v in values] == [b"v%04d" % i for i in range(500)]
        assert txn.count_dups(b"many", tree="tags") == 500
        pairs = txn.multimap_range(
            b"many", b"p\0z", tree="tags", reverse=True, inclusive_end=True
        )
        assert [(bytes(k), bytes(v)) for k, v in pairs[:2]] == [
            (b"p\0z", b""),
            (b"many", b"v0499"),
        ]
        assert len(pairs) == 501
        assert txn.multimap_range(b"post-2", b"post-2", tree="tags") == []
        with pytest.raises(ironbark.ReadOnlyError):
            txn.put_dup(b"k", b"v", tree="tags")


def test_multimap_errors(db):
    with db.begin(write=True) as txn:
        txn.put(b"k", b"v", tree="plain")
        txn.put_dup(b"k", b"v", tree="m")
        with pytest.raises(ironbark.WrongTreeKindError, match="plain"):
            txn.put_dup(b"k", b"v", tree="plain")
        with pytest.raises(ironbark.WrongTreeKindError):
            txn.get_dups(b"k", tree="plain")
        with pytest.raises(ironbark.WrongTreeKindError):
            txn.put(b"k", b"v", tree="m")
        with pytest.raises(ironbark.WrongTreeKindError):
            txn.get(b"k", tree="m")
        with pytest.raises(ironbark.WrongTreeKindError):
            txn.open_multimap("plain")
        with pytest.raises(ironbark.NoSuchTreeError):
            txn.count_dups(b"k", tree="nothing")
        with pytest.raises(ironbark.NoSuchTreeError):
            txn.delete_dup(b"k", b"v", tree="nothing")
        with pytest.raises(ironbark.PairTooLargeError):
            txn.put_dup(b"k", b"x" * db.max_key_len, tree="m")
        assert txn.get_dups(b"k", tree="m") == [b"v"]  # nothing changed
        with pytest.raises(TypeError):
            txn.put_dup(b"k", b"v")  # a multimap is always named


def test_integer_key_trees(db):
    with db.begin(write=True) as txn:
        txn.open_int_tree("ids", 4)
        txn.open_int_tree("big", 8)
        for n in [65536, 1, 256, 2, 2**32 - 1]:
            txn.put_int(n, b"v%d" % n, tree="ids")
        txn.put_int(2**64 - 1, b"max", tree="big")
        assert txn.get_int(256, tree="ids") == b"v256"
        assert txn.get_int(3, tree="ids") is None
        assert txn.get_int(3, b"default", tree="ids") == b"default"
        assert txn.get_int(2**32, tree="ids") is None  # cannot be stored
        assert txn.delete_int(2, tree="ids")
        assert txn.delete_int(2, tree="ids") is False
        # Numeric order, not the order of the decimal text.
        assert [k for k, _ in txn.int_range(tree="ids")] == [1, 256, 65536, 2**32 - 1]
        assert txn.int_range(2, 65536, tree="ids") == [(256, b"v256")]
        assert txn.int_range(2, 65536, tree="ids", inclusive_end=True, reverse=True) == [
            (65536, b"v65536"),
            (256, b"v256"),
        ]
        assert txn.count(tree="ids") == 4
    with db.begin(buffers=True) as txn:
        assert bytes(txn.get_int(2**64 - 1, tree="big")) == b"max"
        entries = txn.int_range(256, tree="ids")
        assert [(k, bytes(v)) for k, v in entries] == [
            (256, b"v256"),
            (65536, b"v65536"),
            (2**32 - 1, b"v4294967295"),
        ]
        with pytest.raises(ironbark.ReadOnlyError):
            txn.put_int(1, b"v", tree="ids")


def test_integer_key_errors(db):
    with db.begin(write=True) as txn:
        txn.open_int_tree("ids", 4)
        txn.put(b"k", b"v", tree="plain")
        with pytest.raises(ironbark.IntegerKeySizeError, match="4294967296"):
            txn.put_int(2**32, b"v", tree="ids")
        with pytest.raises(ironbark.WrongTreeKindError):
            txn.open_int_tree("ids", 8)  # another width
        with pytest.raises(ironbark.WrongTreeKindError):
            txn.open_int_tree("plain", 4)
        with pytest.raises(ironbark.WrongTreeKindError):
            txn.put_int(1, b"v", tree="plain")
        with pytest.raises(ironbark.WrongTreeKindError):
            txn.put(b"k", b"v", tree="ids")
        with pytest.raises(ironbark.WrongTreeKindError):
            txn.put_dup(b"k", b"v", tree="ids")
        with pytest.raises(ValueError, match="width 2"):
            txn.open_int_tree("odd", 2)
        with pytest.raises(ironbark.NoSuchTreeError):
            txn.put_int(1, b"v", tree="never-opened")
        with pytest.raises(OverflowError):
            txn.put_int(-1, b"v", tree="ids")
        assert txn.count(tree="ids") == 0  # the refused calls stored nothing
