"""deepspeed.utils of the fake: set_z3_leaf_modules as DeepSpeed 0.14.5's utils/z3_leaf_module.py does it (classes,
not names; the exact class of each module; the `_z3_leaf` flag; a ValueError where no module matches)."""


def set_z3_leaf_modules(model, leaf_module_classes):
    assert all(isinstance(c, type) for c in leaf_module_classes), \
        f"leaf_module_classes must be a list of types, got {leaf_module_classes}"
    leaves = []
    for m in model.modules():
        if m.__class__ in leaf_module_classes:
            m._z3_leaf = True
            leaves.append(m)
    if not leaves:
        raise ValueError(f"No modules of type {leaf_module_classes} found in model {model}")
    return leaves


def z3_leaf_module(model):
    return getattr(model, "_z3_leaf", False)
