#!/usr/bin/env python3
"""Where a data file's live branch pages lie: how many 2 MiB regions of the
file hold at least one, against how few they would fill if packed.

A lookup reads one branch per level above the leaves; a branch in a region
of its own costs a TLB entry of its own (a 4 KiB one, unless the region is
cached in a 2 MiB folio). Reads the file as docs/file-format.md lays it out,
without the engine: every page whose header says "branch" and names its own
page number is a candidate; the live ones are those reachable from the
newest root (the candidate no other candidate references, by page number
and txn, with the highest txn) through child references whose txn matches
the child's header. For a file with one tree, closed cleanly (no redo log
to replay).

Usage: scripts/branch_spread.py DATA_FILE
"""

import collections
import mmap
import struct
import sys

REGION_BYTES = 2 << 20
# Branch page kinds and their slot widths: plain (formats 4-6) and with
# child hints (format 7).
SLOT_LEN_OF_KIND = {1: 6, 4: 10}
HEADER_LEN = 32
CHILD_REF_LEN = 24


def main(path):
    with open(path, "rb") as f:
        if f.seek(0, 2) < 16:
            sys.exit(f"{path}: not an ironbark data file")
        data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    if data[0:8] != b"IRONBARK":
        sys.exit(f"{path}: not an ironbark data file")
    (page_size,) = struct.unpack_from("<I", data, 12)
    if page_size < 1024 or page_size > 65536 or page_size & (page_size - 1):
        sys.exit(f"{path}: page size {page_size} out of range")
    pages = len(data) // page_size
    branches = {}
    for pgno in range(2, pages):
        at = pgno * page_size
        slot_len = SLOT_LEN_OF_KIND.get(data[at + 16])
        if slot_len is None:
            continue
        txn, = struct.unpack_from("<Q", data, at + 8)
        own, = struct.unpack_from("<Q", data, at + 24)
        if own != pgno:
            continue
        (count,) = struct.unpack_from("<H", data, at + 18)
        if HEADER_LEN + count * slot_len > page_size:
            continue
        children = []
        for i in range(count):
            (cell,) = struct.unpack_from("<H", data, at + HEADER_LEN + slot_len * i)
            if cell + CHILD_REF_LEN > page_size:
                break
            children.append(struct.unpack_from("<QQ", data, at + cell))
        branches[pgno] = (txn, children)
    if not branches:
        print(f"{pages} pages, no branch page (a tree of one leaf)")
        return
    referenced = {child for _, children in branches.values() for child in children}
    roots = [p for p, (txn, _) in branches.items() if (p, txn) not in referenced]
    if not roots:
        sys.exit(f"{path}: every branch page is referenced by another: no root (damaged?)")
    root = max(roots, key=lambda p: branches[p][0])
    live, stack = set(), [root]
    while stack:
        pgno = stack.pop()
        if pgno in live:
            continue
        live.add(pgno)
        for child, txn in branches[pgno][1]:
            if child in branches and branches[child][0] == txn:
                stack.append(child)
    per_region = REGION_BYTES // page_size
    regions = collections.Counter(p // per_region for p in live)
    file_regions = (pages + per_region - 1) // per_region
    packed = (len(live) + per_region - 1) // per_region
    print(
        f"{pages} pages of {page_size} bytes; {len(live)} live branches "
        f"({len(branches)} pages say branch); in {len(regions)} of the file's "
        f"{file_regions} 2 MiB regions; packed, they would fill {packed}"
    )


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
