"""PyTorch's cuBLAS bf16 GEMMs with the vocabulary as N (logits), K (their input gradient) and M (the tied
weight's gradient), at GPT-2's 50,257 and padded to 50,264 and 50,304: the anchor for loom's padded
odd-sized GEMMs (runtime/include/loom/runtime/GemmStaging.h). One JSON line per vocabulary size:

    python3 bench/gpu/gemm_align.py
"""
import json

import torch

from attention_bench import timed  # ms per call: 3 warm-up calls, then CUDA events over 20


M, H = 8192, 1280  # gpt2-large's tokens per step and hidden size
for V in (50257, 50264, 50304):
    h = torch.randn(M, H, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(V, H, device="cuda", dtype=torch.bfloat16)
    g = torch.randn(M, V, device="cuda", dtype=torch.bfloat16)
    flops = 2 * M * H * V
    r = {"V": V, "fwd_h_wT_ms": timed(lambda: h @ w.t()), "dgrad_g_w_ms": timed(lambda: g @ w),
         "wgrad_gT_h_ms": timed(lambda: g.t() @ h)}
    r.update({k.replace("_ms", "_tflops"): round(flops / (v * 1e-3) / 1e12, 1)
              for k, v in list(r.items()) if k.endswith("_ms")})
    print(json.dumps(r), flush=True)
