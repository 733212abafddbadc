"""harness.py's parent and whole run: the ranks' results merged, processes waited for and killed, and the
worker's control flow on fakes of torch, DeepSpeed and transformers (tests/fakes).
Run: cd validate/deepspeed && python3 -m unittest discover -s tests"""
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

from zsim_ds.harness import run_case, run_json  # noqa: E402
from zsim_ds.harness.case import case_summary, load_case  # noqa: E402

SMOKE_W1 = os.path.join(ROOT, "cases", "l150m-z2-w1-mb4-s2048-sdpa")
SMOKE_W2 = os.path.join(ROOT, "cases", "l150m-z3-w2-mb4-s2048-sdpa")


def rank_ok(r, alloc=2**30, step=0.5):
    return {"rank": r, "status": "ok", "error": None, "failure_kind": None, "stage_reached": "done",
            "versions": {"torch": "2.11"}, "memory": {"peak_allocated": alloc, "peak_reserved": 2 * alloc},
            "timing": {"median_step_seconds": step}}


class MergeTest(unittest.TestCase):
    def setUp(self):
        _, case, ds, _ = load_case(SMOKE_W2)
        self.case = case_summary(case, ds, 2)

    def merge(self, ranks, codes, timed_out=False, killed=False):
        return run_json.merge_ranks(self.case, ranks, {"torch": "2.11"}, {"steps": 8}, timed_out, 60, 1.5, "cmd", codes,
                             [["err a"], ["err b"]], killed)

    def test_all_ok(self):
        r = self.merge([rank_ok(0), rank_ok(1)], [0, 0])
        self.assertEqual((r["format"], r["version"], r["status"], r["error"]), ("zsim.deepspeed_run", 1, "ok", None))
        self.assertTrue(r["as_expected"])
        self.assertNotIn("versions", r["ranks"][0])
        self.assertNotIn("stderr_tail", r["ranks"][0])
        line = run_json.summary_line(r)
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
        self.assertIn("error: rank 0: RuntimeError", run_json.summary_line(r))

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
        e = run_case.rank_env({"PATH": "/bin"}, 1, 2, 1234)
        self.assertEqual((e["RANK"], e["WORLD_SIZE"], e["LOCAL_RANK"], e["MASTER_PORT"]), ("1", "2", "0", "1234"))
        self.assertEqual((e["NCCL_HOSTID"], e["NCCL_NET"], e["NCCL_SOCKET_IFNAME"], e["NCCL_IB_DISABLE"]),
                         ("zsim-rank1", "Socket", "lo", "1"))
        self.assertEqual(e["NCCL_NVLS_ENABLE"], "0")
        e1 = run_case.rank_env({}, 0, 1, 5)
        self.assertNotIn("NCCL_HOSTID", e1)
        self.assertEqual(e1["NCCL_NVLS_ENABLE"], "0")

    def start(self, *cmd):
        return subprocess.Popen(list(cmd), start_new_session=True)

    def test_wait_timeout_and_kill_the_group(self):
        # A rank whose child (like a JIT build) also sleeps: killing the group kills both.
        p = self.start("sh", "-c", "sleep 30 & sleep 30")
        t0 = time.time()
        timed_out, stopped = run_case.wait_ranks([p], time.time() + 0.5, 10, poll_s=0.05)
        self.assertEqual((timed_out, stopped), (True, False))
        run_case.kill_all([p], grace=2)
        self.assertIsNotNone(p.poll())
        self.assertLess(time.time() - t0, 10)

    def test_wait_stops_after_a_failure(self):
        ps = [self.start("sh", "-c", "exit 3"), self.start("sleep", "30")]
        timed_out, stopped = run_case.wait_ranks(ps, time.time() + 20, 0.3, poll_s=0.05)
        self.assertEqual((timed_out, stopped), (False, True))
        run_case.kill_all(ps, grace=2)
        self.assertEqual(ps[0].returncode, 3)
        self.assertIsNotNone(ps[1].returncode)

    def test_wait_all_done(self):
        ps = [self.start("true"), self.start("true")]
        self.assertEqual(run_case.wait_ranks(ps, time.time() + 20, 1, poll_s=0.05), (False, False))

    @unittest.skipIf(__import__("importlib").util.find_spec("torch") is not None, "torch is importable here")
    def test_parent_records_the_ranks_failure(self):
        """Without torch every rank fails at its first import: the parent must merge that into a failed result
        with each rank's error, traceback and stderr tail, and never hang."""
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "r.json")
            t0 = time.time()
            code = run_case.main(["--case-dir", SMOKE_W2, "--out", out, "--timeout", "60", "--fail-grace", "5"])
            self.assertLess(time.time() - t0, 60)
            self.assertEqual(code, 1)
            r = run_json.read_json(out)
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
            self.assertIn("failed", run_json.summary_line(r))


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
                code = run_case.main(["--case-dir", case_dir, "--out", out, "--steps", "7", *extra])
                r = run_json.read_json(out)
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
        self.assertEqual((rk["model"]["model_type"], rk["model"]["tied_word_embeddings"]), ("llama", False))
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

    def test_a_family_case_runs_and_records_its_family(self):
        # A case of list 'families' (issue 56): Gemma-2, whose head is tied by its config class's default. The harness
        # names no family's modules: its layers are found by path (model.layers.N), the checkpointed layer by the
        # attribute transformers sets, the head's tie by the model's own accessors.
        code, r = self.run_case(os.path.join(ROOT, "cases", "gemma2-z3-w1-mb2-s2048-sdpa-ckpt"))
        self.assertEqual((code, r["status"], r["error"]), (0, "ok", None), r.get("ranks"))
        (rk,) = r["ranks"]
        self.assertEqual(r["case"]["model"], "gemma2-150m")
        self.assertEqual((rk["model"]["model_type"], rk["model"]["tied_word_embeddings"]), ("gemma2", True))
        self.assertTrue(rk["model"]["gradient_checkpointing"]["enabled"])
        self.assertEqual(rk["model"]["gradient_checkpointing"]["layer_class"], "DecoderLayer")
        inv = rk["saved_activations"]
        self.assertEqual(inv["tokens"], 2 * 2048)
        self.assertEqual(len(inv["per_layer_bytes"]), 3)

    def test_a_moe_case_sets_its_leaf_modules_before_initialize(self):
        # Issue 57: the rank finds MixtralSparseMoeBlock among the model's modules by name and hands the class to
        # deepspeed.utils.set_z3_leaf_modules before deepspeed.initialize: the fake stage-3 engine, which reads the
        # flags at initialize as DeepSpeed does, gathers once more per leaf module (3 layers: 3 more calls).
        code, r = self.run_case(os.path.join(ROOT, "cases", "mixtral-z3-w2-mb2-s1024-sdpa-leaf"))
        self.assertEqual((code, r["status"], r["error"]), (0, "ok", None), r.get("ranks"))
        self.assertEqual(r["case"]["z3_leaf_modules"], ["MixtralSparseMoeBlock"])
        for rk in r["ranks"]:
            leaf = rk["model"]["z3_leaf_modules"]
            self.assertEqual(leaf["classes"], ["transformers.MixtralSparseMoeBlock"])
            self.assertEqual(leaf["call"], "deepspeed.utils.set_z3_leaf_modules(model, [MixtralSparseMoeBlock])")
            self.assertEqual(leaf["modules"], 3)
            self.assertEqual(leaf["module_paths"], ["model.layers.0.mlp", "model.layers.1.mlp", "model.layers.2.mlp"])
            self.assertGreater(leaf["parameters"], 0)
            agg = {(a["phase"], a["op"]): a for a in rk["collectives"]["calls"]}
            self.assertEqual(agg[("forward", "all_gather_into_tensor")]["count"], 1 + 3)
        # Its twin without them: no call, the key recorded as none.
        code, r = self.run_case(os.path.join(ROOT, "cases", "mixtral-z3-w2-mb2-s1024-sdpa"))
        self.assertEqual((code, r["status"]), (0, "ok"), r.get("error"))
        self.assertEqual(r["case"]["z3_leaf_modules"], [])
        for rk in r["ranks"]:
            self.assertIsNone(rk["model"]["z3_leaf_modules"])
            agg = {(a["phase"], a["op"]): a for a in rk["collectives"]["calls"]}
            self.assertEqual(agg[("forward", "all_gather_into_tensor")]["count"], 1)

    def test_a_leaf_class_the_model_lacks_fails_the_case_naming_its_classes(self):
        with tempfile.TemporaryDirectory() as d:
            dst = os.path.join(d, "wrong-leaf")
            shutil.copytree(os.path.join(ROOT, "cases", "qwen3moe-z3-w1-mb2-s1024-sdpa-leaf"), dst)
            case = run_json.read_json(os.path.join(dst, "case.json"))
            self.assertEqual(case["z3_leaf_modules"], ["Qwen3MoeSparseMoeBlock"])
            case["z3_leaf_modules"] = ["MixtralSparseMoeBlock"]  # another family's block
            run_json.write_json_atomic(os.path.join(dst, "case.json"), case)
            code, r = self.run_case(dst, "--inventory", "off")
        self.assertEqual((code, r["status"], r["failure_kind"]), (1, "failed", "exception"))
        self.assertIn("no module of class MixtralSparseMoeBlock", r["error"])
        self.assertIn("Qwen3MoeSparseMoeBlock", r["error"])
        self.assertEqual(r["ranks"][0]["stage_reached"], "start")  # before deepspeed.initialize

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
        case = run_json.read_json(os.path.join(dst, "case.json"))
        case["gpu_memory_cap_bytes"] = cap_bytes
        run_json.write_json_atomic(os.path.join(dst, "case.json"), case)
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
