"""Exports a randomly initialised Llama-3.2-1B-shaped model to ONNX in fp32
(loom trains from fp32 master weights), with the weights as external data.

    python3 export_llama.py OUT_DIR [--layers N]

Shape: vocab 128256, hidden 2048, 16 layers, 32 heads, 8 KV heads, FFN 8192,
tied embeddings, RoPE theta 500000 -- the shape of torch_bench.py's model.
Eager attention, like the fixtures, so the graph holds the decomposed
attention that loom's importer fuses. Dynamic batch and sequence dims.
"""
import argparse
import os
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM

ap = argparse.ArgumentParser()
ap.add_argument("out")
ap.add_argument("--layers", type=int, default=16)
args = ap.parse_args()

cfg = LlamaConfig(vocab_size=128256, hidden_size=2048, intermediate_size=8192,
                  num_hidden_layers=args.layers, num_attention_heads=32, num_key_value_heads=8,
                  max_position_embeddings=8192, rms_norm_eps=1e-5, rope_theta=500000.0,
                  tie_word_embeddings=True)
cfg._attn_implementation = "eager"
torch.manual_seed(0)
t0 = time.time()
with torch.device("cuda"):
    model = LlamaForCausalLM(cfg)
model.eval()


class Logits(torch.nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, input_ids):
        return self.m(input_ids=input_ids, use_cache=False).logits


os.makedirs(args.out, exist_ok=True)
path = os.path.join(args.out, "llama-1b.onnx")
# An example batch of 2: torch.export specializes a dim whose example size
# is 1, and the batch must stay dynamic for loom to specialize it.
ids = torch.randint(0, cfg.vocab_size, (2, 128), device="cuda")
seq = torch.export.Dim("seq", min=2, max=8192)
torch.onnx.export(Logits(model), (ids,), path, input_names=["input_ids"], output_names=["logits"],
                  dynamo=True, external_data=True,
                  dynamic_shapes=({0: torch.export.Dim("batch"), 1: seq},))
params = sum(p.numel() for p in model.parameters())
print(f"exported {path}: {params} parameters in {time.time() - t0:.1f} s", flush=True)
