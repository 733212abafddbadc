"""A fake DeepSpeed for the harness's tests: an engine on the fake torch whose ZeRO-ish steps call collectives the
way DeepSpeed does (through a backend that keeps torch.distributed's functions as attributes at init, as
deepspeed/comm/torch.py's TorchBackend does), and whose optimizer holds buffers on the fake GPU."""
import os
import time

import torch
import torch.distributed as dist

from . import utils, zero  # noqa: F401

__version__ = "0.14.5+fake"
_backend = None


class TorchBackend:
    def __init__(self):
        dist.init_process_group("nccl")
        self.all_gather_function = dist.all_gather_into_tensor   # kept at init: patched before, or missed
        self.reduce_scatter_function = dist.reduce_scatter_tensor


def init_distributed(dist_backend=None, **kwargs):
    global _backend
    _backend = TorchBackend()


class FusedAdam:
    def __init__(self, params):
        self.state = {}
        self.param_groups = [{"params": params}]

    def step(self):
        for p in self.param_groups[0]["params"]:
            if id(p) not in self.state:
                self.state[id(p)] = {"exp_avg": torch.empty(p.shape, dtype=torch.float32, device="cuda"),
                                     "exp_avg_sq": torch.empty(p.shape, dtype=torch.float32, device="cuda"),
                                     "step": 1}


class DeepSpeedZeroOptimizer:
    def __init__(self, module, world):
        params = list(module.parameters())
        n = sum(p.numel() for p in params)
        self.bit16_groups_flat = [torch.empty((n,), dtype=torch.bfloat16, device="cuda")]
        for p in params:  # the parameters become views of the flat buffer
            p._storage = self.bit16_groups_flat[0]._storage
            p.device = self.bit16_groups_flat[0].device
        part = (n + world - 1) // world
        self.single_partition_of_fp32_groups = [torch.empty((part,), dtype=torch.float32, device="cuda")]
        self.optimizer = FusedAdam(self.single_partition_of_fp32_groups)
        self.__ipg_buffer = torch.empty((1024,), dtype=torch.bfloat16, device="cuda")


class Engine:
    def __init__(self, model, config):
        self.module = model
        self.config = config
        self.stage = config["zero_optimization"]["stage"]
        self.world = dist.get_world_size()
        self.optimizer = DeepSpeedZeroOptimizer(model, self.world)
        # The modules flagged by deepspeed.utils.set_z3_leaf_modules before initialize (DeepSpeed reads the flag here,
        # when stage 3 registers its hooks): at stage 3 the fake gathers each one's parameters in one more call.
        self.leaf_modules = [m for m in model.modules() if utils.z3_leaf_module(m)] if self.stage == 3 else []
        self.communication_data_type = "torch.bfloat16"
        self.micro = 0

    def zero_optimization_stage(self):
        return self.stage

    def bfloat16_enabled(self):
        return True

    def gradient_accumulation_steps(self):
        return self.config["gradient_accumulation_steps"]

    def train_micro_batch_size_per_gpu(self):
        return self.config["train_micro_batch_size_per_gpu"]

    def __call__(self, **kwargs):
        if os.environ.get("FAKE_HANG") and int(os.environ.get("RANK", "0")) == 1:
            time.sleep(600)
        if self.stage == 3:
            out = torch.empty((4096,), dtype=torch.bfloat16, device="cuda")
            inp = torch.empty((4096 // self.world,), dtype=torch.bfloat16, device="cuda")
            _backend.all_gather_function(output_tensor=out, input_tensor=inp, group=None, async_op=True).wait()
            dist.distributed_c10d._all_gather_base(out, inp)  # nested: counted once, as _all_gather_base
            for _ in self.leaf_modules:
                _backend.all_gather_function(output_tensor=out, input_tensor=inp, group=None, async_op=False)
            del out, inp
        return self.module(**kwargs)

    def backward(self, loss):
        g = torch.empty((1000,), dtype=torch.bfloat16, device="cuda")
        if self.world > 1:
            o = torch.empty((1000 // self.world,), dtype=torch.bfloat16, device="cuda")
            _backend.reduce_scatter_function(o, g, op=None, group=None, async_op=False)
        loss._graph = None

    def step(self):
        self.micro += 1
        if self.micro % self.gradient_accumulation_steps() == 0:
            self.optimizer.optimizer.step()
            if self.world > 1:
                grp = dist.new_group(list(range(self.world)))
                dist.all_reduce(torch.empty((1,), dtype=torch.float32, device="cuda"), group=grp)


def initialize(model=None, model_parameters=None, config=None, **kwargs):
    list(model_parameters)
    e = Engine(model, config)
    return e, e.optimizer, None, None
