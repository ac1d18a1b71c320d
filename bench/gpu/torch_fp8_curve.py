"""PyTorch's own fp8-vs-bf16 loss gap on the run bench/gpu/fp8.sh's curves make (issue 17 check 4): the external
truth for how far an fp8 recipe's curve should sit from bf16's on this model and corpus.

  python3 bench/gpu/torch_fp8_curve.py MODE STEPS TOKENS.u16.bin OUT.jsonl     MODE: bf16 | tensorwise | rowwise

The model is export_llama.py's Llama-3.2-1B shape built the same way (same config, torch.manual_seed(0), built on
the GPU), so the initial weights are the ones loom trains from. Training matches loom train's flags in fp8.sh:
B=4, T=2048, the sequential batching rule (window i of step s starts at ((s*B+i)*T) mod (len-T-1)), AdamW lr 3e-4,
betas (0.9, 0.95), eps 1e-8, weight decay 0.1 on every parameter, linear warmup lr*min(1, (s+1)/20) then constant,
global grad-norm clip 1.0, bf16 autocast, mean cross-entropy in fp32. fp8 modes replace the decoder layers' linears
(not the embedding or the tied head) with products on torch._scaled_mm, dynamic scales from the current amax, e4m3
for inputs, weights and output gradients:
  tensorwise: one scale per operand (torchao's default recipe);
  rowwise:    one scale per row of the left operand and per column of the right, along each product's own
              contracting dim, rounded down to a power of two (torchao's rowwise recipe).
The weight gradient comes out in bf16 (as torchao's does). Eager mode: the numbers, not the speed, are the point."""
import json, sys, time
import numpy as np
import torch
import torch.nn.functional as F
from transformers import LlamaConfig, LlamaForCausalLM

mode, steps, data_path, out_path = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
assert mode in ("bf16", "tensorwise", "rowwise"), mode
B, T, LR, WARMUP = 4, 2048, 3e-4, 20
E4M3 = torch.float8_e4m3fn
FMAX = torch.finfo(E4M3).max


def quantize(t, dim):
    """t [R, C] -> (fp8 t*s, 1/s) with s = FMAX / amax over `dim` (None: the whole tensor)."""
    t = t.float()
    if dim is None:
        amax = t.abs().max()
    else:
        amax = t.abs().amax(dim=dim, keepdim=True)
    scale = FMAX / amax.clamp(min=1e-12)
    if dim is not None:  # rowwise: a power of two, rounded down
        scale = torch.exp2(torch.floor(torch.log2(scale)))
    q = (t * scale).clamp(-FMAX, FMAX).to(E4M3)
    return q, scale.reciprocal()


def mm(a, b):
    """a [M, K] @ b [K, N] on fp8, bf16 out; scales along K (the contracting dim)."""
    rowwise = mode == "rowwise"
    qa, sa = quantize(a, 1 if rowwise else None)                       # per row of a: [M, 1]
    qb, sb = quantize(b.t().contiguous(), 1 if rowwise else None)      # per row of b^T = column of b: [N, 1]
    if rowwise:
        sb = sb.t()                                                    # [1, N]
    return torch._scaled_mm(qa, qb.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)


class Fp8Matmul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):  # x [M, K] bf16, w [N, K] fp32 master -> [M, N]
        wb = w.to(torch.bfloat16)
        ctx.save_for_backward(x, wb)
        return mm(x, wb.t())

    @staticmethod
    def backward(ctx, g):
        x, wb = ctx.saved_tensors
        g = g.contiguous()
        return mm(g, wb), mm(g.t().contiguous(), x).float()


class Fp8Linear(torch.nn.Linear):
    def forward(self, x):
        shp = x.shape
        y = Fp8Matmul.apply(x.reshape(-1, shp[-1]).to(torch.bfloat16), self.weight)
        return y.reshape(*shp[:-1], -1)


cfg = LlamaConfig(vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                  num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=8192, rms_norm_eps=1e-5,
                  rope_theta=500000.0, tie_word_embeddings=True)
cfg._attn_implementation = "sdpa"
torch.manual_seed(0)
with torch.device("cuda"):
    m = LlamaForCausalLM(cfg)
if mode != "bf16":
    for layer in m.model.layers:
        for parent in (layer.self_attn, layer.mlp):
            for name, child in list(parent.named_children()):
                if isinstance(child, torch.nn.Linear):
                    new = Fp8Linear(child.in_features, child.out_features, bias=False, device="cuda")
                    new.weight = child.weight
                    setattr(parent, name, new)
m.train()
opt = torch.optim.AdamW(m.parameters(), lr=LR, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
tokens = torch.from_numpy(np.fromfile(data_path, dtype=np.uint16).astype(np.int64))
span = len(tokens) - T - 1
with open(out_path + ".tmp", "w") as out:
    t0 = time.time()
    for s in range(steps):
        for g in opt.param_groups:
            g["lr"] = LR * min(1.0, (s + 1) / WARMUP)
        rows = [tokens[((s * B + i) * T) % span:][: T + 1] for i in range(B)]
        batch = torch.stack(rows).cuda()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = m(input_ids=batch[:, :-1], use_cache=False).logits
        loss = F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), batch[:, 1:].reshape(-1))
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        out.write(json.dumps({"step": s, "loss": loss.item(), "grad_norm": norm.item(),
                              "wall_s": round(time.time() - t0, 2)}) + "\n")
import os
os.replace(out_path + ".tmp", out_path)
print(f"torch {mode}: {steps} steps, final loss {loss.item():.6f}, {time.time() - t0:.1f} s", flush=True)
