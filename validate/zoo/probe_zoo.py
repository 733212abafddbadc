# What transformers itself builds from each zoo config (validate/zoo/models/<name>/config.json), recorded as the
# fixtures zsim's CPU tests read (transformers exists only on the GPU machine):
#   counts:  the config as transformers completes it (class defaults filled in), every parameter tensor (name, shape;
#            tied ones once), buffers, and the module classes of the embedding, the first two layers and the head,
#            built on the meta device (nothing allocated);
#   saved:   the bytes autograd saves per decoder layer (a saved_tensors_hooks probe, storages counted once), per
#            module, at two shapes, on the GPU with the model cut to a few layers (same widths);
#   sources: the modeling and configuration files of each family as installed (what the models follow).
# Run on the GPU machine: OUT=/tmp python3 validate/zoo/probe_zoo.py [--only counts|saved|sources] [NAME...]
import argparse, gc, json, os, re, sys, tarfile

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.environ.get("OUT", "/tmp")
LAYER_RE = re.compile(r"(?:^|\.)(?:layers|h)\.(\d+)(?:\.|$)")


def load_config(name):
    return AutoConfig.from_pretrained(os.path.join(HERE, "models", name))


def jsonable(v):
    try:
        json.dumps(v)
        return v
    except TypeError:
        return repr(v)


def counts(name):
    cfg = load_config(name)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(cfg)
    params = [[n, list(p.shape)] for n, p in model.named_parameters()]  # tied parameters appear once
    modules = []
    for n, m in model.named_modules():
        k = LAYER_RE.search(n)
        if k and int(k.group(1)) > 1:
            continue
        modules.append([n, type(m).__name__])
    return dict(name=name, model_type=cfg.model_type, model_class=type(model).__name__,
                parameters=sum(p.numel() for p in model.parameters()),
                num_parameters=model.num_parameters(), tensors=params,
                buffers=[[n, list(b.shape), str(b.dtype).replace("torch.", "")] for n, b in model.named_buffers()],
                modules=modules, layer_classes=sorted({type(m).__name__ for n, m in model.named_modules()}),
                config={k: jsonable(v) for k, v in cfg.to_dict().items()},
                defaults={k: jsonable(v) for k, v in AutoConfig.for_model(cfg.model_type).to_dict().items()})


def saved(name, layers, b, s, attn):
    cfg = load_config(name)
    cfg.num_hidden_layers = layers
    if isinstance(getattr(cfg, "layer_types", None), list):  # a per-layer list follows the cut
        cfg.layer_types = cfg.layer_types[:layers]
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = AutoModelForCausalLM.from_config(cfg, attn_implementation=attn, dtype=torch.bfloat16)
    model = model.to("cuda", torch.bfloat16).train()
    model.config.use_cache = False
    stack = ["<root>"]
    hooks = []
    for n, m in model.named_modules():
        hooks.append(m.register_forward_pre_hook(lambda mod, a, n=n: stack.append(n)))
        hooks.append(m.register_forward_hook(lambda mod, a, o, n=n: (stack.pop(), None)[1], always_call=True))
    pstor = {p.untyped_storage().data_ptr() for p in model.parameters()}
    pstor |= {x.untyped_storage().data_ptr() for x in model.buffers()}
    seen, recs = set(), []

    def pack(t):
        try:
            key, nb = t.untyped_storage().data_ptr(), t.untyped_storage().nbytes()
        except Exception:  # noqa: BLE001 (a tensor without storage)
            key, nb = id(t), 0
        if key in seen or key in pstor or t.device.type != "cuda":
            return t
        seen.add(key)
        recs.append(dict(mod=stack[-1], nbytes=nb, dtype=str(t.dtype).replace("torch.", ""), shape=list(t.shape)))
        return t

    ids = torch.randint(0, cfg.vocab_size, (b, s), device="cuda")
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = model(input_ids=ids, labels=ids, use_cache=False)
    loss = out.loss
    del out
    loss.backward()
    torch.cuda.synchronize()
    for h in hooks:
        h.remove()
    per_layer, outside = {}, {}
    for r in recs:
        k = LAYER_RE.search(r["mod"])
        if k:
            per_layer[int(k.group(1))] = per_layer.get(int(k.group(1)), 0) + r["nbytes"]
        else:
            outside[r["mod"]] = outside.get(r["mod"], 0) + r["nbytes"]
    detail = [r for r in recs if (LAYER_RE.search(r["mod"]) or [None, None])[1] in ("0", "1") or not LAYER_RE.search(r["mod"])]
    res = dict(name=name, layers=layers, b=b, s=s, attn=attn, per_layer_bytes=per_layer, outside_bytes=outside,
               records=detail)
    del model, loss
    gc.collect()
    torch.cuda.empty_cache()
    return res


FAMILY_FILES = ["modeling_utils.py", "modeling_layers.py", "activations.py", "masking_utils.py", "configuration_utils.py",
                "modeling_rope_utils.py", "integrations/sdpa_attention.py", "integrations/deepspeed.py",
                "loss/loss_utils.py", "pytorch_utils.py"]


def sources(names):
    root = os.path.dirname(transformers.__file__)
    families = sorted({load_config(n).model_type for n in names})
    dirs = {"gemma3_text": "gemma3"}
    with tarfile.open(os.path.join(OUT, "sources.tar.gz"), "w:gz") as tf:
        for fam in families:
            d = os.path.join(root, "models", dirs.get(fam, fam))
            if os.path.isdir(d):
                for f in sorted(os.listdir(d)):
                    if f.startswith(("modeling_", "configuration_")) and f.endswith(".py"):
                        tf.add(os.path.join(d, f), arcname=os.path.relpath(os.path.join(d, f), os.path.dirname(root)))
        for f in FAMILY_FILES + [os.path.join("integrations", x) for x in os.listdir(os.path.join(root, "integrations"))
                                 if "moe" in x or "hub_kernels" in x]:
            p = os.path.join(root, f)
            if os.path.exists(p):
                tf.add(p, arcname=os.path.relpath(p, os.path.dirname(root)))


# Per family, the zoo model probed for saved bytes and the layer count it is cut to (2: the first layer and one
# after it; DeepSeek's and Gemma-3's layer patterns need more to reach a layer of each kind).
SAVED = [("llama-3.2-1b", 2, "sdpa"), ("mistral-7b-v0.1", 2, "sdpa"), ("qwen2.5-0.5b", 2, "sdpa"),
         ("qwen3-0.6b", 2, "sdpa"), ("qwen3-8b", 2, "sdpa"), ("gemma-2b", 2, "sdpa"), ("gemma-2-9b", 2, "sdpa"),
         ("gemma-2-9b", 2, "eager"), ("gemma-3-1b", 2, "sdpa"), ("phi-3-mini-4k", 2, "sdpa"), ("olmo-2-7b", 2, "sdpa"),
         ("pythia-1.4b", 2, "sdpa"), ("opt-1.3b", 2, "sdpa"), ("gpt2-xl", 2, "sdpa"), ("starcoder2-3b", 2, "sdpa"),
         ("granite-3.0-2b", 2, "sdpa"), ("aya-23-8b", 2, "sdpa"), ("mistral-nemo-12b", 2, "sdpa"),
         ("llama-3.2-1b", 2, "eager"), ("qwen3-0.6b", 2, "eager"), ("olmo-2-7b", 2, "eager"), ("pythia-1.4b", 2, "eager"),
         ("mixtral-8x7b", 2, "sdpa"), ("qwen3-30b-a3b", 2, "sdpa"), ("deepseek-v2-lite", 2, "sdpa")]
SHAPES = [(1, 512), (2, 1024)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", choices=["counts", "saved", "sources"])
    ap.add_argument("names", nargs="*")
    a = ap.parse_args()
    names = a.names or sorted(os.listdir(os.path.join(HERE, "models")))
    head = dict(torch=torch.__version__, transformers=transformers.__version__, python=sys.version.split()[0],
                gpu=torch.cuda.get_device_name(0) if torch.cuda.is_available() else None)
    print("versions", json.dumps(head), flush=True)
    if a.only in (None, "sources"):
        sources(names)
    if a.only in (None, "counts"):
        rows = []
        for n in names:
            try:
                rows.append(counts(n))
                print("COUNT", n, rows[-1]["parameters"], flush=True)
            except Exception as e:  # noqa: BLE001 (recorded, not fatal)
                rows.append(dict(name=n, error=repr(e)))
                print("COUNT_FAILED", n, repr(e), flush=True)
        with open(os.path.join(OUT, "counts.json"), "w") as f:
            json.dump(dict(versions=head, models=rows), f)
    if a.only in (None, "saved"):
        rows = []
        for n, layers, attn in SAVED:
            if a.names and n not in a.names:
                continue
            for b, s in SHAPES:
                try:
                    rows.append(saved(n, layers, b, s, attn))
                    print("SAVED", n, attn, b, s, json.dumps(rows[-1]["per_layer_bytes"]), flush=True)
                except Exception as e:  # noqa: BLE001
                    rows.append(dict(name=n, layers=layers, b=b, s=s, attn=attn, error=repr(e)))
                    print("SAVED_FAILED", n, attn, b, s, repr(e), flush=True)
        with open(os.path.join(OUT, "saved.json"), "w") as f:
            json.dump(dict(versions=head, runs=rows), f)


if __name__ == "__main__":
    main()
