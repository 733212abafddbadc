"""The transformers and torch sources a device run's models ran, copied beside its results (device_run.sh): the
shared files every causal LM runs through, and each case's own family (its config.json's model_type), so that the
record names the code of every family it measured, not Llama's and GPT-2's only.

    python3 -m zsim_ds.harness.sources DEST CASE_DIR...     # (from validate/deepspeed/, transformers importable)

The list itself is pure (no torch, no transformers): the unit tests check it on a made-up tree."""
import json
import os
import shutil
import sys

# Shared by every family: attention back-ends, the model base classes, the loss, the masks, activations, RoPE,
# transformers' DeepSpeed integration, and its experts back-ends (transformers 5's mixtures of experts: eager,
# grouped_mm, batched_mm; listed missing where a transformers has none).
SHARED_FILES = ("integrations/sdpa_attention.py", "integrations/deepspeed.py", "modeling_utils.py",
                "modeling_layers.py", "loss/loss_utils.py", "masking_utils.py", "activations.py", "pytorch_utils.py",
                "modeling_rope_utils.py", "integrations/moe.py")

# The families the committed records ran before the per-case list: always dumped, as those records did.
ALWAYS_MODEL_TYPES = ("llama", "gpt2")


def model_types_of(case_dirs):
    """The model_type of each case folder's config.json, in order, once each; a folder without one is skipped."""
    out = []
    for d in case_dirs:
        try:
            with open(os.path.join(d, "config.json")) as f:
                mt = json.load(f).get("model_type")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(mt, str) and mt and mt not in out:
            out.append(mt)
    return out


def module_folder(model_type, transformers_dir, module_name=None):
    """transformers/models/<folder>/ of a model_type: `module_name(model_type)` (transformers'
    model_type_to_module_name where importable: gemma3_text -> gemma3), else the model_type with '-' as '_', else
    (a text-only variant) without its '_text' suffix; None where no such folder exists."""
    candidates = []
    if module_name is not None:
        try:
            candidates.append(module_name(model_type))
        except Exception:  # noqa: BLE001 -- an unknown type: the plain guesses below
            pass
    plain = model_type.replace("-", "_")
    candidates += [plain, plain[:-len("_text")] if plain.endswith("_text") else None]
    for c in candidates:
        if c and os.path.isdir(os.path.join(transformers_dir, "models", c)):
            return c
    return None


def source_files(transformers_dir, model_types, module_name=None):
    """(relative paths under transformers_dir that exist, the ones wanted but missing): SHARED_FILES, then for each
    model type (ALWAYS_MODEL_TYPES first) its folder's configuration_*.py and modeling_*.py."""
    wanted, found, missing = [], [], []
    for mt in list(ALWAYS_MODEL_TYPES) + [t for t in model_types if t not in ALWAYS_MODEL_TYPES]:
        folder = module_folder(mt, transformers_dir, module_name)
        if folder is None:
            missing.append(f"models/<{mt}>/")
            continue
        d = os.path.join(transformers_dir, "models", folder)
        names = sorted(n for n in os.listdir(d)
                       if n.endswith(".py") and n.startswith(("configuration_", "modeling_")))
        wanted += [f"models/{folder}/{n}" for n in names]
        if not names:
            missing.append(f"models/{folder}/modeling_*.py")
    for rel in list(SHARED_FILES) + wanted:
        if rel in found:
            continue
        (found if os.path.isfile(os.path.join(transformers_dir, rel)) else missing).append(rel)
    return found, missing


def dump(dest, case_dirs):
    """Copies the sources into dest/transformers/... and torch's utils/checkpoint.py into dest/torch/utils/, writes
    dest/VERSIONS.txt; returns the missing files."""
    import torch
    import transformers
    tdir = os.path.dirname(transformers.__file__)
    try:
        from transformers.models.auto.configuration_auto import model_type_to_module_name
    except Exception:  # noqa: BLE001 -- older or newer transformers: the plain guesses
        model_type_to_module_name = None
    types = model_types_of(case_dirs)
    found, missing = source_files(tdir, types, model_type_to_module_name)
    for rel in found:
        os.makedirs(os.path.dirname(os.path.join(dest, "transformers", rel)), exist_ok=True)
        shutil.copy(os.path.join(tdir, rel), os.path.join(dest, "transformers", rel))
    ck = os.path.join(os.path.dirname(torch.__file__), "utils", "checkpoint.py")
    if os.path.isfile(ck):
        os.makedirs(os.path.join(dest, "torch", "utils"), exist_ok=True)
        shutil.copy(ck, os.path.join(dest, "torch", "utils", "checkpoint.py"))
    else:
        missing.append("torch/utils/checkpoint.py")
    with open(os.path.join(dest, "VERSIONS.txt"), "w") as f:
        f.write(f"transformers {transformers.__version__} ({tdir})\ntorch {torch.__version__}\n"
                f"model types: {types}\nmissing: {missing}\n")
    return missing


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        print(__doc__)
        return 2
    os.makedirs(argv[0], exist_ok=True)
    missing = dump(argv[0], argv[1:])
    print("sources dumped; missing:", missing or "none")
    return 0


if __name__ == "__main__":
    sys.exit(main())
