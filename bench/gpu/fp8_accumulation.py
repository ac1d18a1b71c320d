"""How precisely the GPU's fp8 GEMMs accumulate, measured through PyTorch
(torch._scaled_mm, the GEMM torchao's float8 training runs), as the anchor
for loom's own fp8 GEMM test (unittests/runtime/Fp8CudaTest.cpp).

For random finite e4m3 operands (scales 1, so every product is exact in
f32), each output's error against the exact sum (float64 on the CPU) is
reported relative to sum_k |a_ik b_jk|, the accumulation's natural scale,
with and without fast accumulation, at the shapes loom's test uses.

    python3 bench/gpu/fp8_accumulation.py
"""
import json
import math

import torch

torch.manual_seed(0)
shapes = [(256, 192, 128), (1000, 176, 64), (4096, 1024, 4096)]
out = []
for m, n, k in shapes:
    # Random bytes as e4m3, NaN codes (0x7f, 0xff) cleared as loom's test does.
    a8 = (torch.randint(0, 256, (m, k), dtype=torch.uint8) & 0xF7).view(torch.float8_e4m3fn)
    b8 = (torch.randint(0, 256, (n, k), dtype=torch.uint8) & 0xF7).view(torch.float8_e4m3fn)
    a, b = a8.double(), b8.double()
    exact = a @ b.T
    mag = a.abs() @ b.abs().T
    one = torch.ones((), device="cuda")
    for fast in (False, True):
        got = torch._scaled_mm(a8.cuda(), b8.cuda().T, scale_a=one, scale_b=one, out_dtype=torch.float32,
                               use_fast_accum=fast).double().cpu()
        rel = ((got - exact).abs() / mag.clamp_min(1e-30)).max().item()
        row = {"m": m, "n": n, "k": k, "fast_accum": fast, "worst_err_over_sum_abs": rel,
               "log2": math.log2(rel) if rel > 0 else None}
        out.append(row)
        print(json.dumps(row), flush=True)
print(json.dumps({"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
                  "worst_log2": max(r["log2"] for r in out if r["log2"] is not None)}))
