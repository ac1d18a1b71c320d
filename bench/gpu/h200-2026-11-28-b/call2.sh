#!/bin/bash
# call 2: elementwise_bench (AdamW and swiglu_grad with several packs in flight a thread) and
# norm_bench (the runtime's rms_norm_grad kernels by chunk height, the two-pass pieces).
set -u
R=$OUT/r; mkdir -p $R
.carry/eb/eb 8192 8192 1e-4 2>&1 | tee $R/eb.txt
.carry/eb/nb 8192 2048 2>&1 | tee $R/nb.txt
.carry/eb/nb 8192 1536 2>&1 | tee $R/nb-1536.txt
