#!/usr/bin/env bash
# Installs the Debian packages that the feature-gated peers of ironbark-bench
# link against, plus the allocators of the `malloc` preset.
#
#   rocksdb     -> librocksdb-dev (7.8) + libclang-dev (bindgen of rocksdb =0.20.1)
#   leveldb     -> libleveldb-dev (1.23)
#   wiredtiger  -> libwiredtiger-dev (3.2.1)
#   bdb         -> libdb5.3-dev
#   malloc      -> libjemalloc2, libtcmalloc-minimal4
#
# Then build with, e.g.:
#   ROCKSDB_LIB_DIR=/usr/lib/x86_64-linux-gnu cargo build --release -p ironbark-bench \
#       --features rocksdb,leveldb,wiredtiger,bdb
set -euo pipefail

SUDO=""
if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update
$SUDO apt-get install -y --no-install-recommends \
    build-essential pkg-config \
    libclang-dev \
    librocksdb-dev \
    libleveldb-dev \
    libwiredtiger-dev \
    libdb5.3-dev \
    libjemalloc2 \
    libtcmalloc-minimal4 \
    fonts-dejavu-core
