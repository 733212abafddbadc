"""DeepSpeed's own buffers (a walk of the optimizer's and engine's attributes summing storages once each) and the
inventory of the tensors autograd saves for backward (one extra forward at world 1)."""
import collections
import re

from .collectives import _is_tensor


TOP_PATHS = 40           # DeepSpeed buffer paths listed


# ----------------------------------------------------------------------------------------------------------------
# DeepSpeed's own buffers: a walk of the optimizer's (and engine's) attributes summing storages once each


def _walkable(obj):
    """Objects whose attributes the buffer walk enters: DeepSpeed's and torch.optim's."""
    mod = type(obj).__module__ or ""
    return mod.startswith("deepspeed") or mod.startswith("torch.optim")


class BufferWalk:
    """Sums tensors' storage bytes per attribute path, each storage once (the first path that reaches it).
    `tensor_info(t)` -> (storage key, bytes, 'cuda' | 'cpu' | 'cpu_pinned' | other) or None; `skip(obj)` -> True
    for objects never entered (the model's modules). Lists' indices and non-string dict keys read [*]."""

    def __init__(self, tensor_info, skip=lambda o: False, walkable=_walkable, max_depth=8, max_items=100000):
        self.tensor_info = tensor_info
        self.skip = skip
        self.walkable = walkable
        self.max_depth = max_depth
        self.max_items = max_items
        self.seen_storage = set()
        self.seen_obj = set()
        self.paths = {}      # (device kind, path) -> [bytes, tensors]

    def add_tensor(self, t, path, depth):
        info = self.tensor_info(t)
        if info is not None:
            key, nbytes, kind = info
            if key not in self.seen_storage:
                self.seen_storage.add(key)
                e = self.paths.setdefault((kind, path), [0, 0])
                e[0] += nbytes
                e[1] += 1
        attrs = getattr(t, "__dict__", None)  # DeepSpeed hangs ds_tensor, ds_secondary_tensor, ... on parameters
        if attrs and depth < self.max_depth:
            for name, v in list(attrs.items()):
                if _is_tensor(v) or isinstance(v, (list, tuple, dict)) or self.walkable(v):
                    self.walk(v, f"{path}.{name}", depth + 1)

    def walk(self, obj, path, depth=0):
        if obj is None or depth > self.max_depth or isinstance(obj, (str, bytes, int, float, bool)):
            return
        if _is_tensor(obj):
            self.add_tensor(obj, path, depth)
            return
        oid = id(obj)
        if oid in self.seen_obj or self.skip(obj):
            return
        self.seen_obj.add(oid)
        if isinstance(obj, dict):
            for i, (k, v) in enumerate(list(obj.items())):
                if i >= self.max_items:
                    break
                self.walk(v, f"{path}[{k!r}]" if isinstance(k, str) else f"{path}[*]", depth + 1)
            return
        if isinstance(obj, (list, tuple, set, frozenset, collections.deque)):
            for i, v in enumerate(list(obj)):
                if i >= self.max_items:
                    break
                self.walk(v, f"{path}[*]", depth + 1)
            return
        if not self.walkable(obj):
            return
        attrs = getattr(obj, "__dict__", None)
        if not attrs:
            return
        for name, v in list(attrs.items()):
            shown = name
            for c in type(obj).__mro__:  # name-mangled private attributes: _Class__x -> __x
                pre = f"_{c.__name__}__"
                if name.startswith(pre):
                    shown = name[len(pre) - 2:]
                    break
            self.walk(v, f"{path}.{shown}", depth + 1)

    def report(self, top=TOP_PATHS):
        by_kind = {}
        for (kind, path), (b, n) in self.paths.items():
            by_kind.setdefault(kind, []).append((path, b, n))
        out = {}
        for kind, items in sorted(by_kind.items()):
            items.sort(key=lambda x: (-x[1], x[0]))
            out[kind] = {
                "total_bytes": sum(b for _, b, _ in items),
                "paths": [{"path": p, "bytes": b, "tensors": n} for p, b, n in items[:top]],
                "other_bytes": sum(b for _, b, _ in items[top:]),
                "other_paths": max(0, len(items) - top),
            }
        return out


# ----------------------------------------------------------------------------------------------------------------
# Saved-activation inventory summary (pure)


LAYER_RE = re.compile(r"(?:^|\.)(?:layers|h|layer|blocks)\.(\d+)(?:\.|$)")


def layer_of(path):
    m = LAYER_RE.search(path or "")
    return int(m.group(1)) if m else None


def summarize_saved(records, tokens, listed=80):
    """records: dicts {module, cls, shape, dtype, nbytes, device, param, refs} (one per storage, in save order).
    Activation bytes are CUDA storages that are not parameters."""
    acts = [r for r in records if not r["param"] and r["device"] == "cuda"]
    total = sum(r["nbytes"] for r in acts)
    by_class = {}
    per_layer = collections.Counter()
    by_path = {}
    for r in acts:
        e = by_class.setdefault(r["cls"], {"class": r["cls"], "bytes": 0, "count": 0})
        e["bytes"] += r["nbytes"]
        e["count"] += 1
        li = layer_of(r["module"])
        if li is not None:
            per_layer[li] += r["nbytes"]
        if li is None or li == 0:
            p = by_path.setdefault(r["module"], {"module": r["module"], "class": r["cls"], "bytes": 0, "count": 0})
            p["bytes"] += r["nbytes"]
            p["count"] += 1
    for d in list(by_class.values()) + list(by_path.values()):
        d["bytes_per_token"] = d["bytes"] / tokens if tokens else None
    n_layers = (max(per_layer) + 1) if per_layer else 0

    def tensor_row(r):
        return {"module": r["module"], "class": r["cls"], "shape": list(r["shape"]), "dtype": r["dtype"],
                "bytes": r["nbytes"], "refs": r["refs"]}

    layer0 = [tensor_row(r) for r in acts if layer_of(r["module"]) == 0]
    outside = [tensor_row(r) for r in acts if layer_of(r["module"]) is None]
    params = [r for r in records if r["param"]]
    return {
        "tokens": tokens,
        "activation_bytes": total,
        "activation_bytes_per_token": total / tokens if tokens else None,
        "tensors": len(acts),
        "parameter_storages": len(params),
        "parameter_storage_bytes": sum(r["nbytes"] for r in params),
        "non_cuda_tensors": sum(1 for r in records if r["device"] != "cuda"),
        "by_class": sorted(by_class.values(), key=lambda d: (-d["bytes"], d["class"])),
        "per_layer_bytes": [per_layer.get(i, 0) for i in range(n_layers)],
        "by_module": sorted(by_path.values(), key=lambda d: (-d["bytes"], d["module"])),
        "layer0_tensors": layer0[:listed],
        "outside_layer_tensors": outside[:listed],
    }


def _tensor_info_fn(torch):
    def info(t):
        try:
            st = t.untyped_storage()
            ptr = int(st.data_ptr())
            nbytes = int(st.nbytes())
        except Exception:
            return None
        if nbytes == 0 or ptr == 0:
            return None
        if t.is_cuda:
            kind = "cuda"
        elif t.device.type == "cpu":
            try:
                kind = "cpu_pinned" if t.is_pinned() else "cpu"
            except Exception:
                kind = "cpu"
        else:
            kind = t.device.type
        return ((t.device.type, ptr), nbytes, kind)
    return info


def deepspeed_buffers(torch, engine):
    """Storage bytes of DeepSpeed's optimizer (and the engine's own attributes), then the module's parameters and
    gradients not already counted, per attribute path."""
    import torch.nn as nn
    info = _tensor_info_fn(torch)
    w = BufferWalk(info, skip=lambda o: isinstance(o, nn.Module))
    opt = getattr(engine, "optimizer", None)
    w.walk(opt, "optimizer")
    skip_engine = {"module", "optimizer", "basic_optimizer", "client_optimizer", "client_model_parameters",
                   "_modules", "_parameters", "_buffers"}
    for name, v in list(vars(engine).items()):
        if name in skip_engine or isinstance(v, nn.Module):
            continue
        w.walk(v, f"engine.{name}", 1)
    module = engine.module
    for p in module.parameters():
        w.add_tensor(p, "module.parameters", 1)
        g = p.grad
        if g is not None:
            w.add_tensor(g, "module.grads", 1)
    for b in module.buffers():
        w.add_tensor(b, "module.buffers", 1)
    rep = w.report()
    # Independent totals: the module's parameters and gradients on the GPU (unique storages).
    ps, gs = {}, {}
    for p in module.parameters():
        i = info(p)
        if i and i[2] == "cuda":
            ps[i[0]] = i[1]
        if p.grad is not None:
            i = info(p.grad)
            if i and i[2] == "cuda":
                gs[i[0]] = i[1]
    torch.cuda.synchronize()
    alloc = int(torch.cuda.memory_allocated())
    cuda_total = rep.get("cuda", {}).get("total_bytes", 0)
    inner = getattr(opt, "optimizer", None)
    return {
        "optimizer_class": type(opt).__module__ + "." + type(opt).__name__ if opt is not None else None,
        "inner_optimizer_class": (type(inner).__module__ + "." + type(inner).__name__) if inner is not None else None,
        "by_device": rep,
        "allocated_bytes_at_walk": alloc,
        "attributed_cuda_bytes": cuda_total,
        "unattributed_cuda_bytes": alloc - cuda_total,
        "module_parameter_cuda_bytes": sum(ps.values()),
        "module_grad_cuda_bytes": sum(gs.values()),
    }


def saved_activation_inventory(torch, engine, batch):
    """One more forward under saved_tensors_hooks: each tensor autograd saves (deduplicated by storage), attributed
    to the innermost module running (forward pre / post hooks keep the stack)."""
    import torch.nn as nn
    model = engine.module
    names = {id(m): n for n, m in model.named_modules()}
    stack = []
    param_ptrs = collections.Counter()  # storages of the parameters of the modules running now
    added = {}                          # id(module) -> [the pointers its pre-hook added], one list per entry
    records = collections.OrderedDict()
    handles = []

    def storage(t):
        try:
            st = t.untyped_storage()
            return int(st.data_ptr()), int(st.nbytes())
        except Exception:
            return 0, 0

    def pre(mod, args):
        # Runs after DeepSpeed's own pre-forward hook (registered at initialize), so stage 3 has gathered them.
        stack.append(mod)
        ptrs = [ptr for ptr, _ in (storage(p) for p in mod.parameters(recurse=False)) if ptr]
        for ptr in ptrs:
            param_ptrs[ptr] += 1
        added.setdefault(id(mod), []).append(ptrs)

    def post(mod, args, out):
        if stack and stack[-1] is mod:
            stack.pop()
        elif mod in stack:
            del stack[len(stack) - 1 - stack[::-1].index(mod)]
        entries = added.get(id(mod))
        for ptr in (entries.pop() if entries else ()):  # stage 3 has released them by now: forget what pre saw
            param_ptrs[ptr] -= 1
            if param_ptrs[ptr] <= 0:
                del param_ptrs[ptr]

    def pack(t):
        ptr, nbytes = storage(t)
        mod = stack[-1] if stack else None
        key = ptr if ptr else ("anon", len(records))
        r = records.get(key)
        if r is not None:
            r["refs"] += 1
            return t
        records[key] = {
            "module": names.get(id(mod), "?") if mod is not None else "<outside modules>",
            "cls": type(mod).__name__ if mod is not None else "<outside modules>",
            "shape": tuple(int(x) for x in t.shape), "dtype": str(t.dtype).replace("torch.", ""),
            "nbytes": nbytes, "device": t.device.type,
            "param": bool(isinstance(t, nn.Parameter) or (ptr and ptr in param_ptrs)), "refs": 1}
        return t

    def unpack(t):
        return t

    for m in model.modules():
        handles.append(m.register_forward_pre_hook(pre))
        try:
            handles.append(m.register_forward_hook(post, always_call=True))
        except TypeError:
            handles.append(m.register_forward_hook(post))
    torch.cuda.synchronize()
    before = int(torch.cuda.memory_allocated())
    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
            loss = engine(input_ids=batch, labels=batch).loss
        torch.cuda.synchronize()
        after = int(torch.cuda.memory_allocated())
    finally:
        for h in handles:
            h.remove()
    del loss
    tokens = int(batch.shape[0] * batch.shape[1])
    out = summarize_saved(list(records.values()), tokens)
    out["allocated_before_forward"] = before
    out["allocated_after_forward"] = after
    out["forward_retained_bytes"] = after - before
    return out
