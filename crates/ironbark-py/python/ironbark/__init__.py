"""ironbark: an embedded transactional ordered key-value store.

The API follows py-lmdb where it can::

    import ironbark
    db = ironbark.open("data.ib")
    with db.begin(write=True) as txn:     # commit on success, abort on error
        txn.put(b"alice", b"30")
    with db.begin() as txn:               # a read snapshot
        txn.get(b"alice")                 # b'30'
        for key, value in txn.range(b"a", b"m"):
            ...

See docs/python.md in the repository for the reference.
"""

from ._ironbark import (
    DEFAULT_TREE,
    MAX_VALUE_LEN,
    ArenaFullError,
    BusyError,
    ClosedError,
    CorruptedError,
    Database,
    Error,
    ForeignTreeError,
    IncompatibleVersionError,
    IntegerKeySizeError,
    InvalidOptionError,
    InvalidPageSizeError,
    InvalidSavepointError,
    InvalidTreeNameError,
    IoError,
    KeyOutOfOrderError,
    KeyTooLargeError,
    LockedError,
    LocklessReaderError,
    NoSuchTreeError,
    NotAnIronbarkFileError,
    PairTooLargeError,
    PoisonedError,
    RangeIterator,
    ReadersFullError,
    ReadOnlyError,
    Savepoint,
    StaleTreeError,
    Transaction,
    TreeDroppedError,
    TxnFailedError,
    ValueTooLargeError,
    WriteTxnOnThisThreadError,
    WrongTreeKindError,
    open,
)

__all__ = [
    "DEFAULT_TREE",
    "MAX_VALUE_LEN",
    "ArenaFullError",
    "BusyError",
    "ClosedError",
    "CorruptedError",
    "Database",
    "Error",
    "ForeignTreeError",
    "IncompatibleVersionError",
    "IntegerKeySizeError",
    "InvalidOptionError",
    "InvalidPageSizeError",
    "InvalidSavepointError",
    "InvalidTreeNameError",
    "IoError",
    "KeyOutOfOrderError",
    "KeyTooLargeError",
    "LockedError",
    "LocklessReaderError",
    "NoSuchTreeError",
    "NotAnIronbarkFileError",
    "PairTooLargeError",
    "PoisonedError",
    "RangeIterator",
    "ReadersFullError",
    "ReadOnlyError",
    "Savepoint",
    "StaleTreeError",
    "Transaction",
    "TreeDroppedError",
    "TxnFailedError",
    "ValueTooLargeError",
    "WriteTxnOnThisThreadError",
    "WrongTreeKindError",
    "open",
]
