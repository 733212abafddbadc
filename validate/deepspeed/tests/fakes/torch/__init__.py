"""A fake of the few torch APIs harness.py uses, for tests on a machine without torch: a CUDA caching allocator
that only counts (with the allocator history's trace and Python frames), torch.distributed collectives that do
nothing, nn.Module hooks and saved-tensor hooks. Not torch: only what the harness's control flow needs."""
import contextlib
import functools
import itertools
import os
import sys
import traceback
import types

__version__ = "0.0+fake"
version = types.SimpleNamespace(cuda="13.0")


class dtype:
    def __init__(self, name, size):
        self.name, self.itemsize = name, size

    def __str__(self):
        return "torch." + self.name

    __repr__ = __str__


uint8 = dtype("uint8", 1)
int64 = dtype("int64", 8)
bfloat16 = dtype("bfloat16", 2)
float32 = dtype("float32", 4)


class _Device:
    def __init__(self, type_):
        self.type = type_


class _Allocator:
    def __init__(self):
        self.next = itertools.count(1 << 20, 1 << 20)
        self.allocated = self.reserved = self.max_allocated = self.max_reserved = 0
        self.recording = False
        self.trace = []
        self.max_entries = None
        self.limit = None  # torch.cuda.set_per_process_memory_fraction's bytes: reserving beyond them raises OOM

    def _frames(self):
        st = traceback.extract_stack()[:-3]
        return [{"filename": f.filename, "line": f.lineno, "name": f.name} for f in reversed(st)]

    def alloc(self, nbytes):
        size = max(512, (nbytes + 511) // 512 * 512)
        if self.limit is not None and max(self.reserved, self.allocated + size) > self.limit:
            raise cuda.OutOfMemoryError(f"CUDA out of memory. Tried to allocate {size} bytes (fake: the process's "
                                        f"memory fraction allows {self.limit} bytes)")
        ptr = next(self.next)
        self.allocated += size
        self.reserved = max(self.reserved, self.allocated)
        self.max_allocated = max(self.max_allocated, self.allocated)
        self.max_reserved = max(self.max_reserved, self.reserved)
        if self.recording:
            self.trace.append({"action": "alloc", "addr": ptr, "size": size, "stream": 0, "frames": self._frames()})
        return ptr, size

    def free(self, ptr, size):
        self.allocated -= size
        if self.recording:
            self.trace.append({"action": "free_requested", "addr": ptr, "size": size, "stream": 0, "frames": []})
            self.trace.append({"action": "free_completed", "addr": ptr, "size": size, "stream": 0, "frames": []})


_ALLOC = _Allocator()
_ptrs = itertools.count(1)


class _Storage:
    def __init__(self, nbytes, device):
        self.device = device
        if device == "cuda":
            self.ptr, self.size = _ALLOC.alloc(nbytes)
        else:
            self.ptr, self.size = next(_ptrs) * 4096, nbytes
        self._nbytes = nbytes

    def data_ptr(self):
        return self.ptr

    def nbytes(self):
        return self._nbytes

    def __del__(self):
        if self.device == "cuda":
            _ALLOC.free(self.ptr, self.size)


class Size(tuple):
    pass


class Tensor:
    grad = None

    def __init__(self, shape, dtype=float32, device="cpu", storage=None):
        self.shape = Size(int(x) for x in shape)
        self.dtype = dtype
        self.device = _Device(device)
        n = 1
        for x in self.shape:
            n *= x
        self._numel = n
        self._storage = storage if storage is not None else _Storage(n * dtype.itemsize, device)

    def numel(self):
        return self._numel

    def element_size(self):
        return self.dtype.itemsize

    def untyped_storage(self):
        return self._storage

    @property
    def is_cuda(self):
        return self.device.type == "cuda"

    def is_pinned(self):
        return False

    def cuda(self):
        return Tensor(self.shape, self.dtype, "cuda")

    def item(self):
        return 2.5

    def detach(self):
        return Tensor(self.shape, self.dtype, self.device.type, self._storage)

    def clone(self):
        return Tensor(self.shape, self.dtype, self.device.type)


class Generator:
    def manual_seed(self, seed):
        self.seed = seed
        return self


def manual_seed(seed):
    return None


def randint(low, high, size, generator=None):
    return Tensor(size, int64, "cpu")


def empty(*size, dtype=float32, device="cpu"):
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = size[0]
    return Tensor(size, dtype, device)


def zeros(*size, dtype=float32, device="cpu", requires_grad=False):
    return empty(*size, dtype=dtype, device=device)


# --- torch.cuda -------------------------------------------------------------------------------------------------
cuda = types.ModuleType("torch.cuda")
cuda.OutOfMemoryError = type("OutOfMemoryError", (RuntimeError,), {})
cuda.set_device = lambda d: None
cuda.manual_seed_all = lambda s: None
cuda.synchronize = lambda: None
cuda.device_count = lambda: 1
cuda.current_device = lambda: 0
cuda.get_device_name = lambda d=0: "Fake H200"
cuda.get_device_properties = lambda d=0: types.SimpleNamespace(name="Fake H200", total_memory=141 << 30, major=9,
                                                               minor=0)
cuda.memory_allocated = lambda: _ALLOC.allocated
cuda.memory_reserved = lambda: _ALLOC.reserved
cuda.max_memory_allocated = lambda: _ALLOC.max_allocated
cuda.max_memory_reserved = lambda: _ALLOC.max_reserved
def _set_per_process_memory_fraction(fraction, device=None):
    if not 0 <= fraction <= 1:
        raise ValueError(f"Invalid fraction value: {fraction}. Allowed range: 0~1")
    _ALLOC.limit = int(fraction * cuda.get_device_properties(device).total_memory)


cuda.set_per_process_memory_fraction = _set_per_process_memory_fraction
cuda.mem_get_info = lambda: ((141 << 30) - _ALLOC.reserved - (600 << 20), 141 << 30)
cuda.nccl = types.SimpleNamespace(version=lambda: (2, 28, 3))


def _reset_peak():
    _ALLOC.max_allocated = _ALLOC.allocated
    _ALLOC.max_reserved = _ALLOC.reserved


cuda.reset_peak_memory_stats = _reset_peak
cuda.memory_stats = lambda: {"allocated_bytes.all.peak": _ALLOC.max_allocated, "num_alloc_retries": 0,
                             "num_ooms": 0, "inactive_split_bytes.all.current": 0}
memory = types.ModuleType("torch.cuda.memory")


def _record_memory_history(enabled="all", context="all", stacks="all", max_entries=sys.maxsize, device=None,
                           clear_history=False):
    if enabled is None:
        _ALLOC.recording = False
        return
    assert stacks == "python" and context == "alloc"
    if clear_history:
        _ALLOC.trace = []
    _ALLOC.recording = True
    _ALLOC.max_entries = max_entries


memory._record_memory_history = _record_memory_history
memory._snapshot = lambda: {"segments": [], "device_traces": [list(_ALLOC.trace)]}
cuda.memory = memory

# --- torch.backends ---------------------------------------------------------------------------------------------
backends = types.SimpleNamespace(
    cudnn=types.SimpleNamespace(version=lambda: 91000),
    cuda=types.SimpleNamespace(flash_sdp_enabled=lambda: True, mem_efficient_sdp_enabled=lambda: True,
                               math_sdp_enabled=lambda: True, cudnn_sdp_enabled=lambda: False))

# --- torch.distributed (and its distributed_c10d: the same functions bound twice, as torch re-exports them) ------
c10d = types.ModuleType("torch.distributed.distributed_c10d")
CALLS = []  # what reached the "NCCL" level


class _Work:
    def wait(self):
        return None


class _Group:
    def __init__(self, ranks):
        self.ranks = list(ranks)


def _c10d_fns():
    def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
        CALLS.append("all_gather_into_tensor")
        return _Work() if async_op else None

    def _all_gather_base(output_tensor, input_tensor, group=None, async_op=False):
        # torch's deprecated alias calls the module's all_gather_into_tensor (looked up at call time)
        return c10d.all_gather_into_tensor(output_tensor, input_tensor, group, async_op)

    def reduce_scatter_tensor(output, input, op=None, group=None, async_op=False):
        CALLS.append("reduce_scatter_tensor")
        return _Work() if async_op else None

    def _reduce_scatter_base(output, input, op=None, group=None, async_op=False):
        return c10d.reduce_scatter_tensor(output, input, op, group, async_op)

    def all_reduce(tensor, op=None, group=None, async_op=False):
        CALLS.append("all_reduce")
        return _Work() if async_op else None

    def broadcast(tensor, src=None, group=None, async_op=False, group_src=None):
        CALLS.append("broadcast")

    def reduce(tensor, dst=None, op=None, group=None, async_op=False, group_dst=None):
        CALLS.append("reduce")

    def all_gather(tensor_list, tensor, group=None, async_op=False):
        CALLS.append("all_gather")

    def reduce_scatter(output, input_list, op=None, group=None, async_op=False):
        CALLS.append("reduce_scatter")

    def all_to_all_single(output, input, output_split_sizes=None, input_split_sizes=None, group=None,
                          async_op=False):
        CALLS.append("all_to_all_single")

    def all_to_all(output_tensor_list, input_tensor_list, group=None, async_op=False):
        CALLS.append("all_to_all")

    def get_world_size(group=None):
        return len(group.ranks) if group is not None else int(os.environ.get("WORLD_SIZE", "1"))

    def get_rank(group=None):
        return int(os.environ.get("RANK", "0"))

    def get_process_group_ranks(group):
        return list(group.ranks)

    def new_group(ranks):
        return _Group(ranks)

    state = {"init": False}

    def init_process_group(backend=None, **kw):
        state["init"] = True

    def is_initialized():
        return state["init"]

    return {k: v for k, v in locals().items() if callable(v)}


for _k, _v in _c10d_fns().items():
    setattr(c10d, _k, _v)
distributed = types.ModuleType("torch.distributed")
for _k in dir(c10d):
    if not _k.startswith("__"):
        setattr(distributed, _k, getattr(c10d, _k))
distributed.distributed_c10d = c10d
distributed.CALLS = CALLS

# --- torch.nn ---------------------------------------------------------------------------------------------------
nn = types.ModuleType("torch.nn")


class Parameter(Tensor):
    pass


class _Handle:
    def __init__(self, lst, item):
        self.lst, self.item = lst, item

    def remove(self):
        if self.item in self.lst:
            self.lst.remove(self.item)


class Module:
    def __init__(self):
        object.__setattr__(self, "_modules", {})
        object.__setattr__(self, "_parameters", {})
        object.__setattr__(self, "_pre", [])
        object.__setattr__(self, "_post", [])
        self.training = True

    def __setattr__(self, name, value):
        if isinstance(value, Module):
            self._modules[name] = value
        elif isinstance(value, Parameter):
            self._parameters[name] = value
        object.__setattr__(self, name, value)

    def named_modules(self, prefix=""):
        yield prefix, self
        for n, m in self._modules.items():
            yield from m.named_modules(f"{prefix}.{n}" if prefix else n)

    def modules(self):
        return (m for _, m in self.named_modules())

    def parameters(self, recurse=True):
        seen = set()
        for m in (self.modules() if recurse else [self]):
            for p in m._parameters.values():
                if id(p) not in seen:
                    seen.add(id(p))
                    yield p

    def buffers(self):
        return iter(())

    def train(self, mode=True):
        for m in self.modules():
            m.training = mode
        return self

    def register_forward_pre_hook(self, fn):
        self._pre.append(fn)
        return _Handle(self._pre, fn)

    def register_forward_hook(self, fn, always_call=False):
        self._post.append(fn)
        return _Handle(self._post, fn)

    def __call__(self, *args, **kwargs):
        for f in list(self._pre):
            f(self, args)
        out = self.forward(*args, **kwargs)
        for f in list(self._post):
            f(self, args, out)
        return out


nn.Module = Module
nn.Parameter = Parameter

# --- torch.autograd.graph.saved_tensors_hooks ---------------------------------------------------------------------
autograd = types.ModuleType("torch.autograd")
graph = types.ModuleType("torch.autograd.graph")
_HOOKS = []


@contextlib.contextmanager
def saved_tensors_hooks(pack, unpack):
    _HOOKS.append((pack, unpack))
    try:
        yield
    finally:
        _HOOKS.pop()


def _save_for_backward(t):
    """What an autograd node does with a tensor it keeps: the innermost pack hook sees it."""
    return _HOOKS[-1][0](t) if _HOOKS else t


graph.saved_tensors_hooks = saved_tensors_hooks
autograd.graph = graph


class _FunctionOutput:
    """A custom Function's output: sum().backward() runs the Function's backward on a thread of its own, as torch
    runs a CUDA graph's backward on its device thread."""

    def __init__(self, fn, x):
        self._fn, self._x = fn, x

    def sum(self):
        return self

    def backward(self):
        import threading
        t = threading.Thread(target=self._fn.backward, args=(None, self._x), name="pt_autograd_0")
        t.start()
        t.join()


class Function:
    @classmethod
    def apply(cls, x):
        return _FunctionOutput(cls, cls.forward(None, x))


autograd.Function = Function

optim = types.ModuleType("torch.optim")

for _name, _mod in (("torch.cuda", cuda), ("torch.cuda.memory", memory), ("torch.distributed", distributed),
                    ("torch.distributed.distributed_c10d", c10d), ("torch.nn", nn), ("torch.autograd", autograd),
                    ("torch.autograd.graph", graph), ("torch.optim", optim)):
    sys.modules[_name] = _mod
del functools
