"""The harness's pure parts, without torch (zsim_ds/harness/): case loading, the collective wrappers and
aggregation, the allocator trace replay, the buffer walk, the saved-activation summary, the JSON writer.
The merge of the ranks' results, the parent's launch / wait / kill plumbing and the run on fakes: test_harness_run.py.
Run: cd validate/deepspeed && python3 -m unittest discover -s tests"""
import inspect
import json
import math
import os
import shutil
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from zsim_ds.harness import buffers, collectives, memory, run_json, sources, worker  # noqa: E402
from zsim_ds.harness.case import case_summary, load_case, step_plan  # noqa: E402

WORKER_FILE = worker.__file__  # a frame in the harness's own code (an allocation site named zsim_ds/...)

SMOKE_W1 = os.path.join(ROOT, "cases", "l150m-z2-w1-mb4-s2048-sdpa")
SMOKE_W2 = os.path.join(ROOT, "cases", "l150m-z3-w2-mb4-s2048-sdpa")


class FakeDtype:
    def __init__(self, name):
        self.name = name

    def __str__(self):
        return "torch." + self.name


class FakeTensor:
    """Enough of a tensor for the byte counting: numel, element_size, dtype."""

    def __init__(self, numel, elem=2, dtype="bfloat16"):
        self._n, self._e, self.dtype = numel, elem, FakeDtype(dtype)

    def numel(self):
        return self._n

    def element_size(self):
        return self._e


class CaseTest(unittest.TestCase):
    def test_load_case_and_summary(self):
        case_dir, case, ds, cfg = load_case(SMOKE_W2)
        self.assertEqual(case["name"], "l150m-z3-w2-mb4-s2048-sdpa")
        self.assertEqual(cfg["hidden_size"], 768)
        c = case_summary(case, ds, 2, case_dir)
        self.assertEqual((c["stage"], c["world"], c["shared_gpu"], c["micro_batch"], c["seq_len"]), (3, 2, True, 4, 2048))
        self.assertEqual((c["offload_optimizer"], c["offload_param"], c["zero_hpz_partition_size"]), ("none", "none", 1))
        self.assertFalse(c["zero_quantized_weights"] or c["zero_quantized_gradients"])
        self.assertEqual(c["files"], {"model_config": "config.json", "ds_config": "ds_config.json",
                                      "scenario": "scenario.yaml"})
        _, case1, ds1, _ = load_case(SMOKE_W1)
        self.assertFalse(case_summary(case1, ds1, 1)["shared_gpu"])

    def test_every_committed_case_loads(self):
        for name in sorted(os.listdir(os.path.join(ROOT, "cases"))):
            with self.subTest(name):
                _, case, ds, _ = load_case(os.path.join(ROOT, "cases", name))
                c = case_summary(case, ds, case["world"])
                self.assertEqual(c["name"], name)
                if "offopt" in name or "offall" in name:
                    self.assertEqual(c["offload_optimizer"], "cpu")
                if "offparam" in name or "offall" in name:
                    self.assertEqual(c["offload_param"], "cpu")
                if "qwz" in name:
                    self.assertTrue(c["zero_quantized_weights"])
                    self.assertEqual(c["expect"], "failed")
                # The leaf module class (issue 57) in the name's "-leaf", at stage 3 only.
                self.assertEqual(bool(c["z3_leaf_modules"]), name.endswith("-leaf") or "-leaf-" in name)
                if c["z3_leaf_modules"]:
                    self.assertEqual(c["stage"], 3)
                if case["world"] == 4:  # 4 ranks share one GPU: the small cases only (the 150M models, the 1.3B, and
                    # the mixtures of experts of list moe, under 450M parameters: 16 bytes each on 4 ranks < 30 GB)
                    self.assertTrue(case["model"].endswith("-150m") or case["model"] in (
                        "llama-1.3b", "mixtral-moe-s", "qwen3moe-s"), case["model"])

    def test_load_case_rejects_mismatches(self):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "case.json"), "w") as f:
                json.dump({"name": "x", "micro_batch": 2, "seq_len": 8, "grad_accum": 1, "world": 1,
                           "attention": "sdpa", "checkpointing": "none"}, f)
            with open(os.path.join(d, "config.json"), "w") as f:
                f.write("{}")
            with open(os.path.join(d, "ds_config.json"), "w") as f:
                json.dump({"train_micro_batch_size_per_gpu": 4}, f)
            with self.assertRaises(ValueError):
                load_case(d)
        with self.assertRaises(ValueError):
            load_case(ROOT)  # no case.json

    def test_load_case_checks_the_leaf_modules(self):
        for bad in ("MixtralSparseMoeBlock", [1], ["a.b"], {"x": 1}):
            with tempfile.TemporaryDirectory() as d:
                for name in ("case.json", "config.json", "ds_config.json"):
                    shutil.copy(os.path.join(SMOKE_W1, name), d)
                case = run_json.read_json(os.path.join(d, "case.json"))
                case["z3_leaf_modules"] = bad
                run_json.write_json_atomic(os.path.join(d, "case.json"), case)
                with self.assertRaises(ValueError) as e:
                    load_case(d)
                self.assertIn("z3_leaf_modules", str(e.exception))

    def test_load_case_checks_the_gpu_memory_cap(self):
        for bad in ("20GiB", 0, -1, True, 1.5):
            with tempfile.TemporaryDirectory() as d:
                for name in ("case.json", "config.json", "ds_config.json"):
                    shutil.copy(os.path.join(SMOKE_W1, name), d)
                case = run_json.read_json(os.path.join(d, "case.json"))
                case["gpu_memory_cap_bytes"] = bad
                run_json.write_json_atomic(os.path.join(d, "case.json"), case)
                with self.assertRaises(ValueError) as e:
                    load_case(d)
                self.assertIn("case.json: key 'gpu_memory_cap_bytes' must be a positive integer", str(e.exception))

    def test_phase_timed_and_profiled_steps_come_after_the_others(self):
        self.assertEqual(step_plan(6, 3, phase_steps=2, profile_steps=1),
                         ["warmup"] * 3 + ["collectives", "memory_history", "timed", "phase_timed", "phase_timed",
                                           "profiled"])

    def test_step_plan_and_median(self):
        self.assertEqual(step_plan(8, 3), ["warmup"] * 3 + ["collectives", "memory_history"] + ["timed"] * 3)
        self.assertEqual(run_json.median([3.0, 1.0, 2.0]), 2.0)
        self.assertEqual(run_json.median([4.0, 1.0, 2.0, 3.0]), 2.5)
        self.assertIsNone(run_json.median([]))


def fake_all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    return ("agit", output_tensor, input_tensor)


def fake_reduce_scatter_tensor(output, input, op="sum", group=None, async_op=False):
    return ("rst", output, input)


class CollectiveTest(unittest.TestCase):
    def recorder(self):
        rec = collectives.CollectiveRecorder()
        rec._size_of = lambda g: 4 if g is None else len(g)
        rec._ranks_of = lambda g: list(g)
        return rec

    def test_describe_call(self):
        out, inp = FakeTensor(4096), FakeTensor(1024)
        sig = inspect.signature(fake_all_gather_into_tensor)
        # DeepSpeed's TorchBackend calls with keywords; its all_gather_coalesced positionally: both bind.
        for args, kwargs in (((), {"output_tensor": out, "input_tensor": inp, "async_op": True}), ((out, inp), {})):
            a = dict(sig.bind(*args, **kwargs).arguments)
            in_b, out_b, dtype, group, asy = collectives.describe_call("all_gather_into_tensor", a, args)
            self.assertEqual((in_b, out_b, dtype, group), (2048, 8192, "bfloat16", None))
        self.assertEqual(collectives.payload_bytes([FakeTensor(10, 4), [FakeTensor(5, 2)]]), 50)
        lst = [FakeTensor(100, 4, "float32")] * 4
        in_b, out_b, dtype, _, _ = collectives.describe_call("all_gather", {"tensor_list": lst, "tensor": lst[0]})
        self.assertEqual((in_b, out_b, dtype), (400, 1600, "float32"))
        in_b, out_b, _, _, _ = collectives.describe_call("reduce_scatter", {"output": FakeTensor(8), "input_list": [FakeTensor(8)] * 2})
        self.assertEqual((in_b, out_b), (32, 16))
        # positional fallback where nothing could be bound
        in_b, out_b, _, _, _ = collectives.describe_call("reduce_scatter_tensor", {}, (FakeTensor(4), FakeTensor(16)))
        self.assertEqual((in_b, out_b), (32, 8))

    def test_wrapper_records_only_when_on_and_nested_calls_once(self):
        rec = self.recorder()
        w_rst = collectives._make_wrapper("reduce_scatter_tensor", fake_reduce_scatter_tensor, rec)

        def base_alias(output, input, op="sum", group=None, async_op=False):  # like torch's _reduce_scatter_base
            return w_rst(output, input, op=op, group=group, async_op=async_op)

        w_base = collectives._make_wrapper("_reduce_scatter_base", base_alias, rec)
        o, i = FakeTensor(8), FakeTensor(16)
        self.assertEqual(w_rst(o, i)[0], "rst")
        self.assertEqual(rec.calls, [])  # off: nothing recorded
        rec.on = True
        rec.phase = "backward"
        w_rst(o, i, group=(0, 1))
        w_base(o, i)  # calls w_rst inside: one call, the outer one
        self.assertEqual(len(rec.calls), 2)
        self.assertEqual(rec.calls[0][:6], ("backward", "reduce_scatter_tensor", 2, 32, 16, "bfloat16"))
        self.assertEqual(rec.calls[1][:6], ("backward", "_reduce_scatter_base", 4, 32, 16, "bfloat16"))
        self.assertEqual(rec.groups, {"g0": [0, 1], "g1": [0, 1, 2, 3]})
        self.assertTrue(w_rst._zsim_wrapped)
        self.assertIs(w_rst._zsim_orig, fake_reduce_scatter_tensor)
        self.assertEqual(str(inspect.signature(w_rst)), str(inspect.signature(fake_reduce_scatter_tensor)))

    def test_a_failing_record_never_breaks_the_call(self):
        rec = self.recorder()
        rec._size_of = None  # group_info copes
        rec.record = lambda *a: 1 / 0
        w = collectives._make_wrapper("all_gather_into_tensor", fake_all_gather_into_tensor, rec)
        rec.on = True
        self.assertEqual(w(FakeTensor(2), FakeTensor(1))[0], "agit")
        self.assertEqual(rec.errors, 1)

    def test_aggregate(self):
        calls = [
            ("backward", "reduce_scatter_tensor", 2, 100, 50, "bfloat16", True, "g0"),
            ("forward", "all_gather_into_tensor", 2, 50, 100, "bfloat16", True, "g0"),
            ("forward", "all_gather_into_tensor", 2, 50, 100, "bfloat16", False, "g0"),
            ("forward", "all_gather_into_tensor", 2, 70, 140, "bfloat16", False, "g0"),
            ("step", "all_reduce", 2, 4, 4, "float32", False, "g0"),
        ]
        agg = collectives.aggregate_calls(calls)
        self.assertEqual([(a["phase"], a["op"], a["input_bytes"], a["count"], a["async_count"]) for a in agg], [
            ("forward", "all_gather_into_tensor", 70, 1, 0),
            ("forward", "all_gather_into_tensor", 50, 2, 1),
            ("backward", "reduce_scatter_tensor", 100, 1, 1),
            ("step", "all_reduce", 4, 1, 0)])
        self.assertEqual(agg[0]["group_size"], 2)
        self.assertEqual(agg[0]["output_bytes"], 140)
        tot = collectives.totals_by_phase_op(calls)
        self.assertEqual(tot[0], {"phase": "forward", "op": "all_gather_into_tensor", "count": 3, "input_bytes": 170,
                                  "output_bytes": 340})
        seq = collectives.sequence_of(calls, limit=2)
        self.assertEqual(seq[0], ["backward", "reduce_scatter_tensor", "g0", 100, 50, "bfloat16", True])
        self.assertEqual(len(seq), 2)


def fr(filename, line, name):
    return {"filename": filename, "line": line, "name": name}


HF = "/venv/lib/python3.12/site-packages/transformers/models/llama/modeling_llama.py"
DS = "/repo/.devcarry/deepspeed-0.14.5/site/deepspeed/runtime/zero/stage3.py"
AG = "/venv/lib/python3.12/site-packages/torch/autograd/graph.py"
NN = "/venv/lib/python3.12/site-packages/torch/nn/functional.py"
MODS = {"transformers": type("M", (), {"__file__": "/venv/lib/python3.12/site-packages/transformers/__init__.py"}),
        "deepspeed": type("M", (), {"__file__": "/repo/.devcarry/deepspeed-0.14.5/site/deepspeed/__init__.py"}),
        "torch": type("M", (), {"__file__": "/venv/lib/python3.12/site-packages/torch/__init__.py"})}
ROOTS = memory.site_roots(MODS)


def alloc(addr, size, *frames):
    return {"action": "alloc", "addr": addr, "size": size, "frames": list(frames)}


def free(addr, size):
    return [{"action": "free_requested", "addr": addr, "size": size},
            {"action": "free_completed", "addr": addr, "size": size}]


def marker(phase, addr=9000):
    name = {"forward": "_zsim_mark_forward", "backward": "_zsim_mark_backward", "step": "_zsim_mark_step",
            "idle": "_zsim_mark_idle"}[phase]
    return [alloc(addr, 512, fr(memory.MARKER_FILE, 1, name), fr(WORKER_FILE, 2, "run_worker"))] + free(addr, 512)


class ReplayTest(unittest.TestCase):
    def test_site_of(self):
        so = memory.site_of
        self.assertEqual(so([fr(NN, 5, "linear"), fr(HF, 80, "forward"), fr(DS, 3, "x")], ROOTS),
                         "transformers/models/llama/modeling_llama.py:80 forward")
        self.assertEqual(so([fr(NN, 5, "linear"), fr(DS, 3, "fetch")], ROOTS), "deepspeed/runtime/zero/stage3.py:3 fetch")
        self.assertEqual(so([fr(AG, 7, "_engine_run_backward")], ROOTS), "torch/autograd/graph.py:7 _engine_run_backward")
        self.assertEqual(so([fr(NN, 5, "linear")], ROOTS), NN + ":5 linear")
        # This harness lives under validate/deepspeed/: it is itself (zsim_ds/), never "deepspeed/".
        self.assertEqual(so([fr(NN, 5, "linear"), fr(WORKER_FILE, 9, "run_worker")], ROOTS),
                         "zsim_ds/harness/worker.py:9 run_worker")
        other = "/repo/validate/deepspeed/other.py"
        self.assertEqual(so([fr(other, 1, "f")], ROOTS), other + ":1 f")
        self.assertEqual(so([], ROOTS), "<no python frame>")
        ck = "/venv/lib/python3.12/site-packages/torch/utils/checkpoint.py"
        self.assertEqual(so([fr(NN, 5, "linear"), fr(ck, 3, "recompute_fn")], ROOTS), "torch/utils/checkpoint.py:3 recompute_fn")

    def test_replay_finds_the_peak_its_phase_and_live_set(self):
        # 1000 bytes allocated before recording began (addr 1), part of it freed during the step.
        ev = []
        ev += marker("forward")
        ev.append(alloc(10, 300, fr(NN, 1, "linear"), fr(HF, 100, "forward")))        # activation, kept
        ev.append(alloc(11, 200, fr(HF, 120, "forward")))                             # freed in forward
        ev += free(11, 200)
        ev.append(alloc(12, 400, fr(DS, 50, "fetch_sub_module")))                     # gathered params
        ev += marker("backward")
        ev += free(12, 400)
        ev.append(alloc(13, 250, fr(AG, 7, "_engine_run_backward")))                  # a gradient
        ev.append(alloc(14, 600, fr(DS, 60, "reduce")))                              # peak here
        ev += free(1, 100)                                                            # an earlier allocation freed
        ev += marker("step")
        ev += free(14, 600)
        ev += free(10, 300)
        ev += marker("idle")
        r = memory.replay_device_trace(ev, 1000, roots=ROOTS)
        # peak: 1000 + 300 + 250 + 600 = 2150, in backward (before the earlier allocation was freed)
        self.assertEqual(r["peak_allocated"], 2150)
        self.assertEqual(r["phase_at_peak"], "backward")
        self.assertEqual(r["micro_step_at_peak"], 0)
        self.assertEqual(r["start_allocated"], 1000)
        self.assertEqual(r["end_allocated"], 1000 + 250 - 100)
        self.assertEqual(r["live_from_before_recording"], 1000)
        self.assertEqual(r["live_recorded"], 1150)
        self.assertEqual(r["frees_of_earlier_allocations"], 1)
        self.assertEqual(r["by_phase"], {"before_recording": 1000, "forward": 300, "backward": 850})
        sites = {(g["site"], g["phase"]): (g["bytes"], g["count"]) for g in r["groups"]}
        self.assertEqual(sites, {
            ("deepspeed/runtime/zero/stage3.py:60 reduce", "backward"): (600, 1),
            ("transformers/models/llama/modeling_llama.py:100 forward", "forward"): (300, 1),
            ("torch/autograd/graph.py:7 _engine_run_backward", "backward"): (250, 1)})
        self.assertEqual(r["groups"][0]["bytes"], 600)  # largest first
        self.assertEqual(r["largest"][0], {"bytes": 600, "site": "deepspeed/runtime/zero/stage3.py:60 reduce",
                                           "phase": "backward"})
        self.assertFalse(r["truncated"])
        json.dumps(r)

    def test_peak_after_earlier_frees_counts_them(self):
        ev = free(1, 500) + [alloc(2, 100, fr(HF, 1, "f"))]
        r = memory.replay_device_trace(ev, 1000, roots=ROOTS)
        self.assertEqual(r["peak_allocated"], 1000)  # the start: nothing exceeded it
        self.assertEqual(r["peak_event_index"], -1)
        self.assertEqual(r["groups"], [])
        ev = free(1, 500) + [alloc(2, 800, fr(HF, 1, "f"))]
        r = memory.replay_device_trace(ev, 1000, roots=ROOTS)
        self.assertEqual(r["peak_allocated"], 1300)
        self.assertEqual(r["live_from_before_recording"], 500)
        self.assertEqual(r["phase_at_peak"], "before")

    def test_top_groups_and_rest(self):
        ev = [alloc(100 + i, 10 + i, fr(HF, i, "f")) for i in range(50)]
        r = memory.replay_device_trace(ev, 0, top=40, max_entries=50, roots=ROOTS)
        self.assertEqual(len(r["groups"]), 40)
        self.assertEqual(r["other"]["groups"], 10)
        self.assertEqual(r["other"]["bytes"], sum(10 + i for i in range(10)))
        self.assertTrue(r["truncated"])
        self.assertEqual(r["micro_step_at_peak"], -1)

    def test_micro_steps_counted_by_forward_markers(self):
        ev = marker("forward") + [alloc(1, 10, fr(HF, 1, "f"))] + marker("backward") + free(1, 10)
        ev += marker("forward") + [alloc(2, 50, fr(HF, 1, "f"))] + marker("backward")
        r = memory.replay_device_trace(ev, 0, roots=ROOTS)
        self.assertEqual((r["peak_allocated"], r["micro_step_at_peak"], r["phase_at_peak"]), (50, 1, "forward"))


class Obj:
    pass


class DeepSpeedZeroOptimizer(Obj):  # its private attributes are name-mangled with this class name
    pass


class BufferWalkTest(unittest.TestCase):
    def test_storages_counted_once_per_first_path(self):
        # FakeStorage tensors: (key, bytes, kind) through tensor_info.
        class T(FakeTensor):
            def __init__(self, key, nbytes, kind="cuda"):
                super().__init__(nbytes, 1)
                self.key, self.nbytes, self.kind = key, nbytes, kind

        info = lambda t: (t.key, t.nbytes, t.kind)  # noqa: E731
        opt = DeepSpeedZeroOptimizer()
        flat = T("flat", 1000)
        opt.bit16_groups_flat = [flat]
        opt.single_partition_of_fp32_groups = [T("fp32a", 400), T("fp32b", 400)]
        inner = Obj()
        inner.state = {object(): {"exp_avg": T("m", 400), "exp_avg_sq": T("v", 400), "step": 3}}
        inner.param_groups = [{"params": [T("fp32a", 400)]}]  # already counted above
        opt.optimizer = inner
        p = T("flat", 1000)  # a parameter viewing the flat buffer, with a DeepSpeed attribute
        p.ds_tensor = T("part", 50)
        opt.params = [p]
        opt._DeepSpeedZeroOptimizer__ipg = T("ipg", 77)
        opt.pinned = T("host", 999, "cpu_pinned")
        opt.module = Obj()
        opt.module.weight = T("w", 12345)
        skip = lambda o: o is opt.module  # noqa: E731
        w = buffers.BufferWalk(info, skip=skip, walkable=lambda o: isinstance(o, Obj))
        w.walk(opt, "optimizer")
        rep = w.report(top=3)
        cuda = rep["cuda"]
        self.assertEqual(cuda["total_bytes"], 1000 + 800 + 800 + 50 + 77)
        self.assertEqual([x["path"] for x in cuda["paths"]],
                         ["optimizer.bit16_groups_flat[*]", "optimizer.single_partition_of_fp32_groups[*]",
                          "optimizer.optimizer.state[*]['exp_avg']"])
        self.assertEqual(cuda["paths"][1], {"path": "optimizer.single_partition_of_fp32_groups[*]", "bytes": 800,
                                            "tensors": 2})
        self.assertEqual(cuda["other_paths"], 3)  # exp_avg_sq, params[*].ds_tensor, __ipg (top 3 listed)
        self.assertEqual(cuda["other_bytes"], 400 + 50 + 77)
        self.assertEqual(rep["cpu_pinned"]["total_bytes"], 999)
        allp = {(k, p) for (k, p) in w.paths}
        self.assertIn(("cuda", "optimizer.params[*].ds_tensor"), allp)
        self.assertIn(("cuda", "optimizer.__ipg"), allp)
        self.assertNotIn(("cuda", "optimizer.module.weight"), allp)

    def test_cycles_and_depth(self):
        a, b = Obj(), Obj()
        a.b, b.a = b, a
        w = buffers.BufferWalk(lambda t: None, walkable=lambda o: isinstance(o, Obj), max_depth=3)
        w.walk(a, "x")  # terminates
        self.assertEqual(w.report(), {})


class SavedSummaryTest(unittest.TestCase):
    def test_summary(self):
        def rec(module, cls, shape, nbytes, dtype="bfloat16", device="cuda", param=False):
            return {"module": module, "cls": cls, "shape": shape, "dtype": dtype, "nbytes": nbytes, "device": device,
                    "param": param, "refs": 1}

        records = [
            rec("model.embed_tokens", "Embedding", (2, 8), 64, "int64"),
            rec("model.layers.0.input_layernorm", "LlamaRMSNorm", (2, 8, 4), 256, "float32"),
            rec("model.layers.0.self_attn.q_proj", "Linear", (2, 8, 4), 128),
            rec("model.layers.0.self_attn.q_proj", "Linear", (4, 4), 32, param=True),
            rec("model.layers.1.input_layernorm", "LlamaRMSNorm", (2, 8, 4), 256, "float32"),
            rec("model.layers.10.mlp", "LlamaMLP", (2, 8, 16), 512),
            rec("", "LlamaForCausalLM", (2, 8, 100), 6400, "float32"),
            rec("lm_head", "Linear", (2, 8, 4), 128, device="cpu"),
        ]
        s = buffers.summarize_saved(records, 16)
        self.assertEqual(s["activation_bytes"], 64 + 256 + 128 + 256 + 512 + 6400)
        self.assertEqual(s["activation_bytes_per_token"], s["activation_bytes"] / 16)
        self.assertEqual(s["parameter_storage_bytes"], 32)
        self.assertEqual(s["non_cuda_tensors"], 1)
        self.assertEqual(s["per_layer_bytes"][:2], [384, 256])
        self.assertEqual(len(s["per_layer_bytes"]), 11)
        self.assertEqual(s["per_layer_bytes"][10], 512)
        self.assertEqual(s["by_class"][0]["class"], "LlamaForCausalLM")
        mods = [m["module"] for m in s["by_module"]]
        self.assertIn("model.layers.0.input_layernorm", mods)
        self.assertNotIn("model.layers.1.input_layernorm", mods)
        self.assertNotIn("model.layers.10.mlp", mods)
        self.assertEqual([t["module"] for t in s["layer0_tensors"]],
                         ["model.layers.0.input_layernorm", "model.layers.0.self_attn.q_proj"])
        self.assertEqual(s["layer0_tensors"][0]["shape"], [2, 8, 4])
        self.assertEqual(buffers.layer_of("transformer.h.3.attn"), 3)
        self.assertIsNone(buffers.layer_of("transformer.wte"))
        # Every family zsim reads keeps its decoder layers in a `layers` (or GPT-2's `h`) list, whatever the prefix.
        for path, layer in (("model.layers.11.self_attn.q_norm", 11),            # Qwen3, OLMo-2, Gemma-3
                            ("model.layers.0.pre_feedforward_layernorm", 0),     # Gemma-2's sandwich norms
                            ("model.layers.4.self_attn.qkv_proj", 4),            # Phi-3
                            ("gpt_neox.layers.7.attention.query_key_value", 7),  # GPT-NeoX
                            ("model.decoder.layers.2.fc1", 2)):                  # OPT
            self.assertEqual(buffers.layer_of(path), layer, path)
        for path in ("model.embed_tokens", "model.norm", "model.rotary_emb", "lm_head", "gpt_neox.embed_in",
                     "embed_out", "model.decoder.embed_positions"):
            self.assertIsNone(buffers.layer_of(path), path)


class SourcesTest(unittest.TestCase):
    """The sources a device run dumps: the shared files and every case's family (sources.py), on a made-up tree."""

    def tree(self, d, files):
        for rel in files:
            os.makedirs(os.path.dirname(os.path.join(d, rel)), exist_ok=True)
            with open(os.path.join(d, rel), "w") as f:
                f.write("#\n")

    def test_model_types_of_the_cases(self):
        with tempfile.TemporaryDirectory() as d:
            for name, cfg in (("a", {"model_type": "qwen2"}), ("b", {"model_type": "gemma2"}),
                              ("c", {"model_type": "qwen2"}), ("d", {})):
                os.makedirs(os.path.join(d, name))
                with open(os.path.join(d, name, "config.json"), "w") as f:
                    json.dump(cfg, f)
            dirs = [os.path.join(d, n) for n in ("a", "b", "c", "d", "missing")]
            self.assertEqual(sources.model_types_of(dirs), ["qwen2", "gemma2"])
        committed = [os.path.join(ROOT, "cases", n.strip()) for n in open(os.path.join(ROOT, "lists", "families.txt"))]
        self.assertEqual(set(sources.model_types_of(committed)), {"qwen2", "qwen3", "gemma2", "phi3", "olmo2", "llama"})

    def test_source_files_per_family(self):
        with tempfile.TemporaryDirectory() as d:
            self.tree(d, list(sources.SHARED_FILES[:-1]) + [
                "models/llama/modeling_llama.py", "models/llama/configuration_llama.py",
                "models/gpt2/modeling_gpt2.py", "models/gpt2/configuration_gpt2.py",
                "models/qwen2/modeling_qwen2.py", "models/qwen2/configuration_qwen2.py",
                "models/qwen2/modular_qwen2.py", "models/qwen2/__init__.py",
                "models/gemma3/modeling_gemma3.py", "models/gemma3/configuration_gemma3.py"])
            found, missing = sources.source_files(d, ["qwen2", "gemma3_text", "llama", "nosuch"])
            self.assertEqual(found[:len(sources.SHARED_FILES) - 1], list(sources.SHARED_FILES[:-1]))
            self.assertIn("models/qwen2/modeling_qwen2.py", found)
            self.assertIn("models/qwen2/configuration_qwen2.py", found)
            self.assertNotIn("models/qwen2/modular_qwen2.py", found)  # the generated modeling file is what runs
            self.assertIn("models/gemma3/modeling_gemma3.py", found)  # gemma3_text: gemma3's folder
            self.assertEqual(sum(1 for f in found if f.startswith("models/llama/")), 2)  # once, though named twice
            self.assertIn("models/gpt2/modeling_gpt2.py", found)  # Llama's and GPT-2's always, as before
            self.assertEqual(missing, ["models/<nosuch>/", sources.SHARED_FILES[-1]])
            # transformers' own mapping where it has one (model_type_to_module_name)
            self.assertEqual(sources.module_folder("x-y", d, lambda t: "qwen2"), "qwen2")
            self.assertEqual(sources.module_folder("qwen2", d, lambda t: 1 / 0), "qwen2")


class JsonTest(unittest.TestCase):
    def test_write_json_atomic(self):
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "sub", "r.json")
            run_json.write_json_atomic(p, {"a": math.nan, "b": (1, 2), 3: {"c": math.inf}, "d": {4, 5}, "e": None})
            with open(p) as f:
                self.assertEqual(json.load(f), {"a": None, "b": [1, 2], "3": {"c": None}, "d": [4, 5], "e": None})
            run_json.write_json_atomic(p, {"x": 1})
            self.assertEqual(run_json.read_json(p), {"x": 1})
            self.assertEqual(os.listdir(os.path.dirname(p)), ["r.json"])  # no temporary left

    def test_dumps_is_json_and_keeps_scalar_lists_on_one_line(self):
        obj = {"a": [1, 2, "x", None, True], "b": [[1, 2], {"c": []}], "d": {}, "e": [], "f": 1.5}
        text = run_json.dumps(obj)
        self.assertEqual(json.loads(text), obj)
        self.assertIn('"a": [1, 2, "x", null, true]', text)
        self.assertIn("  [1, 2]", text)

    def test_tail_lines(self):
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "e")
            with open(p, "w") as f:
                f.write("".join(f"line {i}\n" for i in range(100)))
            self.assertEqual(run_json.tail_lines(p, 3), ["line 97", "line 98", "line 99"])
            self.assertEqual(run_json.tail_lines(os.path.join(d, "missing")), [])
