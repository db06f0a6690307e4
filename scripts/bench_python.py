#!/usr/bin/env python3
"""Benchmark of the ironbark Python package against py-lmdb (pip install
lmdb): puts, random gets and full scans through each binding, on the same
keys and values, in one process. Each workload is repeated and the best run
kept; the two engines take turns within each repetition, since other work
on the machine may come and go. Prints a markdown table of ops/s and the
ironbark/LMDB ratio.

    python3 -m venv target/bench-venv
    target/bench-venv/bin/pip install ./crates/ironbark-py lmdb
    target/bench-venv/bin/python scripts/bench_python.py --num 200000

Keys are 16-byte zero-padded decimal numbers, values 100 bytes (as in
ironbark-bench); 'fillrandom (1 put/txn)' commits num/20 single-put
transactions, and the 'large values' reads use num/100 values of 32 KiB.
Commits are not synced on either side (LMDB sync=False, ironbark
durability="none"), so the figures compare the bindings and the engines'
in-memory paths, not the disk.
"""

import argparse
import os
import random
import shutil
import sys
import tempfile
import time

import ironbark
import lmdb


def keys_and_values(num, seed):
    rng = random.Random(seed)
    keys = [b"%016d" % i for i in range(num)]
    values = [rng.randbytes(100) for _ in range(num)]
    return keys, values


class Ironbark:
    name = "ironbark"

    def __init__(self, path):
        self.db = ironbark.open(os.path.join(path, "bench.ib"), durability="none")

    def put_batched(self, pairs, batch):
        for i in range(0, len(pairs), batch):
            with self.db.begin(write=True) as txn:
                put = txn.put
                for k, v in pairs[i : i + batch]:
                    put(k, v)

    def get_all(self, keys, buffers):
        found = 0
        with self.db.begin(buffers=buffers) as txn:
            get = txn.get
            for k in keys:
                if get(k) is not None:
                    found += 1
        return found

    def scan(self, buffers):
        n = 0
        with self.db.begin(buffers=buffers) as txn:
            for _k, _v in txn:
                n += 1
        return n

    def close(self):
        self.db.close()


class Lmdb:
    name = "lmdb"

    def __init__(self, path):
        self.env = lmdb.open(path, map_size=4 << 30, sync=False, metasync=False)

    def put_batched(self, pairs, batch):
        for i in range(0, len(pairs), batch):
            with self.env.begin(write=True) as txn:
                put = txn.put
                for k, v in pairs[i : i + batch]:
                    put(k, v)

    def get_all(self, keys, buffers):
        found = 0
        with self.env.begin(buffers=buffers) as txn:
            get = txn.get
            for k in keys:
                if get(k) is not None:
                    found += 1
        return found

    def scan(self, buffers):
        n = 0
        with self.env.begin(buffers=buffers) as txn:
            for _k, _v in txn.cursor():
                n += 1
        return n

    def close(self):
        self.env.close()


def run(classes, args, keys, values):
    """ops/s per engine and workload. The engines take turns within each
    repetition (the machine's load changes over time), and the best of the
    repetitions is kept."""
    num = len(keys)
    seq = list(zip(keys, values))
    shuffled = seq[:]
    random.Random(1).shuffle(shuffled)
    small = shuffled[: max(1, num // 20)]
    lookups = keys[:]
    random.Random(2).shuffle(lookups)
    best = {cls.name: {} for cls in classes}

    def record(engine, workload, ops, seconds):
        rate = ops / seconds
        best[engine][workload] = max(best[engine].get(workload, 0.0), rate)

    def fresh(cls):
        d = tempfile.mkdtemp(prefix="bench-py-", dir=args.dir)
        return d, cls(d)

    fills = [
        ("fillseq (1000 puts/txn)", seq, 1000),
        ("fillrandom (1000 puts/txn)", shuffled, 1000),
        ("fillrandom (1 put/txn)", small, 1),
    ]
    for workload, pairs, batch in fills:
        for _ in range(args.repeat):
            for cls in classes:
                d, e = fresh(cls)
                t = time.perf_counter()
                e.put_batched(pairs, batch)
                record(cls.name, workload, len(pairs), time.perf_counter() - t)
                e.close()
                shutil.rmtree(d)

    loaded = []
    for cls in classes:
        d, e = fresh(cls)
        e.put_batched(seq, 1000)
        loaded.append((cls.name, d, e))
    for buffers in (False, True):
        kind = "buffers" if buffers else "bytes"
        for _ in range(args.repeat):
            for name, _d, e in loaded:
                t = time.perf_counter()
                found = e.get_all(lookups, buffers)
                record(name, "readrandom (%s)" % kind, num, time.perf_counter() - t)
                assert found == num, (name, found)
    for buffers in (False, True):
        kind = "buffers" if buffers else "bytes"
        for _ in range(args.repeat):
            for name, _d, e in loaded:
                t = time.perf_counter()
                n = e.scan(buffers)
                record(name, "scan (%s)" % kind, num, time.perf_counter() - t)
                assert n == num, (name, n)
    for _name, d, e in loaded:
        e.close()
        shutil.rmtree(d)

    # Large values: where zero-copy buffers avoid a 32 KiB copy per read.
    big_num = max(1, num // 100)
    rng = random.Random(3)
    big = [(keys[i], rng.randbytes(32 << 10)) for i in range(big_num)]
    big_lookups = [k for k, _ in big] * 10
    random.Random(4).shuffle(big_lookups)
    loaded = []
    for cls in classes:
        d, e = fresh(cls)
        e.put_batched(big, 100)
        loaded.append((cls.name, d, e))
    for buffers in (False, True):
        kind = "buffers" if buffers else "bytes"
        for _ in range(args.repeat):
            for name, _d, e in loaded:
                t = time.perf_counter()
                found = e.get_all(big_lookups, buffers)
                record(name, "readrandom, 32 KiB values (%s)" % kind, len(big_lookups), time.perf_counter() - t)
                assert found == len(big_lookups), (name, found)
    for _name, d, e in loaded:
        e.close()
        shutil.rmtree(d)
    return best


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--num", type=int, default=200_000, help="records (default 200000)")
    p.add_argument("--repeat", type=int, default=3, help="runs per workload; the best is kept")
    p.add_argument("--dir", default=None, help="where the databases go (default: the temp dir)")
    args = p.parse_args()

    keys, values = keys_and_values(args.num, 42)
    load = os.getloadavg()
    results = run((Ironbark, Lmdb), args, keys, values)

    print(
        "python %s, ironbark %s, py-lmdb %s (LMDB %s); %d records; load average at start %.2f %.2f %.2f"
        % (
            sys.version.split()[0],
            "0.1.0",
            lmdb.__version__,
            ".".join(map(str, lmdb.version())),
            args.num,
            *load,
        )
    )
    print()
    print("| workload | ironbark ops/s | py-lmdb ops/s | ironbark / lmdb |")
    print("|---|---:|---:|---:|")
    for w in results["ironbark"]:
        a, b = results["ironbark"][w], results["lmdb"][w]
        print("| %s | %s | %s | %.2fx |" % (w, format(round(a), ","), format(round(b), ","), a / b))


if __name__ == "__main__":
    main()
