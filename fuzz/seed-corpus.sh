#!/bin/sh
# Writes the seed corpus of every fuzz target to fuzz/corpus/<target>/
# (where `cargo fuzz run` looks): frames built the way the tests build them,
# and the frames and files of every capture in the repository.
#
# Usage: fuzz/seed-corpus.sh [OUT_DIR]    (default: fuzz/corpus)
# Runs on stable Rust; honours CARGO_TARGET_DIR.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
out=${1:-$here/corpus}
mkdir -p "$out"
# Every capture in the repository, except fuzzer output and build trees.
captures=$(find "$repo" \( -path "$repo/target" -o -path "$here/corpus" -o -path "$here/artifacts" \
    -o -path "$repo/.git" -o -name 'target*' \) -prune -o \
    \( -name '*.pcap' -o -name '*.pcapng' \) -type f -print | sort)
# shellcheck disable=SC2086 # one argument per capture path
cargo run --quiet --release --manifest-path "$here/Cargo.toml" -p inca-fuzz --bin seed -- "$out" $captures
