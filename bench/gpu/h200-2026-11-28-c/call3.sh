#!/bin/bash
# call 3: activation checkpointing on the H200 (issue 16 checks 2 and 3), on call 1's bundle:
# B=4 with --ac none, selective and full beside the planner (H200 profile), then B=20, where
# torch.compile without checkpointing runs out of the H200's memory: PyTorch with torchtitan's
# selective policy, loom --ac selective and loom --ac budget at PyTorch's memory.
set -u
tar xJf .carry/gpu.tar.xz -C .carry; B=.carry/gpu
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
R=/tmp/r; mkdir -p $R
( while sleep 15; do cp /tmp/loom-bench/ac/*.txt /tmp/loom-bench/ac/*.json /tmp/loom-bench/ac/*.jsonl /tmp/loom-bench/ac/*.smi $R/ 2>/dev/null; tar czf $OUT/r.tgz.tmp -C /tmp r && mv $OUT/r.tgz.tmp $OUT/r.tgz; done ) &
LOOM_BENCH_PROFILE=planner/profiles/h200.calibrated.json AC_BENCH_B=20 AC_BENCH_SKIP_LARGEST=1 \
  timeout 570 bash bench/gpu/ac.sh $B 6 > $R/ac.txt 2>&1
kill %1 2>/dev/null
cp /tmp/loom-bench/ac/*.txt /tmp/loom-bench/ac/*.json /tmp/loom-bench/ac/*.jsonl /tmp/loom-bench/ac/*.smi $R/ 2>/dev/null
tar czf $OUT/r.tgz -C /tmp r
grep -E "^ac:|^\{" $R/ac.txt | cut -c1-1500
