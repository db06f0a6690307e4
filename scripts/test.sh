#!/usr/bin/env bash
# The project's test command (README, .ci/run): formatting, lints, docs and
# every test of the workspace (the C API's tests compile and run C programs
# with gcc), then the Python package installed from source into a fresh
# virtualenv and its pytest suite, on a fresh Debian machine with a Rust
# toolchain and Python 3. Installs what it needs itself.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -x scripts/install-peers.sh ]; then
  scripts/install-peers.sh
fi
# The CLI's round-trip tests run the real LMDB tools.
if ! command -v mdb_dump >/dev/null 2>&1; then
  apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends lmdb-utils
fi
# The rocksdb peer links Debian's librocksdb (never the bundled build).
export ROCKSDB_LIB_DIR="${ROCKSDB_LIB_DIR:-/usr/lib/$(gcc -print-multiarch)}"

# The engine's optional codec for serde types (typed::SerdeBincode) is
# built and tested too.
features=(--features ironbark/serde)
if [ -f crates/ironbark-bench/Cargo.toml ] && grep -q '^debian-peers' crates/ironbark-bench/Cargo.toml; then
  features+=(--features ironbark-bench/debian-peers)
fi

rustup component add rustfmt clippy >/dev/null 2>&1 || true
cargo fmt --all -- --check
cargo clippy --workspace --all-targets "${features[@]}" -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps
cargo test --workspace --release "${features[@]}"
# Model check of the reader/writer publication protocol (loom), in a
# target directory of its own so the main build is not invalidated.
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p ironbark --release --lib loom

# The Python package, installed from source into a fresh virtualenv the way
# the README says (pip fetches maturin from PyPI), then its tests, which run
# the README's Python quick start too.
if ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
  apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3-venv python3-pip
fi
venv=target/py-venv
python3 -m venv --clear "$venv"
"$venv/bin/pip" install --quiet pytest mypy
"$venv/bin/pip" install --quiet ./crates/ironbark-py
"$venv/bin/python" -m pytest -p no:cacheprovider crates/ironbark-py/tests
