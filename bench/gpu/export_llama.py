"""Exports a randomly initialised Llama-3.2-1B-shaped model to ONNX in fp32
(loom trains from fp32 master weights), with the weights as external data.

    python3 export_llama.py OUT_DIR [--layers N] [--shape 1b|8b]

Shape 1b (OUT_DIR/llama-1b.onnx): vocab 128256, hidden 2048, 16 layers, 32
heads, 8 KV heads, FFN 8192, tied embeddings, RoPE theta 500000 -- the shape
of torch_bench.py's model. Shape 8b (OUT_DIR/llama-8b.onnx): Llama-3-8B's
layers, hidden 4096, FFN 14336, 32/8 heads, untied output head, as many
layers as --layers says -- the shape of torch_fp8_bench.py's model.
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
ap.add_argument("--shape", choices=["1b", "8b"], default="1b")
args = ap.parse_args()

hidden, ffn, tied = (2048, 8192, True) if args.shape == "1b" else (4096, 14336, False)
cfg = LlamaConfig(vocab_size=128256, hidden_size=hidden, intermediate_size=ffn,
                  num_hidden_layers=args.layers, num_attention_heads=32, num_key_value_heads=8,
                  max_position_embeddings=8192, rms_norm_eps=1e-5, rope_theta=500000.0,
                  tie_word_embeddings=tied)
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
path = os.path.join(args.out, f"llama-{args.shape}.onnx")
# An example batch of 2: torch.export specializes a dim whose example size
# is 1, and the batch must stay dynamic for loom to specialize it.
ids = torch.randint(0, cfg.vocab_size, (2, 128), device="cuda")
seq = torch.export.Dim("seq", min=2, max=8192)
torch.onnx.export(Logits(model), (ids,), path, input_names=["input_ids"], output_names=["logits"],
                  dynamo=True, external_data=True,
                  dynamic_shapes=({0: torch.export.Dim("batch"), 1: seq},))
params = sum(p.numel() for p in model.parameters())
print(f"exported {path}: {params} parameters in {time.time() - t0:.1f} s", flush=True)
