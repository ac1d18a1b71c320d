"""PyTorch's anchor for activation checkpointing: the Llama-3.2-1B shape of
torch_bench.py (../shared/reference; same config, bf16 autocast, fp32 loss
on the logits, fused AdamW, clipping at 1.0), one GPU, with torch.compile
and torch.utils.checkpoint as torchtitan applies them: each decoder layer
wrapped in a checkpoint wrapper, then compiled on its own.

    python3 torch_ac_bench.py B [T] [--policies none,selective] [--steps N]

Policies:
  none       no checkpointing;
  selective  torchtitan's op-level selective AC: per layer, save the output
             of every mm except every second one (counted per layer and
             pass), of flash/efficient/cuDNN SDPA and of reduce-scatters;
             recompute the rest (torchtitan's _save_list and _custom_policy);
  full       the whole layer recomputed from its input.

Each policy runs in this process in turn (the previous model and optimizer
freed first); a policy that runs out of GPU memory prints
{"policy": ..., "oom": true} and the next one still runs. One JSON line per
policy, torch_bench.py's fields (tokens/s, step time, peak memory
allocated) plus the policy.
"""
import argparse
import gc
import json
import time
from collections import defaultdict

import torch
import torch.nn.functional as F
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts
from transformers import LlamaConfig, LlamaForCausalLM

ap = argparse.ArgumentParser()
ap.add_argument("batch", type=int)
ap.add_argument("seq", type=int, nargs="?", default=2048)
ap.add_argument("--policies", default="none,selective")
ap.add_argument("--steps", type=int, default=8)
args = ap.parse_args()
B, T = args.batch, args.seq

# torchtitan (torchtitan/models/llama3/infra/parallelize.py): what the
# op-level policy saves.
_save_list = {
    torch.ops.aten.mm.default,
    torch.ops.aten._scaled_dot_product_efficient_attention.default,
    torch.ops.aten._scaled_dot_product_flash_attention.default,
    torch.ops._c10d_functional.reduce_scatter_tensor.default,
    torch.ops.aten.max.default,
}
if hasattr(torch.ops.aten, "_scaled_dot_product_cudnn_attention"):
    _save_list.add(torch.ops.aten._scaled_dot_product_cudnn_attention.default)


def _custom_policy(meta):
    def policy(ctx, func, *a, **k):
        mode = "recompute" if ctx.is_recompute else "forward"
        key = f"{mode}_mm_count"
        if func == torch.ops.aten.mm.default:
            meta[key] += 1
        # Saves the output of all compute ops, except every second mm.
        save = func in _save_list and not (func == torch.ops.aten.mm.default and meta[key] % 2 == 0)
        return CheckpointPolicy.MUST_SAVE if save else CheckpointPolicy.PREFER_RECOMPUTE
    return policy


def selective_context():
    return create_selective_checkpoint_contexts(_custom_policy(defaultdict(int)))


def build(policy):
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                      num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=8192,
                      rms_norm_eps=1e-5, rope_theta=500000.0, tie_word_embeddings=True,
                      attn_implementation="sdpa")
    with torch.device("cuda"):
        m = LlamaForCausalLM(cfg)
    m.train()
    layers = m.model.layers
    for i, layer in enumerate(layers):
        if policy == "selective":
            layer = checkpoint_wrapper(layer, context_fn=selective_context, preserve_rng_state=False)
        elif policy == "full":
            layer = checkpoint_wrapper(layer, preserve_rng_state=False)
        layers[i] = torch.compile(layer)
    return m, cfg


def run(policy):
    m, cfg = build(policy)
    N = sum(p.numel() for p in m.parameters())
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4, fused=True)

    def step_fn(x, y):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = m(input_ids=x, use_cache=False).logits
        loss = F.cross_entropy(logits.float().view(-1, logits.size(-1)), y.view(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    x = torch.randint(0, cfg.vocab_size, (B, T), device="cuda")
    y = torch.randint(0, cfg.vocab_size, (B, T), device="cuda")
    out = {"policy": policy, "B": B, "T": T, "params": N, "gpu": torch.cuda.get_device_name(0)}
    try:
        t0 = time.time()
        for _ in range(3):
            step_fn(x, y)
        torch.cuda.synchronize()
        warm = time.time() - t0
        torch.cuda.reset_peak_memory_stats()
        t0 = time.time()
        for _ in range(args.steps):
            loss = step_fn(x, y)
        torch.cuda.synchronize()
        dt = (time.time() - t0) / args.steps
        L, H, D = cfg.num_hidden_layers, cfg.num_attention_heads, cfg.hidden_size // cfg.num_attention_heads
        flops_per_tok = 6 * N + 6 * L * H * D * T  # torch_bench.py's convention
        out.update({"oom": False, "step_s": round(dt, 4), "tokens_per_s": round(B * T / dt),
                    "mfu_vs_989": round(B * T / dt * flops_per_tok / 989e12, 4),
                    "peak_mem_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2),
                    "warmup_s": round(warm, 1), "loss": loss.item()})
    except torch.cuda.OutOfMemoryError as e:
        out.update({"oom": True, "peak_mem_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2),
                    "error": str(e).splitlines()[0][:200]})
    return out


for p in args.policies.split(","):
    result = run(p)  # the model, optimizer and activations go with run()'s frame
    gc.collect()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    torch._dynamo.reset()
    print(json.dumps(result), flush=True)
