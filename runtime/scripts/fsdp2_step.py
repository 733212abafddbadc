"""PyTorch FSDP2 (fully_shard) step time of the Llama-shaped model zrun trains, for issue 7's comparison of
zrun's ZeRO-3 against FSDP2 on the same shape, batch, dtype, eager attention (materialised causal scores) and
full activation checkpointing. Run on the GPU machine:
  torchrun --nproc_per_node 2 runtime/scripts/fsdp2_step.py LAYERS HIDDEN FFN HEADS KV_HEADS VOCAB SEQ MICRO_BATCH
Prints one JSON line: median step time over the measured steps (after warm-up), peak memory, parameters."""
import json
import math
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.utils.checkpoint import checkpoint


class RMSNorm(nn.Module):
    def __init__(self, h, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(h))
        self.eps = eps

    def forward(self, x):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype) * self.weight


class Block(nn.Module):
    def __init__(self, h, f, heads, kv):
        super().__init__()
        self.heads, self.kv, self.d = heads, kv, h // heads
        self.attn_norm, self.mlp_norm = RMSNorm(h), RMSNorm(h)
        self.q = nn.Linear(h, h, bias=False)
        self.k = nn.Linear(h, kv * self.d, bias=False)
        self.v = nn.Linear(h, kv * self.d, bias=False)
        self.o = nn.Linear(h, h, bias=False)
        self.gate = nn.Linear(h, f, bias=False)
        self.up = nn.Linear(h, f, bias=False)
        self.down = nn.Linear(f, h, bias=False)

    def attention(self, x):
        b, s, h = x.shape
        q = self.q(x).view(b, s, self.heads, self.d).transpose(1, 2)
        k = self.k(x).view(b, s, self.kv, self.d).transpose(1, 2).repeat_interleave(self.heads // self.kv, 1)
        v = self.v(x).view(b, s, self.kv, self.d).transpose(1, 2).repeat_interleave(self.heads // self.kv, 1)
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(self.d)  # eager: the s x s scores are materialised
        mask = torch.ones(s, s, dtype=torch.bool, device=x.device).triu(1)
        probs = scores.masked_fill(mask, float("-inf")).softmax(-1)
        return self.o((probs @ v).transpose(1, 2).reshape(b, s, h))

    def inner(self, x):
        x = x + self.attention(self.attn_norm(x))
        n = self.mlp_norm(x)
        return x + self.down(F.silu(self.gate(n)) * self.up(n))

    def forward(self, x):
        return checkpoint(self.inner, x, use_reentrant=False)  # full activation checkpointing


class Model(nn.Module):
    def __init__(self, layers, h, f, heads, kv, vocab):
        super().__init__()
        self.embed = nn.Embedding(vocab, h)
        self.layers = nn.ModuleList(Block(h, f, heads, kv) for _ in range(layers))
        self.norm = RMSNorm(h)
        self.head = nn.Linear(h, vocab, bias=False)

    def forward(self, tokens):
        x = self.embed(tokens)
        for layer in self.layers:
            x = layer(x)
        return self.head(self.norm(x))


def main():
    layers, h, f, heads, kv, vocab, seq, mb = (int(a) for a in sys.argv[1:9])
    steps, warmup = 10, 3
    dist.init_process_group("nccl")
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    torch.manual_seed(0)
    with torch.device("meta"):
        model = Model(layers, h, f, heads, kv, vocab)
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.bfloat16)
    for layer in model.layers:
        fully_shard(layer, mp_policy=mp)
    fully_shard(model, mp_policy=mp)
    model.to_empty(device="cuda")
    for p in model.parameters():
        nn.init.normal_(p, std=0.02) if p.dim() > 1 else nn.init.ones_(p)
    params = sum(p.numel() for p in model.parameters())  # DTensors: numel() is the whole parameter's, not the shard's
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    tokens = torch.randint(0, vocab, (mb, seq + 1), device="cuda")
    times = []
    for i in range(warmup + steps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        logits = model(tokens[:, :-1])
        loss = F.cross_entropy(logits.float().view(-1, vocab), tokens[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        end.record()
        torch.cuda.synchronize()
        if i >= warmup:
            times.append(start.elapsed_time(end) / 1e3)
    times.sort()
    if dist.get_rank() == 0:
        print(json.dumps({"step_time_s": times[len(times) // 2], "params": params,
                          "peak_gpu_bytes": torch.cuda.max_memory_allocated(), "world": dist.get_world_size()}))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
