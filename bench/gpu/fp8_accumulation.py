"""How precisely the GPU's fp8 GEMMs accumulate, measured through PyTorch
(torch._scaled_mm: cuBLASLt, the GEMM torchao's float8 training runs), as
the anchor for the bound loom's GEMM test holds cuBLASLt to
(unittests/runtime/Fp8GemmCheck.h, accumulationBound).

For random finite e4m3 operands (scales 1, so every product is exact in
f32) each output's error against the exact sum (float64 on the CPU) is
reported relative to sum_k |a_ik b_jk|, the accumulation's natural scale,
with and without fast accumulation, at the shapes loom's test uses, for
signs drawn evenly ("mixed") and positive three times in four ("biased",
loom's test operands: partial sums grow as large as they can), beside
loom's bound for that K and mode. A rowwise product (outer-vector scales,
which cuBLASLt >= 12.9 runs on sm_90) shows whether this cuBLASLt accepts
them.

    python3 bench/gpu/fp8_accumulation.py
"""
import json
import math

import torch

torch.manual_seed(0)
shapes = [(256, 192, 128), (1000, 176, 64), (512, 256, 1024), (4096, 1024, 4096)]


def loom_bound(k, fast):
    """Fp8GemmCheck.h's accumulationBound: f32 sums plus Hopper's
    truncations (one per 4 products between promotions every 128)."""
    span = k if fast else min(k, 128)
    return k * 2.0**-24 + 2.0**-13 * ((span + 3) // 4)


def operands(rows, k, biased):
    codes = torch.randint(0, 128, (rows, k), dtype=torch.uint8)
    codes = torch.where(codes == 0x7F, torch.zeros_like(codes), codes)  # no NaN
    negative = torch.rand(rows, k) < (0.25 if biased else 0.5)
    return (codes | (negative.to(torch.uint8) << 7)).view(torch.float8_e4m3fn)


out = []
one = torch.ones((), device="cuda")
for m, n, k in shapes:
    for biased in (False, True):
        a8, b8 = operands(m, k, biased), operands(n, k, biased)
        a, b = a8.double(), b8.double()
        exact = a @ b.T
        mag = (a.abs() @ b.abs().T).clamp_min(1e-30)
        for fast in (False, True):
            got = torch._scaled_mm(a8.cuda(), b8.cuda().T, scale_a=one, scale_b=one,
                                   out_dtype=torch.float32, use_fast_accum=fast).double().cpu()
            rel = ((got - exact).abs() / mag).max().item()
            row = {"m": m, "n": n, "k": k, "signs": "biased" if biased else "mixed",
                   "fast_accum": fast, "worst_err_over_sum_abs": rel,
                   "log2": math.log2(rel) if rel > 0 else None,
                   "loom_bound_log2": math.log2(loom_bound(k, fast)),
                   "over_loom_bound": rel / loom_bound(k, fast)}
            out.append(row)
            print(json.dumps(row), flush=True)
# Rowwise through cuBLASLt's outer-vector scales (PyTorch's own choice on
# sm_90 with cuBLAS >= 12.9): does this cuBLASLt take them, and exactly?
m, n, k = 1000, 176, 64
a8, b8 = operands(m, k, True), operands(n, k, True)
sa = torch.exp2(torch.randint(-12, -3, (m, 1)).float())
sb = torch.exp2(torch.randint(-12, -3, (1, n)).float())
try:
    got = torch._scaled_mm(a8.cuda(), b8.cuda().T, scale_a=sa.cuda(), scale_b=sb.cuda(),
                           out_dtype=torch.float32).double().cpu()
    want = (a8.double() @ b8.double().T) * sa.double() * sb.double()
    mag = (a8.double().abs() @ b8.double().abs().T) * sa.double() * sb.double()
    rel = ((got - want).abs() / mag.clamp_min(1e-300)).max().item()
    print(json.dumps({"rowwise": "ran", "worst_err_over_sum_abs": rel}), flush=True)
except RuntimeError as e:
    print(json.dumps({"rowwise": "refused", "error": str(e).splitlines()[0]}), flush=True)
print(json.dumps({"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
                  "cublas": torch.backends.cuda.preferred_blas_library().name
                  if hasattr(torch.backends.cuda, "preferred_blas_library") else None,
                  "worst_log2": max(r["log2"] for r in out if r["log2"] is not None),
                  "worst_over_loom_bound": max(r["over_loom_bound"] for r in out)}))
