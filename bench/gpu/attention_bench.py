"""PyTorch's anchor for loom's attention kernels: causal SDPA forward and
forward+backward in bf16 at the shape `loom calibrate --attention-only`
times (B=4, 32 query heads, 8 kv heads, head dim 64).

    python3 attention_bench.py [T ...]        (default T = 512 1024 2048 4096)

Two ways PyTorch may run grouped-query attention: `enable_gqa=True`, and the
kv heads repeated to 32 first (what a model without GQA support does). One
JSON line per T; FLOPs count the causal half (forward 2 B H T^2 D, backward
2.5x), the same rule as loom calibrate.
"""
import json
import sys

import torch
import torch.nn.functional as F

B, HQ, HKV, D = 4, 32, 8, 64


def timed(fn, reps=20):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn()
    stop.record()
    torch.cuda.synchronize()
    return start.elapsed_time(stop) / reps  # ms


def measure(T, gqa):
    dev, dt = "cuda", torch.bfloat16
    q = torch.randn(B, HQ, T, D, device=dev, dtype=dt, requires_grad=True)
    kv_heads = HKV if gqa else HQ
    k = torch.randn(B, kv_heads, T, D, device=dev, dtype=dt, requires_grad=True)
    v = torch.randn(B, kv_heads, T, D, device=dev, dtype=dt, requires_grad=True)
    dy = torch.randn(B, HQ, T, D, device=dev, dtype=dt)

    def fwd():
        with torch.no_grad():
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa)

    def fwd_bwd():
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa)
        torch.autograd.grad(y, (q, k, v), dy)

    return timed(fwd), timed(fwd_bwd)


if __name__ == "__main__":  # gemm_align.py imports timed()
    for T in [int(t) for t in sys.argv[1:]] or [512, 1024, 2048, 4096]:
        fwd_flops = 0.5 * 4.0 * B * HQ * T * T * D
        row = {"T": T, "B": B, "heads": HQ, "kv_heads": HKV, "head_dim": D, "gpu": torch.cuda.get_device_name(0)}
        for name, gqa in (("gqa", True), ("repeated_kv", False)):
            f, fb = measure(T, gqa)
            row[f"{name}_forward_ms"] = round(f, 4)
            row[f"{name}_fwd_bwd_ms"] = round(fb, 4)
            row[f"{name}_fwd_bwd_tflops"] = round(3.5 * fwd_flops / (fb * 1e-3) / 1e12, 1)
        row["best_fwd_bwd_ms"] = min(row["gqa_fwd_bwd_ms"], row["repeated_kv_fwd_bwd_ms"])
        print(json.dumps(row), flush=True)
