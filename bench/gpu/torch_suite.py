"""PyTorch's side of bench/gpu/suite.sh: one shape of suite_models.SHAPES, trained as
torch_bench.py (shared/reference) trains its Llama shape: SDPA attention, bf16 autocast, fused
AdamW, gradient clipping at 1.0, the model compiled (MODE compile) or eager.

    python3 torch_suite.py SHAPE MODE [WARMUP STEPS [DATA]]

With DATA (a u16 token file, as `loom train --data` reads it) step s trains on the windows loom's
step s takes (runtime/train/TokenData.cpp, sequential rule: row i starts at ((s B + i) T) mod
(len - T - 1)), steps counted from the first warm-up step, so both sides see the same tokens;
without it every step repeats one random batch.

Prints one JSON line: tokens/s, MFU (torch_bench.py's formula, 989 TFLOP/s peak), the step time
and PyTorch's allocator peak (max_memory_allocated; the whole process's peak is suite.sh's
nvidia-smi reading).
"""
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from suite_models import SHAPES, flops_per_token, make  # noqa: E402

shape, mode = sys.argv[1], sys.argv[2]
warmup = int(sys.argv[3]) if len(sys.argv) > 3 else 3
steps = int(sys.argv[4]) if len(sys.argv) > 4 else 10
B, T = SHAPES[shape]["batch"], SHAPES[shape]["seq"]
m = make(shape, "sdpa", "cuda")
m.train()
N = sum(p.numel() for p in m.parameters())
opt = torch.optim.AdamW(m.parameters(), lr=1e-4, fused=True)
vocab = m.config.vocab_size


def step_fn(x, y):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        logits = m(input_ids=x, use_cache=False).logits
    loss = F.cross_entropy(logits.float().view(-1, logits.size(-1)), y.view(-1))
    loss.backward()
    torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss


if mode == "compile":
    # As torch_bench.py: the decoder stack compiled (the loss and optimizer stay eager).
    body = m.model if hasattr(m, "model") else m.transformer
    body.compile()
data = sys.argv[5] if len(sys.argv) > 5 else ""
if data:
    import numpy as np
    tokens = np.fromfile(data, dtype=np.uint16).astype(np.int64)
    span = len(tokens) - T - 1
    if span <= 0 or int(tokens.max()) >= vocab:
        sys.exit(f"torch_suite.py: {data}: {len(tokens)} tokens (ids < {int(tokens.max()) + 1}) do not fit "
                 f"seq {T} and vocabulary {vocab}")

    def window(s):  # (x, y) of step s, on the GPU before the timing starts
        starts = [((s * B + i) * T) % span for i in range(B)]
        x = np.stack([tokens[a:a + T] for a in starts])
        y = np.stack([tokens[a + 1:a + T + 1] for a in starts])
        return torch.from_numpy(x).cuda(), torch.from_numpy(y).cuda()

    batches = [window(s) for s in range(warmup + steps)]
else:
    x = torch.randint(0, vocab, (B, T), device="cuda")
    y = torch.randint(0, vocab, (B, T), device="cuda")
    batches = [(x, y)] * (warmup + steps)
t0 = time.time()
for s in range(warmup):
    step_fn(*batches[s])
torch.cuda.synchronize()
warm = time.time() - t0
torch.cuda.reset_peak_memory_stats()
t0 = time.time()
for s in range(warmup, warmup + steps):
    loss = step_fn(*batches[s])
torch.cuda.synchronize()
dt = (time.time() - t0) / steps
tok = B * T / dt
print(json.dumps({"shape": shape, "mode": mode, "B": B, "T": T, "params": N, "step_s": round(dt, 4),
                  "tokens_per_s": round(tok), "mfu_vs_989": round(tok * flops_per_token(shape, N) / 989e12, 4),
                  "peak_mem_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2),
                  "warmup_s": round(warm, 1), "loss": loss.item(), "gpu": torch.cuda.get_device_name(0)}),
      flush=True)
