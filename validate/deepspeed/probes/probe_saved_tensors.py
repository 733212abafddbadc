# Saved-tensor inventory probe: per module, the storages autograd saves for backward (deduplicated by storage),
# plus memory after forward and the backward peak. Prints JSON lines.
import os, sys, json, math, tarfile, time, gc, re
import torch, transformers
from transformers import LlamaConfig, GPT2Config, AutoModelForCausalLM

OUT = os.environ.get("OUT", "/tmp")
print("versions", torch.__version__, transformers.__version__, sys.version.split()[0], torch.cuda.get_device_name(0), flush=True)

def dump_sources():
    root = os.path.dirname(transformers.__file__)
    troot = os.path.dirname(torch.__file__)
    files = [os.path.join(root, p) for p in [
        "models/llama/modeling_llama.py", "models/gpt2/modeling_gpt2.py", "models/mistral/modeling_mistral.py",
        "models/qwen2/modeling_qwen2.py", "integrations/sdpa_attention.py", "modeling_utils.py", "modeling_layers.py",
        "loss/loss_utils.py", "activations.py", "masking_utils.py", "pytorch_utils.py", "integrations/deepspeed.py",
        "modeling_rope_utils.py", "utils/generic.py", "integrations/hub_kernels.py", "modeling_flash_attention_utils.py",
        "utils/import_utils.py", "configuration_utils.py", "models/gpt2/configuration_gpt2.py", "models/llama/configuration_llama.py"]]
    files += [os.path.join(troot, p) for p in ["utils/checkpoint.py", "nn/functional.py", "nn/modules/sparse.py", "nn/modules/normalization.py"]]
    with tarfile.open(os.path.join(OUT, "sources.tar.gz"), "w:gz") as tf:
        for f in files:
            if os.path.exists(f): tf.add(f, arcname=os.path.relpath(f, os.path.dirname(root) if f.startswith(root) else os.path.dirname(troot)))
            else: print("missing", f)

def config(name):
    if name == "llama-150m":
        return LlamaConfig(hidden_size=768, intermediate_size=2048, num_hidden_layers=12, num_attention_heads=12,
                           num_key_value_heads=12, vocab_size=32000, tie_word_embeddings=False, max_position_embeddings=4096)
    if name == "llama-1.3b":
        return LlamaConfig(hidden_size=2048, intermediate_size=5632, num_hidden_layers=24, num_attention_heads=16,
                           num_key_value_heads=4, vocab_size=32000, tie_word_embeddings=False, max_position_embeddings=4096)
    if name == "gpt2-124m":
        return GPT2Config()
    raise ValueError(name)

def make(cfg, attn):
    with torch.device("cuda"):
        try:
            m = AutoModelForCausalLM.from_config(cfg, attn_implementation=attn, dtype=torch.bfloat16)
        except TypeError:
            m = AutoModelForCausalLM.from_config(cfg, attn_implementation=attn, torch_dtype=torch.bfloat16)
    m = m.to("cuda", torch.bfloat16)
    print("made", type(m).__name__, m.config._attn_implementation, next(m.parameters()).dtype, flush=True)
    return m

def run(name, attn, ckpt, b, s, detail=False):
    torch.manual_seed(0)
    cfg = config(name)
    cfg._attn_implementation = attn
    model = make(cfg, attn)
    model.train()
    if ckpt: model.gradient_checkpointing_enable()
    model.config.use_cache = False
    names = {m: n for n, m in model.named_modules()}
    stack = ["<root>"]
    hooks = []
    for m, n in names.items():
        hooks.append(m.register_forward_pre_hook(lambda mod, a, n=n: stack.append(n)))
        hooks.append(m.register_forward_hook(lambda mod, a, o, n=n: (stack.pop(), None)[1], always_call=True))
    pstor = {p.untyped_storage().data_ptr() for p in model.parameters()} | {bb.untyped_storage().data_ptr() for bb in model.buffers()}
    recs, seen = [], {}
    def pack(t):
        try:
            st = t.untyped_storage(); key = st.data_ptr(); nb = st.nbytes()
        except Exception:
            key, nb = id(t), 0
        mod = stack[-1]
        first = key not in seen and key != 0
        if first: seen[key] = mod
        recs.append(dict(mod=mod, key=key, nbytes=nb, first=first, param=key in pstor, dtype=str(t.dtype).replace("torch.", ""),
                         shape=list(t.shape), dev=t.device.type, tbytes=t.numel() * t.element_size()))
        return t
    ids = torch.randint(0, cfg.vocab_size, (b, s), device="cuda")
    # weight grads are dropped as soon as accumulated (as DeepSpeed's hooks move them out): a layer's backward peak
    # then holds at most the grads of the weights in flight
    if FREE_GRADS:
        for p in model.parameters(): p.register_post_accumulate_grad_hook(lambda p: setattr(p, "grad", None))
    marks = []
    def mark(tag):
        marks.append((tag, torch.cuda.memory_allocated(), torch.cuda.max_memory_allocated()))
        torch.cuda.reset_peak_memory_stats()
    layer_re = re.compile(r"(\.layers\.|\.h\.)(\d+)$")
    marked = set()
    def out_hook(mod, a, o, n):
        t = o[0] if isinstance(o, tuple) else o
        if torch.is_tensor(t) and t.requires_grad and n not in marked:
            marked.add(n)
            t.register_hook(lambda g, n=n: (mark(n), None)[1])
    for m, n in names.items():
        if layer_re.search(n): hooks.append(m.register_forward_hook(lambda mod, a, o, n=n: out_hook(mod, a, o, n)))
    gc.collect(); torch.cuda.synchronize(); torch.cuda.empty_cache()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = model(input_ids=ids, labels=ids, use_cache=False)
    torch.cuda.synchronize()
    after_fwd = torch.cuda.memory_allocated(); fwd_peak = torch.cuda.max_memory_allocated()
    logits_bytes = out.logits.numel() * out.logits.element_size()
    loss = out.loss
    del out
    torch.cuda.synchronize()
    after_fwd_nologits = torch.cuda.memory_allocated()
    mark("loss")
    loss.backward()
    torch.cuda.synchronize()
    mark("end")
    bwd_peak = max(m for _, _, m in marks[1:]); after_bwd = torch.cuda.memory_allocated()
    for h in hooks: h.remove()
    grads = sum(p.grad.numel() * p.grad.element_size() for p in model.parameters() if p.grad is not None)
    # group: module path with layer index 1 kept; others summed by layer
    per_mod = {}
    for r in recs:
        if not r["first"] or r["param"] or r["dev"] != "cuda": continue
        per_mod[r["mod"]] = per_mod.get(r["mod"], 0) + r["nbytes"]
    total_saved = sum(per_mod.values())
    res = dict(model=name, attn=attn, ckpt=ckpt, b=b, s=s, base=base, after_fwd=after_fwd - base, fwd_peak=fwd_peak - base,
               logits_bytes=logits_bytes, after_fwd_nologits=after_fwd_nologits - base, bwd_peak_over_base=bwd_peak - base,
               after_bwd=after_bwd - base, grads=grads, marks=[(t, a - base, m - base) for t, a, m in marks], total_saved=total_saved, per_mod=per_mod)
    if detail:
        res["recs"] = [r for r in recs if ("layers.1." in r["mod"] or ".h.1." in r["mod"] or "layers" not in r["mod"] and ".h." not in r["mod"])]
    print("RESULT", json.dumps(res), flush=True)
    del model, loss, recs
    torch.cuda.empty_cache()
    return res

def backends():
    # which SDPA kernel transformers' sdpa path lands in
    from torch.profiler import profile, ProfilerActivity
    cfg = config("llama-1.3b"); cfg.num_hidden_layers = 1
    model = make(cfg, "sdpa").train()
    ids = torch.randint(0, cfg.vocab_size, (1, 1024), device="cuda")
    for with_mask in (False, True):
        kw = dict(attention_mask=torch.ones_like(ids)) if with_mask else {}
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            out = model(input_ids=ids, labels=ids, use_cache=False, **kw); out.loss.backward()
        names = sorted({e.key for e in prof.key_averages() if any(k in e.key.lower() for k in ("attention", "flash", "fmha", "cudnn", "efficient", "sdpa", "softmax"))})
        print("SDPA_KERNELS mask=%s" % with_mask, json.dumps(names), flush=True)

FREE_GRADS = True
if __name__ == "__main__":
    for name in ["llama-150m", "llama-1.3b", "gpt2-124m"]:
        for attn in ["sdpa", "eager"]:
            for ckpt in [False, True]:
                for b in [1, 2]:
                    try: run(name, attn, ckpt, b, 1024, detail=(b == 1))
                    except Exception as e: print("FAILED", name, attn, ckpt, b, repr(e), flush=True)
