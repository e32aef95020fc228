"""The package imports one way (CONTRIBUTING.md, "Layers"):

    0 description   npkit.toolchain.{isa,image,image_schema,schema,reading,writing,yaml_data,cache}  the ISA,
                    the image format, schemas, reading and writing files, the content cache
    1 tools         npkit.asm | npkit.emulator (incl. traffic)      each on layer 0 only, not on each other
    2 system        npkit.toolchain.{system,router,debug,graph,experiment}, npkit.xscale
    3 commands      every cli module, npkit.toolchain.commands, benchmarks (bench modules, the registry)

A module may import its own layer and the layers below, never above.  The check reads
every module's import statements (including imports inside functions) with `ast`."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"asm": "npkit.asm", "emulator": "npkit.emulator", "toolchain": "npkit.toolchain", "xscale": "npkit.xscale"}
DESCRIPTION = ("npkit.toolchain.isa", "npkit.toolchain.image", "npkit.toolchain.schema", "npkit.toolchain.image_schema",
               "npkit.toolchain.reading", "npkit.toolchain.writing", "npkit.toolchain.yaml_data",
               "npkit.toolchain.cache")  # fmt: skip
SYSTEM = ("npkit.toolchain.system", "npkit.toolchain.router", "npkit.toolchain.debug", "npkit.toolchain.graph",
          "npkit.toolchain.experiment", "npkit.xscale")  # fmt: skip


def _under(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def layer(module: str) -> tuple[int, str]:
    """(layer, group); the group separates the siblings of layer 1."""
    last = module.rsplit(".", 1)[-1]
    if (last in ("cli", "bench") or last.endswith("_bench") or module == "npkit.toolchain.bench"
            or _under(module, ("npkit.toolchain.commands",))):  # fmt: skip
        return 3, "commands"
    if _under(module, DESCRIPTION) or module in ("npkit", "npkit.toolchain"):
        return 0, "description"
    if _under(module, ("npkit.asm",)):
        return 1, "asm"
    if _under(module, ("npkit.emulator",)):
        return 1, "emulator"
    if _under(module, SYSTEM):
        return 2, "system"
    raise AssertionError(f"{module}: not placed in a layer (add it to tests/test_layers.py)")


def modules() -> dict[str, Path]:
    out = {}
    for top, pkg in PACKAGES.items():
        for f in (ROOT / top).rglob("*.py"):
            rel = f.relative_to(ROOT / top).with_suffix("")
            if "tests" in rel.parts or "build" in rel.parts:
                continue  # test drivers and scripts beside the package, not modules of it
            parts = [p for p in rel.parts if p != "__init__"]
            if top == "toolchain" and parts[:1] == ["npkit"]:  # toolchain/npkit/ is the root package
                out["npkit"] = f
                continue
            out[".".join([pkg, *parts])] = f
    return out


def imports(module: str, path: Path) -> set[str]:
    is_pkg = path.name == "__init__.py"
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("npkit")}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base[: len(base) - node.level + (1 if is_pkg else 0)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.startswith("npkit"):
                found.add(target)
    return found


def test_every_import_goes_down_or_sideways_within_its_layer() -> None:
    mods = modules()
    assert "npkit.emulator.loader" in mods and "npkit.toolchain.commands.run" in mods
    wrong = []
    for mod, path in sorted(mods.items()):
        lm, gm = layer(mod)
        for target in sorted(imports(mod, path)):
            lt, gt = layer(target)
            if lt > lm or (lt == lm == 1 and gt != gm):
                wrong.append(f"{mod} (layer {lm} {gm}) imports {target} (layer {lt} {gt})")
    assert not wrong, "\n".join(wrong)


def test_the_check_sees_an_upward_import(tmp_path: Path) -> None:
    """The checker itself: an emulator module importing the linker is flagged."""
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from npkit.toolchain.system.link import link\n")
    (lt, _), (lm, _) = layer("npkit.toolchain.system.link"), layer("npkit.emulator.bad")
    assert imports("npkit.emulator.bad", bad) == {"npkit.toolchain.system.link"} and lt > lm
