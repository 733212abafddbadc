"""harness.py's pure parts, without torch: case loading, the collective wrappers and aggregation, the allocator
trace replay, the buffer walk, the saved-activation summary, the JSON writer, the merge of the ranks' results and
the parent's launch / wait / kill plumbing (its workers fail here for want of torch, which is itself a test of how a
failure is recorded). Run: cd validate/deepspeed && python3 -m unittest discover -s tests"""
import inspect
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

import harness as h  # noqa: E402

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
        case_dir, case, ds, cfg = h.load_case(SMOKE_W2)
        self.assertEqual(case["name"], "l150m-z3-w2-mb4-s2048-sdpa")
        self.assertEqual(cfg["hidden_size"], 768)
        c = h.case_summary(case, ds, 2, case_dir)
        self.assertEqual((c["stage"], c["world"], c["shared_gpu"], c["micro_batch"], c["seq_len"]), (3, 2, True, 4, 2048))
        self.assertEqual((c["offload_optimizer"], c["offload_param"], c["zero_hpz_partition_size"]), ("none", "none", 1))
        self.assertFalse(c["zero_quantized_weights"] or c["zero_quantized_gradients"])
        self.assertEqual(c["files"], {"model_config": "config.json", "ds_config": "ds_config.json",
                                      "scenario": "scenario.yaml"})
        _, case1, ds1, _ = h.load_case(SMOKE_W1)
        self.assertFalse(h.case_summary(case1, ds1, 1)["shared_gpu"])

    def test_every_committed_case_loads(self):
        for name in sorted(os.listdir(os.path.join(ROOT, "cases"))):
            with self.subTest(name):
                _, case, ds, _ = h.load_case(os.path.join(ROOT, "cases", name))
                c = h.case_summary(case, ds, case["world"])
                self.assertEqual(c["name"], name)
                if "offopt" in name or "offall" in name:
                    self.assertEqual(c["offload_optimizer"], "cpu")
                if "offparam" in name or "offall" in name:
                    self.assertEqual(c["offload_param"], "cpu")
                if "qwz" in name:
                    self.assertTrue(c["zero_quantized_weights"])
                    self.assertEqual(c["expect"], "failed")
                if case["world"] == 4:  # 4 ranks share one GPU: the small cases only
                    self.assertIn(case["model"], ("llama-150m", "llama-1.3b"))

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
                h.load_case(d)
        with self.assertRaises(ValueError):
            h.load_case(ROOT)  # no case.json

    def test_load_case_checks_the_gpu_memory_cap(self):
        for bad in ("20GiB", 0, -1, True, 1.5):
            with tempfile.TemporaryDirectory() as d:
                for name in ("case.json", "config.json", "ds_config.json"):
                    shutil.copy(os.path.join(SMOKE_W1, name), d)
                case = h.read_json(os.path.join(d, "case.json"))
                case["gpu_memory_cap_bytes"] = bad
                h.write_json_atomic(os.path.join(d, "case.json"), case)
                with self.assertRaises(ValueError) as e:
                    h.load_case(d)
                self.assertIn("case.json: key 'gpu_memory_cap_bytes' must be a positive integer", str(e.exception))

    def test_phase_timed_and_profiled_steps_come_after_the_others(self):
        self.assertEqual(h.step_plan(6, 3, phase_steps=2, profile_steps=1),
                         ["warmup"] * 3 + ["collectives", "memory_history", "timed", "phase_timed", "phase_timed",
                                           "profiled"])

    def test_step_plan_and_median(self):
        self.assertEqual(h.step_plan(8, 3), ["warmup"] * 3 + ["collectives", "memory_history"] + ["timed"] * 3)
        self.assertEqual(h.median([3.0, 1.0, 2.0]), 2.0)
        self.assertEqual(h.median([4.0, 1.0, 2.0, 3.0]), 2.5)
        self.assertIsNone(h.median([]))


def fake_all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    return ("agit", output_tensor, input_tensor)


def fake_reduce_scatter_tensor(output, input, op="sum", group=None, async_op=False):
    return ("rst", output, input)


class CollectiveTest(unittest.TestCase):
    def recorder(self):
        rec = h.CollectiveRecorder()
        rec._size_of = lambda g: 4 if g is None else len(g)
        rec._ranks_of = lambda g: list(g)
        return rec

    def test_describe_call(self):
        out, inp = FakeTensor(4096), FakeTensor(1024)
        sig = inspect.signature(fake_all_gather_into_tensor)
        # DeepSpeed's TorchBackend calls with keywords; its all_gather_coalesced positionally: both bind.
        for args, kwargs in (((), {"output_tensor": out, "input_tensor": inp, "async_op": True}), ((out, inp), {})):
            a = dict(sig.bind(*args, **kwargs).arguments)
            in_b, out_b, dtype, group, asy = h.describe_call("all_gather_into_tensor", a, args)
            self.assertEqual((in_b, out_b, dtype, group), (2048, 8192, "bfloat16", None))
        self.assertEqual(h.payload_bytes([FakeTensor(10, 4), [FakeTensor(5, 2)]]), 50)
        lst = [FakeTensor(100, 4, "float32")] * 4
        in_b, out_b, dtype, _, _ = h.describe_call("all_gather", {"tensor_list": lst, "tensor": lst[0]})
        self.assertEqual((in_b, out_b, dtype), (400, 1600, "float32"))
        in_b, out_b, _, _, _ = h.describe_call("reduce_scatter", {"output": FakeTensor(8), "input_list": [FakeTensor(8)] * 2})
        self.assertEqual((in_b, out_b), (32, 16))
        # positional fallback where nothing could be bound
        in_b, out_b, _, _, _ = h.describe_call("reduce_scatter_tensor", {}, (FakeTensor(4), FakeTensor(16)))
        self.assertEqual((in_b, out_b), (32, 8))

    def test_wrapper_records_only_when_on_and_nested_calls_once(self):
        rec = self.recorder()
        w_rst = h._make_wrapper("reduce_scatter_tensor", fake_reduce_scatter_tensor, rec)

        def base_alias(output, input, op="sum", group=None, async_op=False):  # like torch's _reduce_scatter_base
            return w_rst(output, input, op=op, group=group, async_op=async_op)

        w_base = h._make_wrapper("_reduce_scatter_base", base_alias, rec)
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
        w = h._make_wrapper("all_gather_into_tensor", fake_all_gather_into_tensor, rec)
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
        agg = h.aggregate_calls(calls)
        self.assertEqual([(a["phase"], a["op"], a["input_bytes"], a["count"], a["async_count"]) for a in agg], [
            ("forward", "all_gather_into_tensor", 70, 1, 0),
            ("forward", "all_gather_into_tensor", 50, 2, 1),
            ("backward", "reduce_scatter_tensor", 100, 1, 1),
            ("step", "all_reduce", 4, 1, 0)])
        self.assertEqual(agg[0]["group_size"], 2)
        self.assertEqual(agg[0]["output_bytes"], 140)
        tot = h.totals_by_phase_op(calls)
        self.assertEqual(tot[0], {"phase": "forward", "op": "all_gather_into_tensor", "count": 3, "input_bytes": 170,
                                  "output_bytes": 340})
        seq = h.sequence_of(calls, limit=2)
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
ROOTS = h.site_roots(MODS)


def alloc(addr, size, *frames):
    return {"action": "alloc", "addr": addr, "size": size, "frames": list(frames)}


def free(addr, size):
    return [{"action": "free_requested", "addr": addr, "size": size},
            {"action": "free_completed", "addr": addr, "size": size}]


def marker(phase, addr=9000):
    name = {"forward": "_zsim_mark_forward", "backward": "_zsim_mark_backward", "step": "_zsim_mark_step",
            "idle": "_zsim_mark_idle"}[phase]
    return [alloc(addr, 512, fr(h.HARNESS_FILE, 1, name), fr(h.HARNESS_FILE, 2, "run_worker"))] + free(addr, 512)


class ReplayTest(unittest.TestCase):
    def test_site_of(self):
        so = h.site_of
        self.assertEqual(so([fr(NN, 5, "linear"), fr(HF, 80, "forward"), fr(DS, 3, "x")], ROOTS),
                         "transformers/models/llama/modeling_llama.py:80 forward")
        self.assertEqual(so([fr(NN, 5, "linear"), fr(DS, 3, "fetch")], ROOTS), "deepspeed/runtime/zero/stage3.py:3 fetch")
        self.assertEqual(so([fr(AG, 7, "_engine_run_backward")], ROOTS), "torch/autograd/graph.py:7 _engine_run_backward")
        self.assertEqual(so([fr(NN, 5, "linear")], ROOTS), NN + ":5 linear")
        # This harness lives under validate/deepspeed/: it is itself, never "deepspeed/".
        self.assertEqual(so([fr(NN, 5, "linear"), fr(h.HARNESS_FILE, 9, "run_worker")], ROOTS), "harness.py:9 run_worker")
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
        r = h.replay_device_trace(ev, 1000, roots=ROOTS)
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
        r = h.replay_device_trace(ev, 1000, roots=ROOTS)
        self.assertEqual(r["peak_allocated"], 1000)  # the start: nothing exceeded it
        self.assertEqual(r["peak_event_index"], -1)
        self.assertEqual(r["groups"], [])
        ev = free(1, 500) + [alloc(2, 800, fr(HF, 1, "f"))]
        r = h.replay_device_trace(ev, 1000, roots=ROOTS)
        self.assertEqual(r["peak_allocated"], 1300)
        self.assertEqual(r["live_from_before_recording"], 500)
        self.assertEqual(r["phase_at_peak"], "before")

    def test_top_groups_and_rest(self):
        ev = [alloc(100 + i, 10 + i, fr(HF, i, "f")) for i in range(50)]
        r = h.replay_device_trace(ev, 0, top=40, max_entries=50, roots=ROOTS)
        self.assertEqual(len(r["groups"]), 40)
        self.assertEqual(r["other"]["groups"], 10)
        self.assertEqual(r["other"]["bytes"], sum(10 + i for i in range(10)))
        self.assertTrue(r["truncated"])
        self.assertEqual(r["micro_step_at_peak"], -1)

    def test_micro_steps_counted_by_forward_markers(self):
        ev = marker("forward") + [alloc(1, 10, fr(HF, 1, "f"))] + marker("backward") + free(1, 10)
        ev += marker("forward") + [alloc(2, 50, fr(HF, 1, "f"))] + marker("backward")
        r = h.replay_device_trace(ev, 0, roots=ROOTS)
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
        w = h.BufferWalk(info, skip=skip, walkable=lambda o: isinstance(o, Obj))
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
        w = h.BufferWalk(lambda t: None, walkable=lambda o: isinstance(o, Obj), max_depth=3)
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
        s = h.summarize_saved(records, 16)
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
        self.assertEqual(h.layer_of("transformer.h.3.attn"), 3)
        self.assertIsNone(h.layer_of("transformer.wte"))


class JsonTest(unittest.TestCase):
    def test_write_json_atomic(self):
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "sub", "r.json")
            h.write_json_atomic(p, {"a": math.nan, "b": (1, 2), 3: {"c": math.inf}, "d": {4, 5}, "e": None})
            with open(p) as f:
                self.assertEqual(json.load(f), {"a": None, "b": [1, 2], "3": {"c": None}, "d": [4, 5], "e": None})
            h.write_json_atomic(p, {"x": 1})
            self.assertEqual(h.read_json(p), {"x": 1})
            self.assertEqual(os.listdir(os.path.dirname(p)), ["r.json"])  # no temporary left

    def test_dumps_is_json_and_keeps_scalar_lists_on_one_line(self):
        obj = {"a": [1, 2, "x", None, True], "b": [[1, 2], {"c": []}], "d": {}, "e": [], "f": 1.5}
        text = h.dumps(obj)
        self.assertEqual(json.loads(text), obj)
        self.assertIn('"a": [1, 2, "x", null, true]', text)
        self.assertIn("  [1, 2]", text)

    def test_tail_lines(self):
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "e")
            with open(p, "w") as f:
                f.write("".join(f"line {i}\n" for i in range(100)))
            self.assertEqual(h.tail_lines(p, 3), ["line 97", "line 98", "line 99"])
            self.assertEqual(h.tail_lines(os.path.join(d, "missing")), [])


def rank_ok(r, alloc=2**30, step=0.5):
    return {"rank": r, "status": "ok", "error": None, "failure_kind": None, "stage_reached": "done",
            "versions": {"torch": "2.11"}, "memory": {"peak_allocated": alloc, "peak_reserved": 2 * alloc},
            "timing": {"median_step_seconds": step}}


class MergeTest(unittest.TestCase):
    def setUp(self):
        _, case, ds, _ = h.load_case(SMOKE_W2)
        self.case = h.case_summary(case, ds, 2)

    def merge(self, ranks, codes, timed_out=False, killed=False):
        return h.merge_ranks(self.case, ranks, {"torch": "2.11"}, {"steps": 8}, timed_out, 60, 1.5, "cmd", codes,
                             [["err a"], ["err b"]], killed)

    def test_all_ok(self):
        r = self.merge([rank_ok(0), rank_ok(1)], [0, 0])
        self.assertEqual((r["format"], r["version"], r["status"], r["error"]), ("zsim.deepspeed_run", 1, "ok", None))
        self.assertTrue(r["as_expected"])
        self.assertNotIn("versions", r["ranks"][0])
        self.assertNotIn("stderr_tail", r["ranks"][0])
        line = h.summary_line(r)
        self.assertIn("l150m-z3-w2-mb4-s2048-sdpa: ok", line)
        self.assertIn("r0 1.00/2.00", line)
        self.assertIn("step 500.0 ms", line)

    def test_one_rank_failed_the_other_killed(self):
        bad = {"rank": 0, "status": "failed", "error": "RuntimeError: expected mat1 and mat2 to have the same dtype",
               "failure_kind": "exception", "stage_reached": "initialized"}
        hung = {"rank": 1, "status": "running", "error": None, "stage_reached": "step 0"}
        r = self.merge([bad, hung], [1, -9], killed=True)
        self.assertEqual(r["status"], "failed")
        self.assertEqual(r["failure_kind"], "exception")
        self.assertTrue(r["error"].startswith("rank 0: RuntimeError"))
        self.assertEqual(r["ranks"][1]["failure_kind"], "killed")
        self.assertEqual(r["ranks"][0]["stderr_tail"], ["err a"])
        self.assertEqual(r["ranks"][1]["exit_code"], -9)
        self.assertIn("error: rank 0: RuntimeError", h.summary_line(r))

    def test_timeout_and_missing_rank(self):
        r = self.merge([{"rank": 0, "status": "running", "stage_reached": "step 2"}, None], [-15, -9], timed_out=True)
        self.assertEqual((r["status"], r["failure_kind"], r["timed_out"]), ("failed", "timeout", True))
        self.assertIn("timeout after 60 s", r["ranks"][0]["error"])
        self.assertEqual(r["ranks"][1]["failure_kind"], "crash")

    def test_ok_json_but_bad_exit(self):
        r = self.merge([rank_ok(0), rank_ok(1)], [0, 139])
        self.assertEqual(r["status"], "failed")
        self.assertEqual(r["ranks"][1]["failure_kind"], "crash")


class ProcessTest(unittest.TestCase):
    def test_rank_env(self):
        e = h.rank_env({"PATH": "/bin"}, 1, 2, 1234)
        self.assertEqual((e["RANK"], e["WORLD_SIZE"], e["LOCAL_RANK"], e["MASTER_PORT"]), ("1", "2", "0", "1234"))
        self.assertEqual((e["NCCL_HOSTID"], e["NCCL_NET"], e["NCCL_SOCKET_IFNAME"], e["NCCL_IB_DISABLE"]),
                         ("zsim-rank1", "Socket", "lo", "1"))
        self.assertEqual(e["NCCL_NVLS_ENABLE"], "0")
        e1 = h.rank_env({}, 0, 1, 5)
        self.assertNotIn("NCCL_HOSTID", e1)
        self.assertEqual(e1["NCCL_NVLS_ENABLE"], "0")

    def start(self, *cmd):
        return subprocess.Popen(list(cmd), start_new_session=True)

    def test_wait_timeout_and_kill_the_group(self):
        # A rank whose child (like a JIT build) also sleeps: killing the group kills both.
        p = self.start("sh", "-c", "sleep 30 & sleep 30")
        t0 = time.time()
        timed_out, stopped = h.wait_ranks([p], time.time() + 0.5, 10, poll_s=0.05)
        self.assertEqual((timed_out, stopped), (True, False))
        h.kill_all([p], grace=2)
        self.assertIsNotNone(p.poll())
        self.assertLess(time.time() - t0, 10)

    def test_wait_stops_after_a_failure(self):
        ps = [self.start("sh", "-c", "exit 3"), self.start("sleep", "30")]
        timed_out, stopped = h.wait_ranks(ps, time.time() + 20, 0.3, poll_s=0.05)
        self.assertEqual((timed_out, stopped), (False, True))
        h.kill_all(ps, grace=2)
        self.assertEqual(ps[0].returncode, 3)
        self.assertIsNotNone(ps[1].returncode)

    def test_wait_all_done(self):
        ps = [self.start("true"), self.start("true")]
        self.assertEqual(h.wait_ranks(ps, time.time() + 20, 1, poll_s=0.05), (False, False))

    @unittest.skipIf(__import__("importlib").util.find_spec("torch") is not None, "torch is importable here")
    def test_parent_records_the_ranks_failure(self):
        """Without torch every rank fails at its first import: the parent must merge that into a failed result
        with each rank's error, traceback and stderr tail, and never hang."""
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "r.json")
            t0 = time.time()
            code = h.main(["--case-dir", SMOKE_W2, "--out", out, "--timeout", "60", "--fail-grace", "5"])
            self.assertLess(time.time() - t0, 60)
            self.assertEqual(code, 1)
            r = h.read_json(out)
            self.assertEqual((r["format"], r["version"], r["status"], r["failure_kind"]),
                             ("zsim.deepspeed_run", 1, "failed", "exception"))
            self.assertEqual(len(r["ranks"]), 2)
            for i, rk in enumerate(r["ranks"]):
                self.assertEqual(rk["rank"], i)
                self.assertEqual(rk["status"], "failed")
                self.assertIn("torch", rk["error"])
                self.assertEqual(rk["exit_code"], 1)
                self.assertTrue(any("torch" in ln for ln in rk["stderr_tail"]))
            self.assertEqual(r["case"]["world"], 2)
            self.assertEqual(r["options"]["step_kinds"][3], "collectives")
            self.assertTrue(os.path.isfile(os.path.join(d, "r.logs", "rank1.stderr")))
            self.assertIn("failed", h.summary_line(r))


FAKES = os.path.join(HERE, "fakes")


class FakeStackRunTest(unittest.TestCase):
    """The worker's whole control flow on fakes of torch, DeepSpeed and transformers (tests/fakes): everything
    but the numbers. The real run is the device's (device_run.sh)."""

    def run_case(self, case_dir, *extra, env=None):
        old = dict(os.environ)
        os.environ["PYTHONPATH"] = FAKES + os.pathsep + old.get("PYTHONPATH", "")
        os.environ.update(env or {})
        try:
            with tempfile.TemporaryDirectory() as d:
                out = os.path.join(d, "r.json")
                code = h.main(["--case-dir", case_dir, "--out", out, "--steps", "7", *extra])
                r = h.read_json(out)
                with open(out) as f:
                    r["_bytes"] = len(f.read())
                return code, r
        finally:
            os.environ.clear()
            os.environ.update(old)

    def test_world1(self):
        code, r = self.run_case(SMOKE_W1)
        self.assertEqual((code, r["status"], r["error"]), (0, "ok", None), r.get("ranks"))
        self.assertEqual(r["versions"]["deepspeed"], "0.14.5+fake")
        (rk,) = r["ranks"]
        self.assertEqual(rk["stage_reached"], "done")
        kinds = [p["kind"] for p in rk["memory"]["per_step"]]
        self.assertEqual(kinds, ["warmup"] * 3 + ["collectives", "memory_history", "timed", "timed"])
        self.assertEqual(rk["timing"]["timed_steps"], [5, 6])
        self.assertIsNotNone(rk["timing"]["median_step_seconds"])
        # The fake engine never waits for the GPU, and the harness's own synchronize at a step's end is not counted.
        timed = [h for h, k in zip(rk["timing"]["host_per_step"], rk["timing"]["step_kinds"]) if k == "timed"]
        self.assertEqual([h["sync_calls"] for h in timed], [0, 0])
        # The host's speed on autograd's device thread too (the fake runs a backward on a thread of its own).
        self.assertTrue(all(h["autograd_reference_work_seconds"] > 0 for h in timed))
        self.assertTrue(all("autograd_cpu_seconds" in h for h in timed))
        m = rk["memory"]
        for k in ("after_forward", "after_backward", "after_step", "after_initialize", "init", "phase_peaks",
                  "stats", "device"):
            self.assertIn(k, m)
        self.assertGreater(m["after_forward"]["allocated"], m["after_backward"]["allocated"])
        self.assertGreaterEqual(m["peak_allocated"], m["after_forward"]["allocated"])
        self.assertEqual(len(m["points"]), 3)
        # The memory-history step: its replayed peak is the step's max_memory_allocated, in forward.
        live = rk["peak_live_set"]
        self.assertEqual(live["peak_allocated"], live["max_memory_allocated"])
        self.assertEqual(live["end_allocated"], live["end_allocated_actual"])
        self.assertEqual(live["phase_at_peak"], "backward")  # the fake's gradient allocated while the graph lives
        self.assertEqual(live["live_recorded"] + live["live_from_before_recording"], live["peak_allocated"])
        sites = [g["site"] for g in live["groups"]]
        self.assertTrue(any(s.startswith("transformers/__init__.py:") for s in sites), sites)
        # world 1: no collectives of 2+ ranks, stage 2 none at all here; the buffers and the inventory
        self.assertEqual(rk["collectives"]["calls"], [])
        buf = rk["deepspeed_buffers"]["after_steps"]
        paths = [p["path"] for p in buf["by_device"]["cuda"]["paths"]]
        self.assertEqual(paths[:3], ["optimizer.optimizer.state[*]['exp_avg']",  # the largest first
                                     "optimizer.optimizer.state[*]['exp_avg_sq']",
                                     "optimizer.single_partition_of_fp32_groups[*]"])
        self.assertIn("optimizer.bit16_groups_flat[*]", paths)
        self.assertEqual(buf["unattributed_cuda_bytes"], buf["allocated_bytes_at_walk"] - buf["attributed_cuda_bytes"])
        self.assertNotIn("optimizer.optimizer.state[*]['exp_avg']",
                         [p["path"] for p in rk["deepspeed_buffers"]["after_initialize"]["by_device"]["cuda"]["paths"]])
        self.assertIn("optimizer.optimizer.state[*]['exp_avg']", paths)
        self.assertIn("optimizer.__ipg_buffer", paths)
        self.assertNotIn("module.parameters", paths)  # views of the flat buffer, already counted
        self.assertEqual(buf["optimizer_class"], "deepspeed.DeepSpeedZeroOptimizer")
        inv = rk["saved_activations"]
        self.assertNotIn("error", inv)
        self.assertEqual(inv["tokens"], 4 * 2048)
        self.assertEqual(inv["parameter_storages"], 1)  # the weights saved by the linears: one flat storage
        self.assertEqual(len(inv["per_layer_bytes"]), 3)
        self.assertTrue(all(t["module"].startswith("model.layers.0") for t in inv["layer0_tensors"]))
        self.assertEqual(inv["by_class"][0]["class"], "FakeCausalLM")  # the fp32 logits kept for the loss
        self.assertLess(r["_bytes"], 200000)

    def test_world2_stage3_collectives_and_checkpointing(self):
        code, r = self.run_case(SMOKE_W2, "--gc-reentrant", "default")
        self.assertEqual((code, r["status"]), (0, "ok"), r.get("error"))
        self.assertEqual(len(r["ranks"]), 2)
        for rk in r["ranks"]:
            c = rk["collectives"]
            agg = {(a["phase"], a["op"]): a for a in c["calls"]}
            # The backend's captured all_gather_into_tensor (patched before import) and the nested alias, once each
            self.assertEqual(agg[("forward", "all_gather_into_tensor")]["count"], 1)
            self.assertEqual(agg[("forward", "all_gather_into_tensor")]["input_bytes"], 4096)
            self.assertEqual(agg[("forward", "all_gather_into_tensor")]["output_bytes"], 8192)
            self.assertEqual(agg[("forward", "all_gather_into_tensor")]["async_count"], 1)
            self.assertEqual(agg[("forward", "_all_gather_base")]["count"], 1)
            self.assertEqual(agg[("backward", "reduce_scatter_tensor")]["group_size"], 2)
            self.assertEqual(agg[("step", "all_reduce")]["dtype"], "float32")
            self.assertEqual(c["total_calls"], 4)
            self.assertEqual(c["step"], 3)
            self.assertIn("torch.distributed.all_gather_into_tensor", rk["patched_collectives"])
            self.assertIn("torch.distributed.distributed_c10d._all_gather_base", rk["patched_collectives"])
            self.assertIsNone(rk["saved_activations"])  # world 2: no inventory
        self.assertTrue(r["case"]["shared_gpu"])

    def test_checkpointing_recorded(self):
        case = os.path.join(ROOT, "cases", "l150m-z2-w1-mb8-s2048-sdpa-ckpt")
        code, r = self.run_case(case, "--inventory", "off")
        self.assertEqual(r["status"], "ok", r.get("error"))
        gc = r["ranks"][0]["model"]["gradient_checkpointing"]
        self.assertEqual((gc["enabled"], gc["use_reentrant"], gc["kwargs"]), (True, False, {"use_reentrant": False}))
        self.assertEqual(gc["layer_class"], "DecoderLayer")

    def test_a_rank_failing_is_recorded_and_the_other_stopped(self):
        case = os.path.join(ROOT, "cases", "l150m-z3-w2-mb2-s2048-sdpa-qwz")
        t0 = time.time()
        code, r = self.run_case(case, "--fail-grace", "3", env={"FAKE_FORWARD_RAISES": "1", "FAKE_HANG": "1"})
        self.assertLess(time.time() - t0, 60)
        self.assertEqual((code, r["status"], r["failure_kind"], r["expected_status"], r["as_expected"]),
                         (1, "failed", "exception", "failed", True))
        self.assertIn("same dtype", r["error"])
        r0, r1 = r["ranks"]
        self.assertEqual(r0["failure_kind"], "exception")
        self.assertTrue(any("RuntimeError" in ln for ln in r0["traceback"]))
        self.assertEqual(r1["failure_kind"], "killed")
        self.assertIn("memory", r0)  # memory at the failure

    def capped_case(self, d, cap_bytes):
        """SMOKE_W1 with case.json's gpu_memory_cap_bytes set, in folder d."""
        dst = os.path.join(d, "capped")
        shutil.copytree(SMOKE_W1, dst)
        case = h.read_json(os.path.join(dst, "case.json"))
        case["gpu_memory_cap_bytes"] = cap_bytes
        h.write_json_atomic(os.path.join(dst, "case.json"), case)
        return dst

    def test_gpu_memory_cap_makes_a_smaller_gpu(self):
        """The cap is handed to torch's allocator (set_per_process_memory_fraction of the device's total): a run
        that needs more than the cap fails as out of memory, one under it runs and records the cap."""
        code, r = self.run_case(SMOKE_W1, "--inventory", "off")
        self.assertEqual(r["status"], "ok", r.get("error"))
        m = r["ranks"][0]["memory"]
        need = max(m["init"]["peak_reserved"], m["peak_reserved"])
        self.assertIsNone(r["ranks"][0]["gpu_memory_cap"])
        total = 141 << 30  # the fake H200's total_memory
        with tempfile.TemporaryDirectory() as d:
            code, r = self.run_case(self.capped_case(d, 2 * need), "--inventory", "off")
        self.assertEqual((code, r["status"]), (0, "ok"), r.get("error"))
        self.assertEqual(r["case"]["gpu_memory_cap_bytes"], 2 * need)
        self.assertEqual(r["ranks"][0]["gpu_memory_cap"],
                         {"bytes": 2 * need, "fraction": 2 * need / total, "device_total_bytes": total})
        with tempfile.TemporaryDirectory() as d:
            code, r = self.run_case(self.capped_case(d, need // 2), "--inventory", "off")
        self.assertEqual((code, r["status"], r["failure_kind"]), (1, "failed", "oom"), r.get("error"))
        self.assertIn("out of memory", r["error"])

    def test_timeout(self):
        t0 = time.time()
        code, r = self.run_case(SMOKE_W2, "--timeout", "6", env={"FAKE_HANG": "1"})
        self.assertLess(time.time() - t0, 40)
        self.assertEqual((r["status"], r["failure_kind"], r["timed_out"]), ("failed", "timeout", True))
        self.assertEqual(r["ranks"][0]["status"], "ok")  # the fake's rank 0 does not wait for rank 1
        self.assertEqual(r["ranks"][1]["failure_kind"], "timeout")
        self.assertIn("timeout after 6", r["ranks"][1]["error"])
        self.assertIn("stderr_tail", r["ranks"][1])


if __name__ == "__main__":
    unittest.main()
