//! The seed reports, scaled to a 2-core, 24 GiB machine. Every size is a flag:
//! flags given on the command line override the preset's, so
//! `--preset=inmem --num=100000000` runs seed 000 at its full size.

pub struct Step {
    pub title: &'static str,
    pub note: &'static str,
    /// Flags applied before the user's own.
    pub flags: &'static [&'static str],
}

pub struct Preset {
    pub name: &'static str,
    pub about: &'static str,
    pub steps: &'static [Step],
}

pub const PRESETS: &[Preset] = &[
    Preset {
        name: "quick",
        about: "The default: every core workload at modest N, every engine of the build, in about 5 minutes.",
        steps: &[Step {
            title: "core workloads",
            note: "N records of 16-byte keys and 100-byte values; batched fills of 1000 puts per transaction; \
                   overwrite and deleterandom do 20k single-put transactions, the readwhilewriting writer one put per transaction; \
                   no syncs except fillsync (N/1000 single-put durable commits); smalltxn = 100 transactions \
                   x 100 random 16-byte keys into the loaded database; 1 reader thread.",
            flags: &[
                "--num=200000",
                "--reads=200000",
                "--writes=20000",
                "--threads=1",
                "--benchmarks=fillseqbatch,fillrandbatch,readrandom,readmissing,readseq,readreverse,seekrandom,overwrite,readwhilewriting,smalltxn,deleterandom,fillsync",
            ],
        }],
    },
    Preset {
        name: "inmem",
        about: "Seed 000 (Symas in-memory benchmark): bulk load, then readwhilewriting with 1, 2, 4 readers + 1 writer.",
        steps: &[
            Step {
                title: "load",
                note: "Sequential batched load of N records (16/100 bytes), 1000 per transaction, no sync. \
                       Seed 000 loads 100M; here 10M.",
                flags: &["--num=10000000", "--benchmarks=fillseqbatch"],
            },
            Step {
                title: "readwhilewriting",
                note: "1 writer (one put per transaction, random existing keys) and 1, 2, 4 readers, \
                       each reader doing --reads random lookups.",
                flags: &[
                    "--num=10000000",
                    "--reads=2000000",
                    "--threads=1,2,4",
                    "--benchmarks=readwhilewriting",
                ],
            },
        ],
    },
    Preset {
        name: "malloc",
        about: "Seed 001 (Symas, allocators): 4000-byte values, batched sequential load, 1 writer + 16 readers \
                that each read every record, under glibc malloc, jemalloc and tcmalloc.",
        steps: &[
            Step {
                title: "load",
                note: "500k records of 16-byte keys and 4000-byte values (seed 001: 2M), 1000 per transaction.",
                flags: &[
                    "--num=500000",
                    "--value_size=4000",
                    "--benchmarks=fillseqbatch",
                ],
            },
            Step {
                title: "readwhilewriting, 16 readers",
                note: "16 readers, each doing N random lookups (--reads defaults to --num), and 1 writer; \
                       per allocator (LD_PRELOAD; an allocator whose library is missing is skipped).",
                flags: &[
                    "--num=500000",
                    "--value_size=4000",
                    "--threads=16",
                    "--malloc=glibc,jemalloc,tcmalloc",
                    "--benchmarks=readwhilewriting",
                ],
            },
        ],
    },
    Preset {
        name: "rocksdb",
        about: "Seed 002 (RocksDB benchmark.sh): bulkload in random order, overwrite, readwhilewriting, readrandom.",
        steps: &[Step {
            title: "benchmark.sh",
            note: "2M records (seed 002: 900M), bulkload = random-order batched fill; overwrite = 1M single-put \
                   transactions; readwhilewriting with 1 reader; readrandom with 1 and 2 threads, 1M reads each.",
            flags: &[
                "--num=2000000",
                "--reads=1000000",
                "--writes=1000000",
                "--threads=1,2",
                "--benchmarks=fillrandbatch,overwrite,readwhilewriting,readrandom",
            ],
        }],
    },
    Preset {
        name: "smalltxn",
        about: "Seed 003 (Ayende): 100 transactions x 100 random 16-byte keys into databases of 10k and 1M records.",
        steps: &[
            Step {
                title: "10k records",
                note: "100 transactions of 100 random 16-byte keys and 100-byte values into 10k records.",
                flags: &["--num=10000", "--txns=100", "--batch_size=100", "--benchmarks=smalltxn"],
            },
            Step {
                title: "1M records",
                note: "The same into 1M records.",
                flags: &["--num=1000000", "--txns=100", "--batch_size=100", "--benchmarks=smalltxn"],
            },
            Step {
                title: "1M records, durable",
                note: "The same with an fsync per commit.",
                flags: &[
                    "--num=1000000",
                    "--txns=100",
                    "--batch_size=100",
                    "--sync",
                    "--benchmarks=smalltxn",
                ],
            },
        ],
    },
    Preset {
        name: "readscale",
        about: "Seed 004 (WiredTiger read scalability): readrandom with 1, 2, 4 threads over 10M records.",
        steps: &[Step {
            title: "readrandom scaling",
            note: "10M records (16/100 bytes); each thread does 2M random lookups (seed 004: 10M).",
            flags: &[
                "--num=10000000",
                "--reads=2000000",
                "--threads=1,2,4",
                "--benchmarks=readrandom",
            ],
        }],
    },
    LONGREADER,
];

/// Not in the seeds: the long-lived reader.
const LONGREADER: Preset = Preset {
    name: "longreader",
    about: "A read snapshot held over 10k commits of 10 random overwrites into 10k records: file growth.",
    steps: &[Step {
        title: "long-lived reader",
        note: "10k records (16-byte keys, 100-byte values); one snapshot taken, then 10k transactions of \
               10 random overwrites of loaded keys, then the snapshot is released. `held MiB` is the \
               database size after the last commit with the snapshot still held; `disk MiB` after close.",
        flags: &[
            "--num=10000",
            "--txns=10000",
            "--batch_size=10",
            "--benchmarks=longreader",
        ],
    }],
};

pub fn find(name: &str) -> Option<&'static Preset> {
    PRESETS.iter().find(|p| p.name == name)
}
