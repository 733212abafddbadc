# Allocation timeline of one decoder layer's backward (torch.cuda.memory._record_memory_history).
import torch, json, sys, os
from transformers import LlamaConfig, GPT2Config, AutoModelForCausalLM
OUT = os.environ.get("OUT", "/tmp")
def cfgs():
    yield "llama", LlamaConfig(hidden_size=768, intermediate_size=2048, num_hidden_layers=2, num_attention_heads=12,
                       num_key_value_heads=12, vocab_size=32000, tie_word_embeddings=False)
    yield "llama-gqa", LlamaConfig(hidden_size=2048, intermediate_size=5632, num_hidden_layers=2, num_attention_heads=16,
                       num_key_value_heads=4, vocab_size=32000, tie_word_embeddings=False)
    c = GPT2Config(); c.n_layer = 2
    yield "gpt2", c
ALL = {}
for name, cfg in cfgs():
    for attn in ["eager", "sdpa"]:
        for ckpt in [False, True]:
          try:
            with torch.device("cuda"):
                m = AutoModelForCausalLM.from_config(cfg, attn_implementation=attn, dtype=torch.bfloat16)
            m = m.to("cuda", torch.bfloat16).train()
            if ckpt: m.gradient_checkpointing_enable()
            for p in m.parameters(): p.register_post_accumulate_grad_hook(lambda p: setattr(p, "grad", None))
            ids = torch.randint(0, cfg.vocab_size, (1, 1024), device="cuda")
            out = m(input_ids=ids, labels=ids, use_cache=False); out.loss.backward()  # warm-up
            del out
            torch.cuda.synchronize()
            torch.cuda.memory._record_memory_history(max_entries=200000, context="all", stacks="python")
            out = m(input_ids=ids, labels=ids, use_cache=False)
            loss = out.loss; del out
            torch.cuda.synchronize()
            marker = torch.empty(7777, dtype=torch.uint8, device="cuda"); del marker   # backward starts here
            loss.backward(); torch.cuda.synchronize()
            snap = torch.cuda.memory._snapshot()
            torch.cuda.memory._record_memory_history(enabled=None)
            ev = []
            for e in snap["device_traces"][0]:
                if e["action"] not in ("alloc", "free_completed"): continue
                fr = [f for f in e.get("frames", []) if f.get("filename", "").endswith(".py") and "torch/autograd" not in f.get("filename", "") and "torch/_tensor" not in f.get("filename","")]
                fr2 = [f for f in e.get("frames", []) if not f.get("filename", "").endswith(".py")]
                ev.append(dict(a=e["action"][0], size=e["size"], addr=e["addr"],
                               py=["%s:%s:%d" % (os.path.basename(f["filename"]), f["name"], f["line"]) for f in fr[:3]],
                               cpp=[f["name"][:90] for f in fr2[:6]]))
            ALL["%s_%s_%s" % (name, attn, "ckpt" if ckpt else "nock")] = ev
            with open(os.path.join(OUT, "micro.json"), "w") as fh:
                json.dump(ALL, fh)
            print("done", name, attn, ckpt, len(ev), flush=True)
            del m, loss; torch.cuda.empty_cache()
          except Exception as ex:
            print("FAILED", name, attn, ckpt, repr(ex)[:300], flush=True)
            try: torch.cuda.memory._record_memory_history(enabled=None)
            except Exception: pass
with open(os.path.join(OUT, "micro.json"), "w") as fh:
    json.dump(ALL, fh)
