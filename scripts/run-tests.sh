#!/usr/bin/env bash
# Runs every test through CTest: the lit suites (one CTest test per suite
# directory) and the GoogleTest unit tests. CTest's closing line is the
# summary CI reads.
set -euo pipefail
BUILD=${1:-build}
cd "$BUILD"
ctest --output-on-failure -j "$(nproc)"
