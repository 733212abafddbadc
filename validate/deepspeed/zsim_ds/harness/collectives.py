"""Collective recording: torch.distributed's collectives wrapped before DeepSpeed is imported, each call described
(op, group, bytes in and out, dtype) with the phase the loop is in, and the calls grouped for the result."""
import collections
import functools
import inspect
import threading


PHASE_ORDER = ("init", "forward", "backward", "step", "idle", "other")


MAX_SEQUENCE = 5000      # collective calls kept in order (per rank) for the collectives step


# ----------------------------------------------------------------------------------------------------------------
# Collective recording (torch.distributed patched before DeepSpeed is imported)

# op -> (input argument names, output argument names), first present wins; the bytes are the tensors' (lists summed).
COLLECTIVE_SPECS = {
    "all_reduce": (("tensor",), ("tensor",)),
    "all_reduce_coalesced": (("tensors",), ("tensors",)),
    "broadcast": (("tensor",), ("tensor",)),
    "reduce": (("tensor",), ("tensor",)),
    "all_gather_into_tensor": (("input_tensor",), ("output_tensor",)),
    "_all_gather_base": (("input_tensor",), ("output_tensor",)),
    "all_gather": (("tensor",), ("tensor_list",)),
    "all_gather_coalesced": (("input_tensor_list",), ("output_tensor_lists",)),
    "reduce_scatter_tensor": (("input", "input_tensor"), ("output", "output_tensor")),
    "_reduce_scatter_base": (("input", "input_tensor"), ("output", "output_tensor")),
    "reduce_scatter": (("input_list",), ("output",)),
    "all_to_all_single": (("input",), ("output",)),
    "all_to_all": (("input_tensor_list",), ("output_tensor_list",)),
    "gather": (("tensor",), ("gather_list",)),
    "scatter": (("scatter_list",), ("tensor",)),
    "batch_isend_irecv": (("p2p_op_list",), ()),
}


# Positional fallback (input index, output index) where the signature cannot be bound.
COLLECTIVE_POSITIONAL = {
    "all_gather_into_tensor": (1, 0), "_all_gather_base": (1, 0), "reduce_scatter_tensor": (1, 0),
    "_reduce_scatter_base": (1, 0), "reduce_scatter": (1, 0), "all_to_all_single": (1, 0), "all_to_all": (1, 0),
    "all_gather": (1, 0), "all_gather_coalesced": (1, 0), "scatter": (1, 0),
}


def _is_tensor(x):
    return hasattr(x, "element_size") and hasattr(x, "numel") and hasattr(x, "dtype")


def payload_bytes(obj, depth=0):
    """Bytes of a tensor, or of the tensors in a (nested) list / tuple, or of P2POp objects' tensors."""
    if obj is None or depth > 4:
        return 0
    if _is_tensor(obj):
        return int(obj.numel()) * int(obj.element_size())
    if isinstance(obj, (list, tuple)):
        return sum(payload_bytes(x, depth + 1) for x in obj)
    t = getattr(obj, "tensor", None)  # torch.distributed.P2POp
    if t is not None and _is_tensor(t):
        return payload_bytes(t, depth + 1)
    return 0


def first_dtype(obj, depth=0):
    if obj is None or depth > 4:
        return None
    if _is_tensor(obj):
        return str(obj.dtype).replace("torch.", "")
    if isinstance(obj, (list, tuple)):
        for x in obj:
            d = first_dtype(x, depth + 1)
            if d:
                return d
        return None
    t = getattr(obj, "tensor", None)
    return first_dtype(t, depth + 1) if t is not None else None


def describe_call(op, arguments, args=()):
    """(input_bytes, output_bytes, dtype, group, async_op) of one collective call from its bound arguments."""
    ins, outs = COLLECTIVE_SPECS.get(op, ((), ()))
    in_obj = next((arguments[k] for k in ins if k in arguments), None)
    out_obj = next((arguments[k] for k in outs if k in arguments), None)
    if in_obj is None and out_obj is None and op in COLLECTIVE_POSITIONAL and args:
        i, o = COLLECTIVE_POSITIONAL[op]
        in_obj = args[i] if len(args) > i else None
        out_obj = args[o] if len(args) > o else None
    in_b = payload_bytes(in_obj)
    out_b = payload_bytes(out_obj) if outs else 0
    dtype = first_dtype(in_obj) or first_dtype(out_obj) or "none"
    group = arguments.get("group")
    if op == "batch_isend_irecv" and isinstance(in_obj, (list, tuple)) and in_obj:
        group = getattr(in_obj[0], "group", None)
    return in_b, out_b, dtype, group, bool(arguments.get("async_op", False))


class CollectiveRecorder:
    """Records collective calls while `on`; the patched functions cost one attribute test when it is off."""

    def __init__(self):
        self.on = False
        self.phase = "init"
        self.calls = []          # (phase, op, group_size, input_bytes, output_bytes, dtype, async_op, group_id)
        self.errors = 0
        self.local = threading.local()
        self.patched = []
        self.group_ids = {}      # id(group) -> (group id, ranks)
        self.groups = {}         # group id -> ranks
        self._size_of = None
        self._ranks_of = None

    def group_info(self, group):
        key = id(group) if group is not None else None
        hit = self.group_ids.get(key)
        if hit is not None:
            return hit
        size, ranks = None, None
        try:
            size = int(self._size_of(group)) if self._size_of else None
        except Exception:
            size = None
        try:
            ranks = list(self._ranks_of(group)) if self._ranks_of and group is not None else None
        except Exception:
            ranks = None
        if ranks is None and size is not None and group is None:
            ranks = list(range(size))
        gid = f"g{len(self.groups)}"
        self.groups[gid] = ranks if ranks is not None else size
        hit = (gid, size)
        self.group_ids[key] = hit
        return hit

    def record(self, op, sig, args, kwargs):
        arguments = {}
        if sig is not None:
            try:
                arguments = dict(sig.bind(*args, **kwargs).arguments)
            except TypeError:
                arguments = dict(kwargs)
        else:
            arguments = dict(kwargs)
        in_b, out_b, dtype, group, async_op = describe_call(op, arguments, args)
        gid, size = self.group_info(group)
        self.calls.append((self.phase, op, size, in_b, out_b, dtype, async_op, gid))

    def reset(self):
        self.calls = []


REC = CollectiveRecorder()


def _make_wrapper(op, orig, rec):
    try:
        sig = inspect.signature(orig)
    except (TypeError, ValueError):
        sig = None

    @functools.wraps(orig)
    def wrapper(*args, **kwargs):
        if not rec.on:
            return orig(*args, **kwargs)
        loc = rec.local
        if getattr(loc, "depth", 0):
            return orig(*args, **kwargs)  # called from inside another recorded collective: counted once
        try:
            rec.record(op, sig, args, kwargs)
        except Exception:
            rec.errors += 1
        loc.depth = 1
        try:
            return orig(*args, **kwargs)
        finally:
            loc.depth = 0

    wrapper._zsim_wrapped = True
    wrapper._zsim_orig = orig
    return wrapper


def install_collective_recorder(rec=REC):
    """Wraps torch.distributed's collectives in both torch.distributed and torch.distributed.distributed_c10d (the
    second is what DeepSpeed's all_gather_coalesced and torch's own deprecated aliases call). Must run before
    DeepSpeed is imported: its TorchBackend keeps torch.distributed.all_gather_into_tensor and reduce_scatter_tensor
    as attributes at init (deepspeed/comm/torch.py get_all_gather_function / get_reduce_scatter_function)."""
    import torch.distributed as dist
    c10d = dist.distributed_c10d
    made = {}
    for op in COLLECTIVE_SPECS:
        for mod in (dist, c10d):
            orig = getattr(mod, op, None)
            if orig is None or not callable(orig) or getattr(orig, "_zsim_wrapped", False):
                continue
            w = made.get(id(orig))
            if w is None:
                w = _make_wrapper(op, orig, rec)
                made[id(orig)] = w
            setattr(mod, op, w)
            rec.patched.append(f"{mod.__name__}.{op}")
    rec._size_of = lambda g: dist.get_world_size(g) if g is not None else dist.get_world_size()
    rec._ranks_of = getattr(dist, "get_process_group_ranks", None)
    return rec


def aggregate_calls(calls):
    """Calls grouped by (phase, op, group_size, input_bytes, output_bytes, dtype) with counts, in a stable order."""
    counts = collections.OrderedDict()
    for c in calls:
        phase, op, size, in_b, out_b, dtype = c[:6]
        key = (phase, op, size, in_b, out_b, dtype)
        e = counts.get(key)
        if e is None:
            counts[key] = e = {"count": 0, "async": 0}
        e["count"] += 1
        if len(c) > 6 and c[6]:
            e["async"] += 1

    def order(k):
        phase, op, size, in_b, out_b, dtype = k
        pi = PHASE_ORDER.index(phase) if phase in PHASE_ORDER else len(PHASE_ORDER)
        return (pi, op, size if size is not None else -1, -in_b, -out_b, dtype)

    out = []
    for k in sorted(counts, key=order):
        phase, op, size, in_b, out_b, dtype = k
        out.append({"phase": phase, "op": op, "group_size": size, "input_bytes": in_b, "output_bytes": out_b,
                    "dtype": dtype, "count": counts[k]["count"], "async_count": counts[k]["async"]})
    return out


def totals_by_phase_op(calls):
    """Per (phase, op): calls and summed input / output bytes."""
    tot = {}
    for c in calls:
        phase, op, size, in_b, out_b = c[:5]
        e = tot.setdefault((phase, op), {"phase": phase, "op": op, "count": 0, "input_bytes": 0, "output_bytes": 0})
        e["count"] += 1
        e["input_bytes"] += in_b
        e["output_bytes"] += out_b
    return [tot[k] for k in sorted(tot, key=lambda k: (PHASE_ORDER.index(k[0]) if k[0] in PHASE_ORDER else 99, k[1]))]


def sequence_of(calls, limit=MAX_SEQUENCE):
    """The calls in order, compact: [phase, op, group id, input_bytes, output_bytes, dtype, async]."""
    return [[c[0], c[1], c[7] if len(c) > 7 else None, c[3], c[4], c[5], bool(c[6]) if len(c) > 6 else False]
            for c in calls[:limit]]
