"""The package imports one way (CONTRIBUTING.md, "Layers").

Folders, bottom to top; a folder imports only the folders below it:

    asm/        the ISA description and what reads it, the image format, the shared base
                (npkit.asm.base: reading YAML with line marks, located errors, schemas,
                writing outputs, the content cache), the assembler, the disassembler
    emulator/   the C core's binding, the MSF and traffic model, the reference router
    xscale/     the XScale core (Unicorn), its device window, the GPE host, the toolchain
    toolchain/  linking and running systems, debugger, graphs, experiments, benchmarks,
                the `npk` command line

Module layers inside them (a module imports its own layer and the layers below):

    0 description   npkit.asm.{base,isa,image,image_format,image_schema}
    1 tools         npkit.asm (the assembler) | npkit.emulator      siblings: neither imports the other
    2 system        npkit.toolchain.{system,router,debug,graph,experiment}, npkit.xscale
    3 commands      npkit.toolchain.{cli,commands,bench}, every cli module

and no two files import each other, directly or round a circle.  Every import statement
counts (inside functions and under TYPE_CHECKING too), read with `ast`.

`python tests/test_layers.py` prints the folder import graph and the circles, if any,
and exits 1 on a violation."""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("asm", "emulator", "xscale", "toolchain")  # bottom to top
PACKAGES = {top: f"npkit.{top}" for top in FOLDERS}
DESCRIPTION = ("npkit.asm.base", "npkit.asm.isa", "npkit.asm.image", "npkit.asm.image_format", "npkit.asm.image_schema")
SYSTEM = ("npkit.toolchain.system", "npkit.toolchain.router", "npkit.toolchain.debug", "npkit.toolchain.graph",
          "npkit.toolchain.experiment", "npkit.xscale")  # fmt: skip
COMMANDS = ("npkit.toolchain.cli", "npkit.toolchain.commands", "npkit.toolchain.bench")


def _under(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def folder(module: str) -> str:
    """The top-level folder a module lives in (the root package `npkit` lives in asm/)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "asm"


def layer(module: str) -> tuple[int, str]:
    """(layer, group); the group separates the siblings of layer 1."""
    if module.rsplit(".", 1)[-1] == "cli" or _under(module, COMMANDS):
        return 3, "commands"
    if _under(module, DESCRIPTION) or module in ("npkit", "npkit.asm"):
        return 0, "description"
    if _under(module, ("npkit.asm",)):
        return 1, "asm"
    if _under(module, ("npkit.emulator",)):
        return 1, "emulator"
    if _under(module, SYSTEM) or module == "npkit.toolchain":
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
            if top == "asm" and parts[:1] == ["npkit"]:  # asm/npkit/ is the root package
                out["npkit"] = f
                continue
            out[".".join([pkg, *parts])] = f
    return out


def imports(module: str, path: Path, known: Iterable[str] = ()) -> set[str]:
    """The npkit modules `module` imports; `from pkg import name` names the submodule
    pkg.name when that is one of `known`."""
    known = set(known)
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
            if not target.startswith("npkit"):
                continue
            subs = {f"{target}.{a.name}" for a in node.names} & known
            found |= subs or {target}
    return found


def graph() -> dict[str, set[str]]:
    mods = modules()
    return {m: {t for t in imports(m, p, mods) if t in mods} for m, p in mods.items()}


def folder_graph(g: dict[str, set[str]]) -> dict[tuple[str, str], list[str]]:
    edges: dict[tuple[str, str], list[str]] = {}
    for mod, targets in g.items():
        for t in targets:
            if folder(t) != folder(mod):
                edges.setdefault((folder(mod), folder(t)), []).append(f"{mod} -> {t}")
    return edges


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (or a node importing
    itself): each is a circle of imports (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(g):
        if start in index:
            continue
        work = [(start, iter(sorted(g.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(g.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1 or v in g.get(v, ()):
                    found.append(sorted(comp))
    return found


def upward_folder_imports(g: dict[str, set[str]]) -> list[str]:
    rank = {f: i for i, f in enumerate(FOLDERS)}
    return [f"{src} -> {dst}: {', '.join(sorted(how)[:3])}"
            for (src, dst), how in sorted(folder_graph(g).items()) if rank[dst] > rank[src]]  # fmt: skip


def layer_violations(g: dict[str, set[str]]) -> list[str]:
    wrong = []
    for mod, targets in sorted(g.items()):
        lm, gm = layer(mod)
        for target in sorted(targets):
            lt, gt = layer(target)
            if lt > lm or (lt == lm == 1 and gt != gm):
                wrong.append(f"{mod} (layer {lm} {gm}) imports {target} (layer {lt} {gt})")
    return wrong


def test_folders_import_one_way() -> None:
    g = graph()
    assert {"npkit.emulator.loader", "npkit.toolchain.commands.run", "npkit.asm.isa"} <= set(g)
    assert not upward_folder_imports(g), "\n".join(upward_folder_imports(g))


def test_every_import_goes_down_or_sideways_within_its_layer() -> None:
    wrong = layer_violations(graph())
    assert not wrong, "\n".join(wrong)


def test_no_circle_of_imports_between_files() -> None:
    found = cycles(graph())
    assert not found, "\n".join(" <-> ".join(c) for c in found)


def test_the_check_sees_an_upward_import(tmp_path: Path) -> None:
    """The checker itself: an emulator module importing the linker is flagged, by layer
    and by folder."""
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from npkit.toolchain.system.link import link\n")
    (lt, _), (lm, _) = layer("npkit.toolchain.system.link"), layer("npkit.emulator.bad")
    assert imports("npkit.emulator.bad", bad) == {"npkit.toolchain.system.link"} and lt > lm
    g = {"npkit.emulator.bad": {"npkit.toolchain.system.link"}, "npkit.toolchain.system.link": set()}
    assert upward_folder_imports(g) == ["emulator -> toolchain: npkit.emulator.bad -> npkit.toolchain.system.link"]


def test_the_check_sees_a_circle(tmp_path: Path) -> None:
    """The checker itself: two files importing each other, one of them under
    TYPE_CHECKING, and a longer circle, are found; a diamond is not a circle."""
    a = tmp_path / "a.py"
    a.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from npkit.asm import b\n")
    known = {"npkit.asm.a", "npkit.asm.b"}
    assert imports("npkit.asm.a", a, known) == {"npkit.asm.b"}
    two = {"npkit.asm.a": {"npkit.asm.b"}, "npkit.asm.b": {"npkit.asm.a"}}
    assert cycles(two) == [["npkit.asm.a", "npkit.asm.b"]]
    ring = {"x.a": {"x.b"}, "x.b": {"x.c"}, "x.c": {"x.a"}, "x.d": {"x.a"}}
    assert cycles(ring) == [["x.a", "x.b", "x.c"]]
    diamond = {"x.a": {"x.b", "x.c"}, "x.b": {"x.d"}, "x.c": {"x.d"}, "x.d": set()}
    assert cycles(diamond) == []


def main() -> int:
    g = graph()
    edges = folder_graph(g)
    print("folder import graph (imports between files, by folder; bottom to top: " + " < ".join(FOLDERS) + ")")
    for src in FOLDERS:
        outs = [f"{dst} ({len(edges[(src, dst)])})" for dst in FOLDERS if (src, dst) in edges]
        print(f"  {src:10} -> {', '.join(outs) if outs else '(nothing of npkit)'}")
    problems = [f"upward: {u}" for u in upward_folder_imports(g)]
    problems += [f"layer: {w}" for w in layer_violations(g)]
    problems += ["circle: " + " <-> ".join(c) for c in cycles(g)]
    print(f"{len(g)} modules, {sum(map(len, g.values()))} imports between them")
    for p in problems:
        print(p)
    print("ok: folders import one way, no circles" if not problems else f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
