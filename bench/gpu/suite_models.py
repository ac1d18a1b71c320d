"""The shapes of bench/gpu/suite.sh, shared by its exporter and its PyTorch side.

Each shape: a transformers config at a released model's size, the batch and sequence of one
training step (8192 tokens), and the numbers the MFU formula reads. Random weights: the suite
times steps, it does not train.
"""

SHAPES = {
    # Llama-3.2-1B: GQA 32/8 of head dim 64, SwiGLU, tied embeddings.
    "llama-1b": dict(
        config="LlamaConfig", model="LlamaForCausalLM", batch=4, seq=2048,
        kwargs=dict(vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                    num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=8192,
                    rms_norm_eps=1e-5, rope_theta=500000.0, tie_word_embeddings=True)),
    # Qwen2.5-1.5B: qkv biases (addmm: the bias in the GEMM epilogue), head dim 128, GQA 12/2,
    # vocabulary 151,936.
    "qwen2.5-1.5b": dict(
        config="Qwen2Config", model="Qwen2ForCausalLM", batch=4, seq=2048,
        kwargs=dict(vocab_size=151936, hidden_size=1536, intermediate_size=8960, num_hidden_layers=28,
                    num_attention_heads=12, num_key_value_heads=2, max_position_embeddings=32768,
                    rms_norm_eps=1e-6, rope_theta=1000000.0, tie_word_embeddings=True)),
    # Qwen3-1.7B: vocabulary 151,936, q/k RMS norms per head, head dim 128, GQA 16/8.
    "qwen3-1.7b": dict(
        config="Qwen3Config", model="Qwen3ForCausalLM", batch=4, seq=2048,
        kwargs=dict(vocab_size=151936, hidden_size=2048, intermediate_size=6144, num_hidden_layers=28,
                    num_attention_heads=16, num_key_value_heads=8, head_dim=128,
                    max_position_embeddings=32768, rms_norm_eps=1e-6, rope_theta=1000000.0,
                    tie_word_embeddings=True)),
    # GPT-2 large (774M): learned positions (1024), LayerNorm with bias, gelu (tanh), biased
    # Conv1D projections, 20 heads of 64, tied head.
    "gpt2-large": dict(
        config="GPT2Config", model="GPT2LMHeadModel", batch=8, seq=1024,
        kwargs=dict(vocab_size=50257, n_positions=1024, n_embd=1280, n_layer=36, n_head=20,
                    resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)),
}


def dims(shape):
    """(layers, heads, head dim) for the attention term of the MFU formula."""
    k = SHAPES[shape]["kwargs"]
    if "n_layer" in k:
        return k["n_layer"], k["n_head"], k["n_embd"] // k["n_head"]
    heads = k["num_attention_heads"]
    return k["num_hidden_layers"], heads, k.get("head_dim", k["hidden_size"] // heads)


def flops_per_token(shape, params):
    """6 N + 6 L H D T: torch_bench.py's rule (the causal half of attention's 12 L H D T)."""
    layers, heads, head_dim = dims(shape)
    return 6 * params + 6 * layers * heads * head_dim * SHAPES[shape]["seq"]


def logits_only(model):
    """The model as input_ids -> logits, the one output loom's importer expects."""
    import torch

    class LogitsOnly(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids):
            return self.m(input_ids=input_ids, use_cache=False).logits

    return LogitsOnly(model)


def make(shape, attn, device):
    import torch
    import transformers as tf
    s = SHAPES[shape]
    cfg = getattr(tf, s["config"])(**s["kwargs"])
    cfg._attn_implementation = attn
    torch.manual_seed(0)
    with torch.device(device):
        return getattr(tf, s["model"])(cfg)
