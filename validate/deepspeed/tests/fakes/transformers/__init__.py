"""A fake of transformers' AutoConfig / AutoModelForCausalLM for the harness's tests: a tiny "causal LM" of Linear
layers on the fake torch, whose forward allocates activations on the fake GPU and saves some for backward."""
import functools
import json
import os
import types

import torch
import torch.nn as nn

__version__ = "0.0+fake"


class AutoConfig:
    @staticmethod
    def from_pretrained(path):
        with open(os.path.join(path, "config.json")) as f:
            d = json.load(f)
        cfg = types.SimpleNamespace(**d)
        cfg.vocab_size = d.get("vocab_size", 100)
        cfg.hidden = d.get("hidden_size", d.get("n_embd", 8))
        cfg.layers = min(3, d.get("num_hidden_layers", d.get("n_layer", 2)))
        cfg.experts = d.get("num_local_experts", d.get("num_experts", 0))  # a mixture of experts' (Mixtral, Qwen3-MoE)
        # The families whose config class ties the head by default (GemmaConfig, Gemma2Config, GPT2Config).
        cfg.tie_word_embeddings = d.get("tie_word_embeddings", d.get("model_type") in ("gemma", "gemma2", "gpt2"))
        return cfg


class Embedding(nn.Module):
    def __init__(self, weight):
        super().__init__()
        self.weight = weight


class Linear(nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight = nn.Parameter((n_out, n_in), torch.float32, "cpu")

    def forward(self, x):
        torch._save_for_backward(x)
        torch._save_for_backward(self.weight)  # a linear keeps its weight for backward: a parameter, not an activation
        return torch.empty(x.shape[:-1] + (self.weight.shape[0],), dtype=torch.bfloat16, device="cuda")


def checkpoint(function, *args, use_reentrant=None, **kwargs):
    return function(*args, **kwargs)


class SparseMoeBlock(nn.Module):
    """A mixture of experts' block: the router (`gate`) and the experts (one Linear standing for their 3-D
    parameters), under the family's own class name, as deepspeed.utils.set_z3_leaf_modules is handed it."""

    def __init__(self, h, experts):
        super().__init__()
        self.gate = Linear(h, experts)
        self.experts = Linear(h, h)

    def forward(self, x):
        self.gate(x)
        return self.experts(x)


class MixtralSparseMoeBlock(SparseMoeBlock):
    pass


class Qwen3MoeSparseMoeBlock(SparseMoeBlock):
    pass


MOE_BLOCKS = {"mixtral": MixtralSparseMoeBlock, "qwen3_moe": Qwen3MoeSparseMoeBlock}


class DecoderLayer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        h = cfg.hidden
        block = MOE_BLOCKS.get(getattr(cfg, "model_type", None)) if cfg.experts else None
        self.mlp = block(h, cfg.experts) if block else Linear(h, h)

    def forward(self, x):
        f = getattr(self, "_gradient_checkpointing_func", None)
        return self.mlp(x) if f is None else f(self.mlp, x)


class Inner(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.layers = nn.Module()
        for i in range(cfg.layers):
            setattr(self.layers, str(i), DecoderLayer(cfg))

    def forward(self, x):
        for _, layer in self.layers._modules.items():
            x = layer(x)
        return x


class FakeCausalLM(nn.Module):
    def __init__(self, cfg, attn):
        super().__init__()
        self.config = cfg
        cfg._attn_implementation = attn
        self.model = Inner(cfg)
        self.lm_head = Linear(cfg.hidden, cfg.vocab_size)
        # The input embedding (its weight the head's where the config ties them), kept off the module tree: the fake's
        # forward starts from hidden states, and its parameters stay those the tests count.
        weight = self.lm_head.weight if cfg.tie_word_embeddings else nn.Parameter((cfg.vocab_size, cfg.hidden),
                                                                                  torch.float32, "cpu")
        object.__setattr__(self, "_input_embeddings", Embedding(weight))

    def get_input_embeddings(self):
        return self._input_embeddings

    def get_output_embeddings(self):
        return self.lm_head

    def gradient_checkpointing_enable(self, gradient_checkpointing_kwargs=None):
        if gradient_checkpointing_kwargs is None:
            gradient_checkpointing_kwargs = {"use_reentrant": False}
        for m in self.modules():
            if isinstance(m, DecoderLayer):
                m._gradient_checkpointing_func = functools.partial(checkpoint, **gradient_checkpointing_kwargs)

    def forward(self, input_ids=None, labels=None):
        if os.environ.get("FAKE_FORWARD_RAISES") and int(os.environ.get("RANK", "0")) == 0:
            raise RuntimeError("expected mat1 and mat2 to have the same dtype, but got: float != c10::Half")
        b, s = input_ids.shape
        h = torch.empty((b, s, self.config.hidden), dtype=torch.bfloat16, device="cuda")
        h = self.model(h)
        logits = self.lm_head(h)
        kept = torch._save_for_backward(torch.empty((b, s, self.config.vocab_size), dtype=torch.float32,
                                                    device="cuda"))
        loss = torch.empty((1,), dtype=torch.float32, device="cuda")
        loss._graph = [h, logits, kept]  # freed with the loss after backward
        return types.SimpleNamespace(loss=loss, logits=None)


class AutoModelForCausalLM:
    @staticmethod
    def from_config(cfg, attn_implementation=None):
        return FakeCausalLM(cfg, attn_implementation)
