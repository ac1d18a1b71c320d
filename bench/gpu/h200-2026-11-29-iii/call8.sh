#!/bin/bash
# call 8 (thirteenth session): gpu-test's pipeline rows on the head (scripts/gpu-test-pp.sh on its
# own: PipelineCuda.* and PointToPoint.DeviceMemory* unit tests, pp-<m>-cuda, pp-llama-memory).
set -u
tar xJf .carry/gpu.tar.xz -C .carry
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
mkdir -p /tmp/r
timeout 140 bash scripts/gpu-test-pp.sh .carry/gpu 2>&1 | tee /tmp/r/pp.txt | grep -E "PASS|FAIL|passed|failed|skipped" | cut -c1-160
tar czf $OUT/r.tgz -C /tmp r
