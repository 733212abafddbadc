"""make_cases.py: the case table, the generated ds_config / scenario, and that the committed cases are up to date.
Run: cd validate/deepspeed && python3 -m unittest discover -s tests   (no torch needed)"""
import json
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from zsim_ds.case_tools import make_cases as mc  # noqa: E402

HEADER = "\t".join(mc.COLUMNS)
# The transformers families of list 'families' (issue 56): model folder -> (model_type, architectures[0]).
FAMILY_MODELS = {"qwen2-150m": ("qwen2", "Qwen2ForCausalLM"), "qwen3-150m": ("qwen3", "Qwen3ForCausalLM"),
                 "gemma2-150m": ("gemma2", "Gemma2ForCausalLM"), "phi3-150m": ("phi3", "Phi3ForCausalLM"),
                 "olmo2-150m": ("olmo2", "Olmo2ForCausalLM")}

# The mixtures of experts of list 'moe' (issue 57): model folder -> (model_type, architectures[0], the sparse block's
# class, the parameters counted by hand from the shapes).
MOE_MODELS = {"mixtral-moe-s": ("mixtral", "MixtralForCausalLM", "MixtralSparseMoeBlock", 443106304),
              "qwen3moe-s": ("qwen3_moe", "Qwen3MoeForCausalLM", "Qwen3MoeSparseMoeBlock", 287983616)}


def moe_parameters(c):
    """A Mixtral / Qwen3-MoE config.json's parameters as transformers 5.17 builds them (every layer sparse): the
    embedding and the untied head V x h, per layer q, k, v, o, the two norms (Qwen3's q/k norms of head_dim too), the
    router E x h and the experts' E x 3 x h x F (gate_up_proj [E, 2F, h], down_proj [E, h, F]), the final norm."""
    h, v = c["hidden_size"], c["vocab_size"]
    hd = c.get("head_dim") or h // c["num_attention_heads"]
    e = c.get("num_local_experts", c.get("num_experts"))
    f = c.get("moe_intermediate_size", c["intermediate_size"])
    attn = 2 * h * c["num_attention_heads"] * hd + 2 * h * c["num_key_value_heads"] * hd
    norms = 2 * h + (2 * hd if c["model_type"] == "qwen3_moe" else 0)
    layer = attn + norms + e * h + e * 3 * h * f
    return 2 * v * h + c["num_hidden_layers"] * layer + h


def table(*rows):
    return "# comment\n" + HEADER + "\n" + "".join("\t".join(r) + "\n" for r in rows)


ROW = ["c1", "llama-150m", "3", "4", "2", "2048", "sdpa", "full", "1", "hpz2,qgz", "-", "core,smoke", "ok", "-"]


def write_root(d):
    """A make_cases root in d: the model ROW names (its committed config.json) and a table of ROW."""
    os.makedirs(os.path.join(d, "models", "llama-150m"))
    with open(os.path.join(ROOT, "models", "llama-150m", "config.json")) as f:
        cfg = f.read()
    with open(os.path.join(d, "models", "llama-150m", "config.json"), "w") as f:
        f.write(cfg)
    with open(os.path.join(d, "cases.tsv"), "w") as f:
        f.write(table(ROW))


class TableTest(unittest.TestCase):
    def test_parses_a_row(self):
        (r,) = mc.parse_table(table(ROW))
        self.assertEqual(r["name"], "c1")
        self.assertEqual((r["stage"], r["world"], r["micro_batch"], r["seq_len"], r["grad_accum"]), (3, 4, 2, 2048, 1))
        self.assertEqual(r["lists"], ["core", "smoke"])
        self.assertIsNone(r["steps"])
        self.assertEqual(r["note"], "")
        self.assertEqual(r["zero_changes"], [("zero_hpz_partition_size", 2), ("zero_quantized_gradients", True)])

    def test_errors_name_the_line(self):
        cases = {
            "header": "name\tmodel\n",
            "cells": table(ROW[:5]),
            "int": table(ROW[:2] + ["x"] + ROW[3:]),
            "attention": table(ROW[:6] + ["flash"] + ROW[7:]),
            "duplicate": table(ROW, ROW),
            "token": table(ROW[:9] + ["offload"] + ROW[10:]),
            "name": table(["a b"] + ROW[1:]),
            "expect": table(ROW[:12] + ["maybe", "-"]),
        }
        for what, text in cases.items():
            with self.subTest(what):
                with self.assertRaises(mc.CaseTableError) as cm:
                    mc.parse_table(text, "t.tsv")
                self.assertIn("t.tsv", str(cm.exception))

    def test_zero_tokens(self):
        self.assertEqual(mc.parse_zero_tokens("-"), [])
        self.assertEqual(mc.parse_zero_tokens("offopt,offparam"),
                         [("offload_optimizer.device", "cpu"), ("offload_optimizer.pin_memory", True),
                          ("offload_param.device", "cpu"), ("offload_param.pin_memory", True)])
        self.assertEqual(mc.parse_zero_tokens("qwz,reduce_bucket_size=5e7,overlap_comm=true,x=abc"),
                         [("zero_quantized_weights", True), ("reduce_bucket_size", 50000000), ("overlap_comm", True),
                          ("x", "abc")])

    def test_leaf_token_is_no_zero_key(self):
        # leaf=<Class>: the rank's deepspeed.utils.set_z3_leaf_modules call, never a zero_optimization key.
        self.assertEqual(mc.split_leaf_tokens("-"), ([], "-"))
        self.assertEqual(mc.split_leaf_tokens("leaf=MixtralSparseMoeBlock"), (["MixtralSparseMoeBlock"], "-"))
        self.assertEqual(mc.split_leaf_tokens("offopt, leaf=Qwen3MoeSparseMoeBlock,qgz"),
                         (["Qwen3MoeSparseMoeBlock"], "offopt,qgz"))
        (r,) = mc.parse_table(table(ROW[:9] + ["hpz2,leaf=MixtralSparseMoeBlock"] + ROW[10:]))
        self.assertEqual(r["z3_leaf_modules"], ["MixtralSparseMoeBlock"])
        self.assertEqual(r["zero_changes"], [("zero_hpz_partition_size", 2)])
        self.assertNotIn("leaf", json.dumps(mc.ds_config_for(r)))
        (plain,) = mc.parse_table(table(ROW))
        self.assertEqual(plain["z3_leaf_modules"], [])
        with self.assertRaises(ValueError):
            mc.parse_zero_tokens("leaf=MixtralSparseMoeBlock")  # only after split_leaf_tokens

    def test_leaf_token_errors_name_the_line(self):
        cases = {
            "two classes": table(ROW[:9] + ["leaf=A,leaf=B"] + ROW[10:]),
            "not a class name": table(ROW[:9] + ["leaf=a.b"] + ROW[10:]),
            "empty": table(ROW[:9] + ["leaf="] + ROW[10:]),
            "stage 2": table(ROW[:2] + ["2"] + ROW[3:9] + ["leaf=MixtralSparseMoeBlock"] + ROW[10:]),
        }
        for what, text in cases.items():
            with self.subTest(what):
                with self.assertRaises(mc.CaseTableError) as cm:
                    mc.parse_table(text, "t.tsv")
                self.assertIn("t.tsv:3: zero:", str(cm.exception))  # line 1: a comment, 2: the header


class GeneratedFilesTest(unittest.TestCase):
    def row(self, **kw):
        (r,) = mc.parse_table(table(ROW))
        r.update(kw)
        return r

    def test_ds_config_per_stage(self):
        ds0 = mc.ds_config_for(self.row(stage=0, zero_changes=[]))
        self.assertEqual(ds0["zero_optimization"], {"stage": 0})
        self.assertEqual(ds0["bf16"], {"enabled": True})
        self.assertEqual(ds0["optimizer"], {"type": "AdamW", "params": {"lr": 1e-4}})
        self.assertNotIn("train_batch_size", ds0)  # DeepSpeed derives it from the world size
        ds2 = mc.ds_config_for(self.row(stage=2, zero_changes=[("offload_optimizer.device", "cpu")]))
        z = ds2["zero_optimization"]
        self.assertEqual(z["reduce_bucket_size"], 500000000)
        self.assertFalse(z["overlap_comm"])
        self.assertEqual(z["offload_optimizer"], {"device": "cpu"})
        ds3 = mc.ds_config_for(self.row())
        z = ds3["zero_optimization"]
        self.assertTrue(z["overlap_comm"])
        self.assertEqual(z["stage3_prefetch_bucket_size"], 50000000)
        self.assertEqual(z["zero_hpz_partition_size"], 2)
        self.assertTrue(z["zero_quantized_gradients"])
        self.assertEqual(ds3["train_micro_batch_size_per_gpu"], 2)
        self.assertEqual(ds3["gradient_accumulation_steps"], 1)

    def test_scenario(self):
        text = mc.scenario_for(self.row(attention="eager", checkpointing="none"))
        for line in ("  hf_config: config.json", "  attention: eager", "  micro_batch: 2", "  seq_len: 2048",
                     "  activation_checkpointing: none", "  precision: bf16", "  gpu: h200-141gb",
                     "  ds_config: ds_config.json", "  links: {nvlink_GBps"):
            self.assertIn(line, text)
        self.assertIn("attention: flash", mc.scenario_for(self.row(attention="sdpa")))
        # Only keys docs/scenario.md lists, at the nesting it expects.
        tops = [ln.split(":")[0] for ln in text.splitlines() if ln and not ln.startswith((" ", "#"))]
        self.assertEqual(tops, ["model", "training", "cluster", "deepspeed"])

    def test_leaf_modules_in_case_json_and_scenario(self):
        row = self.row(z3_leaf_modules=["MixtralSparseMoeBlock"])
        self.assertEqual(mc.case_json_for(row)["z3_leaf_modules"], ["MixtralSparseMoeBlock"])
        text = mc.scenario_for(row)
        model_block = text.split("\nmodel:\n", 1)[1].split("\ntraining:", 1)[0]
        self.assertIn("  z3_leaf_modules: MixtralSparseMoeBlock  #", model_block)
        # Without one: neither key (the committed cases' files stay as they were).
        self.assertNotIn("z3_leaf_modules", mc.case_json_for(self.row()))
        self.assertNotIn("z3_leaf_modules", mc.scenario_for(self.row()))

    def test_ranks_sharing_a_gpu_are_one_node(self):
        text = mc.scenario_for(self.row(zero="hpz2", zero_changes=[("zero_hpz_partition_size", 2)]))
        self.assertIn("  nodes: 1\n", text)
        self.assertIn("  gpus_per_node: 4", text)

    def test_qgz_sees_each_rank_sharing_a_gpu_as_a_node(self):
        # DeepSpeed 0.14.5's qgZ takes a node's size from the GPUs a process sees: one when the ranks share it.
        text = mc.scenario_for(self.row(zero="qgz", zero_changes=[("zero_quantized_gradients", True)]))
        self.assertIn("  nodes: 4\n", text)
        self.assertIn("  gpus_per_node: 1", text)
        self.assertIn("ib_GBps", text)

    def test_qgz_with_hpz_stays_one_node(self):
        # zsim keeps hpZ's secondary partition inside a node: the one-GPU nodes qgZ sees cannot hold it.
        text = mc.scenario_for(self.row(zero="hpz2,qgz", zero_changes=[("zero_hpz_partition_size", 2), ("zero_quantized_gradients", True)]))
        self.assertIn("  nodes: 1\n", text)
        self.assertIn("  gpus_per_node: 4", text)

    def test_committed_cases_are_up_to_date(self):
        self.assertEqual(mc.main(["--check"]), 0)

    def test_committed_cases_cover_the_brief(self):
        with open(os.path.join(ROOT, "cases.tsv")) as f:
            every = mc.parse_table(f.read())
        def in_a_fit_list(r):  # the step-time fit's own cases (lists fit, fit2) are set apart
            return any(name.startswith("fit") for name in r["lists"])
        rows = [r for r in every if not in_a_fit_list(r)]
        fit = [r for r in every if in_a_fit_list(r)]
        self.assertFalse({r["model"] for r in fit} & {r["model"] for r in rows})
        self.assertFalse(any("steptime" in r["lists"] for r in fit))
        self.assertGreaterEqual(len([r for r in rows if "steptime" in r["lists"]]), 12)
        self.assertGreaterEqual(len(rows), 28)
        self.assertEqual({r["stage"] for r in rows}, {0, 1, 2, 3})
        self.assertEqual({r["checkpointing"] for r in rows}, {"full", "none"})
        self.assertEqual({r["attention"] for r in rows}, {"sdpa", "eager"})
        self.assertEqual({r["world"] for r in rows}, {1, 2, 4})
        self.assertEqual({r["model"] for r in rows},
                         {"llama-150m", "llama-1.3b", "gpt2-124m"} | set(FAMILY_MODELS) | set(MOE_MODELS))
        self.assertLessEqual(min(r["micro_batch"] for r in rows), 1)
        self.assertGreaterEqual(max(r["micro_batch"] for r in rows), 8)
        self.assertEqual(min(r["seq_len"] for r in rows), 1024)
        self.assertEqual(max(r["seq_len"] for r in rows), 4096)
        self.assertTrue(any(r["grad_accum"] == 2 for r in rows))
        keys = [dict(r["zero_changes"]) for r in rows]
        self.assertTrue(any(k.get("offload_optimizer.device") == "cpu" and r["stage"] == 2 for k, r in zip(keys, rows)))
        self.assertTrue(any(k.get("offload_optimizer.device") == "cpu" and r["stage"] == 3 for k, r in zip(keys, rows)))
        self.assertTrue(any(k.get("offload_param.device") == "cpu" for k in keys))
        self.assertTrue(any(k.get("zero_hpz_partition_size") == 2 and r["world"] == 4 for k, r in zip(keys, rows)))
        self.assertTrue(any(k.get("zero_quantized_gradients") for k in keys))
        qwz = [r for k, r in zip(keys, rows) if k.get("zero_quantized_weights")]
        self.assertTrue(qwz and all(r["world"] == 2 and r["expect"] == "failed" for r in qwz))
        smoke = [r["name"] for r in rows if "smoke" in r["lists"]]
        self.assertEqual(smoke, ["l150m-z2-w1-mb4-s2048-sdpa", "l150m-z3-w2-mb4-s2048-sdpa"])

    def test_families_list_covers_issue_56(self):
        # Record DS-A's missing families (issue 56): every stage, checkpointing on and off, 1 rank and 2 / 4 ranks
        # sharing the GPU, over Qwen2, Qwen3, Gemma-2, Phi-3 and OLMo-2, plus Llama's stage 3 with gradient
        # accumulation 2 and checkpointing on 2 ranks (zsim's extra parameter all-gather).
        with open(os.path.join(ROOT, "cases.tsv")) as f:
            rows = [r for r in mc.parse_table(f.read()) if "families" in r["lists"]]
        fam = [r for r in rows if r["model"] in FAMILY_MODELS]
        self.assertGreaterEqual(len(fam), 18)
        self.assertEqual({r["model"] for r in fam}, set(FAMILY_MODELS))
        self.assertEqual({r["stage"] for r in fam}, {0, 1, 2, 3})
        self.assertEqual({r["checkpointing"] for r in fam}, {"full", "none"})
        self.assertEqual({r["world"] for r in fam}, {1, 2, 4})
        for model in FAMILY_MODELS:  # each family on one rank (step time) and on several (collectives)
            self.assertTrue(any(r["model"] == model and r["world"] == 1 for r in fam), model)
            self.assertTrue(any(r["model"] == model and r["world"] > 1 for r in fam), model)
        self.assertTrue(any(r["model"] == "gemma2-150m" and r["attention"] == "eager" for r in fam))
        self.assertTrue(all(1024 <= r["seq_len"] <= 2048 and r["micro_batch"] <= 4 for r in rows))
        llama = [(r["model"], r["stage"], r["world"], r["grad_accum"], r["checkpointing"])
                 for r in rows if r["model"] not in FAMILY_MODELS]
        self.assertEqual(llama, [("llama-150m", 3, 2, 2, "full")])

    def test_moe_list_covers_issue_57(self):
        # Issue 57's record: Mixtral- and Qwen3-MoE-shaped models at stages 2 and 3, stage 3 with and without leaf
        # modules, checkpointing on and off, 1 rank and 2 / 4 ranks sharing the GPU, sequences 1024-2048, micro-batch
        # 1-2; each leaf case names its model's own sparse block class.
        with open(os.path.join(ROOT, "cases.tsv")) as f:
            rows = [r for r in mc.parse_table(f.read()) if "moe" in r["lists"]]
        self.assertGreaterEqual(len(rows), 12)
        self.assertEqual({r["model"] for r in rows}, set(MOE_MODELS))
        for model in MOE_MODELS:
            mine = [r for r in rows if r["model"] == model]
            self.assertEqual({r["stage"] for r in mine}, {2, 3}, model)
            self.assertEqual({bool(r["z3_leaf_modules"]) for r in mine if r["stage"] == 3}, {True, False}, model)
            self.assertEqual({r["checkpointing"] for r in mine}, {"full", "none"}, model)
            self.assertTrue(any(r["world"] == 1 for r in mine) and any(r["world"] > 1 for r in mine), model)
            for r in mine:
                self.assertEqual(r["z3_leaf_modules"], [MOE_MODELS[model][2]] if r["z3_leaf_modules"] else [])
        self.assertEqual({r["world"] for r in rows}, {1, 2, 4})
        self.assertTrue(all(1024 <= r["seq_len"] <= 2048 and 1 <= r["micro_batch"] <= 2 for r in rows))
        # Every multi-rank stage-3 case without leaf modules has its twin with them (the collectives side by side).
        names = {r["name"] for r in rows}
        for r in rows:
            if r["world"] > 1 and r["stage"] == 3 and not r["z3_leaf_modules"]:
                self.assertIn(r["name"] + "-leaf", names)

    def test_moe_models(self):
        for name, (model_type, arch, _, params) in MOE_MODELS.items():
            with open(os.path.join(ROOT, "models", name, "config.json")) as f:
                c = json.load(f)
            self.assertEqual((c["model_type"], c["architectures"]), (model_type, [arch]), name)
            self.assertIs(c["use_cache"], False, name)
            self.assertFalse(c["tie_word_embeddings"], name)
            self.assertFalse(c["output_router_logits"], name)  # no auxiliary loss: the plain LM loss
            self.assertIsNone(c["sliding_window"], name)
            self.assertEqual(moe_parameters(c), params, name)
            self.assertLess(params, 600e6, name)  # 4 ranks at stage 2 well inside one 80 GB GPU
        with open(os.path.join(ROOT, "models", "qwen3moe-s", "config.json")) as f:
            q = json.load(f)
        # Every layer sparse (Qwen3MoeDecoderLayer: not in mlp_only_layers and (i + 1) % decoder_sparse_step == 0).
        self.assertEqual((q["decoder_sparse_step"], q["mlp_only_layers"], q["head_dim"]), (1, [], 64))

    def test_family_models(self):
        # Llama-150M's shape in each family's own config.json: its model_type and architectures, widths kept small
        # (head_dim 64 where the family's default is wider), the family's defaults otherwise (Gemma-2 ties its head).
        for name, (model_type, arch) in FAMILY_MODELS.items():
            with open(os.path.join(ROOT, "models", name, "config.json")) as f:
                c = json.load(f)
            self.assertEqual((c["model_type"], c["architectures"]), (model_type, [arch]), name)
            self.assertEqual((c["hidden_size"], c["num_hidden_layers"], c["num_attention_heads"],
                              c["num_key_value_heads"], c["intermediate_size"], c["vocab_size"]),
                             (768, 12, 12, 12, 2048, 32000), name)
            self.assertIs(c["use_cache"], False, name)
            self.assertEqual(c.get("head_dim", 64), 64, name)
            pad = c.get("pad_token_id")
            self.assertTrue(pad is None or 0 <= pad < c["vocab_size"], name)  # an embedding's padding_idx
        for name in ("qwen3-150m", "gemma2-150m"):
            with open(os.path.join(ROOT, "models", name, "config.json")) as f:
                self.assertEqual(json.load(f)["head_dim"], 64)
        with open(os.path.join(ROOT, "models", "gemma2-150m", "config.json")) as f:
            self.assertNotIn("tie_word_embeddings", json.load(f))  # Gemma2Config's default: tied

    def test_models(self):
        for name, want in (("llama-150m", (768, 12, 12, 12, 2048)), ("llama-1.3b", (2048, 24, 16, 4, 5632))):
            with open(os.path.join(ROOT, "models", name, "config.json")) as f:
                c = json.load(f)
            self.assertEqual((c["hidden_size"], c["num_hidden_layers"], c["num_attention_heads"],
                              c["num_key_value_heads"], c["intermediate_size"]), want)
            self.assertEqual(c["vocab_size"], 32000)
            self.assertFalse(c["tie_word_embeddings"])
            self.assertEqual(c["model_type"], "llama")
        with open(os.path.join(ROOT, "models", "gpt2-124m", "config.json")) as f:
            g = json.load(f)
        self.assertEqual((g["n_embd"], g["n_layer"], g["n_head"], g["n_positions"], g["vocab_size"]),
                         (768, 12, 12, 4096, 50257))

    def test_writes_into_a_fresh_root(self):
        with tempfile.TemporaryDirectory() as d:
            write_root(d)
            os.makedirs(os.path.join(d, "cases", "stale"))
            with open(os.path.join(d, "cases", "stale", "case.json"), "w") as f:
                f.write("{}")
            self.assertEqual(mc.main(["--root", d, "--check"]), 1)
            self.assertEqual(mc.main(["--root", d]), 0)
            self.assertFalse(os.path.exists(os.path.join(d, "cases", "stale")))
            self.assertEqual(sorted(os.listdir(os.path.join(d, "cases", "c1"))),
                             ["case.json", "config.json", "ds_config.json", "scenario.yaml"])
            with open(os.path.join(d, "lists", "smoke.txt")) as f:
                self.assertEqual(f.read(), "c1\n")
            self.assertEqual(mc.main(["--root", d, "--check"]), 0)

    def test_leaves_another_generators_cases_and_lists(self):
        with tempfile.TemporaryDirectory() as d:
            write_root(d)
            os.makedirs(os.path.join(d, "cases", "adv-x"))
            with open(os.path.join(d, "cases", "adv-x", "case.json"), "w") as f:
                json.dump({"generator": "advise_cases.py"}, f)
            os.makedirs(os.path.join(d, "lists"))
            with open(os.path.join(d, "lists", "advise.txt"), "w") as f:
                f.write("adv-x\n")
            with open(os.path.join(d, "lists", "mixed.txt"), "w") as f:  # names a case of the table: make_cases's
                f.write("adv-x\nc1\n")
            self.assertEqual(mc.main(["--root", d]), 0)
            self.assertTrue(os.path.isfile(os.path.join(d, "cases", "adv-x", "case.json")))
            self.assertTrue(os.path.isfile(os.path.join(d, "lists", "advise.txt")))
            self.assertFalse(os.path.exists(os.path.join(d, "lists", "mixed.txt")))
            self.assertEqual(mc.main(["--root", d, "--check"]), 0)


if __name__ == "__main__":
    unittest.main()


class ProfileBlocksTest(unittest.TestCase):
    PROFILE = ("cluster:\n  efficiency:\n    deepspeed_host:\n      forward_fixed_us: 641.4  # note\n"
               "    outside_allocator_bytes: 5\n    gemm: 0.668  # torch's\n"
               "    torch_misaligned_gemm:\n      forward: 0.0958\n      backward: 0.1479\n"
               "    hbm_by_kind:\n      norm: 0.448\n      softmax_backward: 0.566\n")

    def profile(self, text):
        d = tempfile.mkdtemp()
        path = os.path.join(d, "profile.yaml")
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_the_misaligned_gemm_block_becomes_one_scenario_line(self):
        path = self.profile(self.PROFILE)
        self.assertEqual(mc.block_line("torch_misaligned_gemm", path), "    torch_misaligned_gemm: {forward: 0.0958, backward: 0.1479}\n")
        self.assertEqual(mc.host_figures(path), "forward_fixed_us: 641.4")  # the block ends at the next key

    def test_torchs_kernel_kinds_and_gemm_efficiency_become_scenario_lines(self):
        path = self.profile(self.PROFILE)
        self.assertEqual(mc.block_line("hbm_by_kind", path), "    hbm_by_kind: {norm: 0.448, softmax_backward: 0.566}\n")
        self.assertEqual(mc.gemm_line(path), "    gemm: 0.668\n")

    def test_a_profile_without_the_blocks_writes_no_lines(self):
        path = self.profile(self.PROFILE.split("    gemm:")[0])
        self.assertEqual(mc.block_line("torch_misaligned_gemm", path), "")
        self.assertEqual(mc.block_line("hbm_by_kind", path), "")
        self.assertEqual(mc.gemm_line(path), "")
        self.assertEqual(mc.cpu_adam_line(path), "")

    def test_deepspeeds_cpu_adam_rates_become_one_scenario_line(self):
        line = "    cpu_adam_measured: {ranks_1: {threads_1: 6e+08, threads_16: 3.5e+09}}\n"
        path = self.profile(self.PROFILE + line)
        self.assertEqual(mc.cpu_adam_line(path), line)

    def test_a_cpu_adam_block_not_in_the_probes_form_is_an_error_naming_the_file(self):
        path = self.profile(self.PROFILE + "    cpu_adam_measured: {ranks_1: fast}\n")
        with self.assertRaisesRegex(mc.CaseTableError, "profile.yaml: efficiency.cpu_adam_measured must be"):
            mc.cpu_adam_line(path)
