"""PyTorch's own divergence between mathematically equal ways of taking one step, for loom verify's bf16 bounds.

Data parallelism over R ranks computes, in exact arithmetic, the same step as one device: each rank's mean loss
over its rows, gradients averaged. In bf16 autocast the two differ by rounding (each rank's weight gradients come
out of bf16 GEMMs over fewer rows and are rounded before they are averaged), and training amplifies the difference.
This script measures how far PyTorch itself drifts in a given regime, on one GPU: the same model, weights and
batches trained as
  whole     one batch of B rows per step (the reference, like loom's plan `1`)
  accumN    N microbatches of B/N rows with gradient accumulation (what DDP or FSDP over N ranks computes)
  rerun     whole again (the run-to-run noise of the attention kernels)
and reports, per variant, max and mean |loss - loss(whole)| over the steps (loom verify's figures).

    python3 torch_dp_equivalence.py --layers 4 --batch 8 --seq 1024 --steps 100 --lr 3e-4 --warmup 10 \
        --data test/fixtures/corpus.u16.bin

The model is bench/gpu/export_llama.py's (Llama-3.2-1B shape, seed 0, tied embeddings), so with --layers 4 these
are the weights loom verify trains in bench/gpu/verify-1b.sh; the data rule is loom's sequential batching (window i
of step s starts at ((s*B+i)*T) mod (len-T-1)); AdamW(betas 0.9/0.95, eps 1e-8, weight decay 0.1), linear warmup,
global-norm clipping at 1.0, as loom train's defaults.
"""
import argparse
import json
import time

import numpy as np
import torch
import torch.nn.functional as F
from transformers import LlamaConfig, LlamaForCausalLM

ap = argparse.ArgumentParser()
ap.add_argument("--layers", type=int, default=4)
ap.add_argument("--batch", type=int, default=8)
ap.add_argument("--seq", type=int, default=1024)
ap.add_argument("--steps", type=int, default=100)
ap.add_argument("--lr", type=float, default=3e-4)
ap.add_argument("--warmup", type=int, default=10)
ap.add_argument("--data", default="test/fixtures/corpus.u16.bin")
ap.add_argument("--variants", default="whole,accum2,accum4,rerun")
args = ap.parse_args()

tokens = torch.from_numpy(np.fromfile(args.data, dtype=np.uint16).astype(np.int64))
B, T = args.batch, args.seq


def batch(step):
    starts = [((step * B + i) * T) % (len(tokens) - T - 1) for i in range(B)]
    x = torch.stack([tokens[s:s + T] for s in starts]).cuda()
    y = torch.stack([tokens[s + 1:s + T + 1] for s in starts]).cuda()
    return x, y


cfg = LlamaConfig(vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=args.layers,
                  num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=8192, rms_norm_eps=1e-5,
                  rope_theta=500000.0, tie_word_embeddings=True)
torch.manual_seed(0)
with torch.device("cuda"):
    init = LlamaForCausalLM(cfg)
state = {k: v.detach().clone() for k, v in init.state_dict().items()}
del init


def train(micro):
    torch.manual_seed(0)
    with torch.device("cuda"):
        m = LlamaForCausalLM(cfg)
    m.config._attn_implementation = "sdpa"
    m.load_state_dict(state)
    m.train()
    opt = torch.optim.AdamW(m.parameters(), lr=args.lr, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / max(1, args.warmup)))
    losses = []
    for step in range(args.steps):
        x, y = batch(step)
        total = 0.0
        for xm, ym in zip(x.chunk(micro), y.chunk(micro)):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits = m(input_ids=xm, use_cache=False).logits
            loss = F.cross_entropy(logits.float().view(-1, logits.size(-1)), ym.view(-1))
            (loss / micro).backward()
            total += loss.item() / micro
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        losses.append(total)
    return losses


t0 = time.time()
runs = {}
for v in args.variants.split(","):
    micro = int(v[len("accum"):]) if v.startswith("accum") else 1
    runs[v] = train(micro)
    print(f"{v}: loss {runs[v][0]:.6f} -> {runs[v][-1]:.6f} ({time.time() - t0:.0f} s)", flush=True)
ref = runs["whole"]
summary = {"model": f"llama-1b shape, {args.layers} layers", "batch": B, "seq": T, "steps": args.steps,
           "lr": args.lr, "warmup": args.warmup, "torch": torch.__version__, "gpu": torch.cuda.get_device_name(0),
           "variants": {}}
for v, losses in runs.items():
    d = [abs(a - b) for a, b in zip(losses, ref)]
    summary["variants"][v] = {"max_abs_loss_diff": max(d), "mean_abs_loss_diff": sum(d) / len(d),
                              "final_loss": losses[-1], "loss": losses}
    print(f"{v:8s} max |dloss| {max(d):.3e} mean |dloss| {sum(d) / len(d):.3e}", flush=True)
print(json.dumps({k: {kk: vv for kk, vv in s.items() if kk != "loss"} for k, s in summary["variants"].items()}))
with open("/tmp/torch_dp_equivalence.json", "w") as f:
    json.dump(summary, f)
