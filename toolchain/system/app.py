"""Applications: a folder with an `app.yaml` manifest (docs/applications.md).

An application names its layouts, the directories its blocks and headers come from, its
reasons, tables, reference model, router config, routes and default traffic, each a path
relative to its folder.  `extends` names the folder of an application it builds on: what
the manifest does not set is the base's, layouts add to (or replace by name) the base's,
and block sources are looked up in this folder, its `include` directories, then the
base's, and last in npkit's block library (microcode/).

    app = load_app("examples/apps/acl")
    app.layout_file("pipelined")          # a layout by name (or a YAML file as given)
    app.source_dirs                       # where block sources are looked up, in order

Errors (a manifest that does not read, a file it names that is missing, a circle of
`extends`) raise AppError `app.yaml:line: field: what is wrong`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from npkit.asm.base.reading import error_at, file_state, load_yaml
from npkit.emulator.traffic.reasons import REASONS_PATH, Reasons, load_reasons

if TYPE_CHECKING:
    from npkit.emulator.traffic.model import AnyModel

from .errors import LinkError
from .paths import MICROCODE

MANIFEST = "app.yaml"
IPV4_APP = MICROCODE / "ipv4"  # the IPv4 router, the first application
MAX_EXTENDS = 16  # bases an application may stack
# files of an application that a linked image depends on (by name, size and time)
_IMAGE_SUFFIXES = (".uc", ".h", ".yaml", ".yml", ".txt")
FILE_FIELDS = ("reasons", "tables", "model", "router", "routes", "traffic")


class AppError(LinkError):
    """An application folder or manifest that cannot be used; the message says where."""


@dataclass(frozen=True)
class App:
    """A loaded application, its base's settings merged in (see the module doc)."""

    name: str
    folder: Path
    layouts: dict[str, Path]
    default_layout: str | None
    include: tuple[Path, ...]  # this app's include directories then its bases', folders included
    files: dict[str, Path] = field(default_factory=dict)  # FILE_FIELDS that are set -> path
    chain: tuple[str, ...] = ()  # names: this app, then its bases
    reason_files: tuple[Path, ...] = ()  # npkit's reasons.yaml, then each base's own, then this app's
    chip: str | None = None  # chip config: a name or a YAML file (resolved); None: the default (ixp2800)

    @property
    def own_reasons(self) -> bool:
        """True when the application (or a base) declares reasons beyond npkit's."""
        return len(self.reason_files) > 1

    @property
    def source_dirs(self) -> list[Path]:
        """Where a layout's block sources are looked up, in order: the application's
        folders and include directories, then npkit's block library."""
        return [*self.include, MICROCODE]

    def file(self, kind: str) -> Path | None:
        """The application's `kind` file (one of FILE_FIELDS), or None."""
        return self.files.get(kind)

    def layout_file(self, layout: str | None) -> str:
        """The layout to link: a name of the application's layouts, or a YAML file."""
        if layout is None:
            if self.default_layout is None:
                raise AppError(f"{self.folder / MANIFEST}: no default_layout: name one with --layout "
                               f"({', '.join(self.layouts) or 'the application has no layouts'})")  # fmt: skip
            layout = self.default_layout
        if layout in self.layouts:
            return str(self.layouts[layout])
        if file_state(Path(layout)) == "file":
            return layout
        raise AppError(f"layout {layout}: application {self.name} has no such layout "
                       f"(layouts: {', '.join(self.layouts) or 'none'}), nor is it a file")  # fmt: skip

    def digest(self) -> list[tuple[str, int, int]]:
        """Name, size and modification time of every file under the application's folders
        that a linked image can depend on (npkit.asm.base.cache keys)."""
        out: list[tuple[str, int, int]] = []
        for d in dict.fromkeys(self.include):
            for top, dirs, names in os.walk(d):
                dirs[:] = sorted(n for n in dirs if n != "__pycache__" and not n.startswith("."))
                for n in sorted(names):
                    if os.path.splitext(n)[1] in _IMAGE_SUFFIXES:
                        st = os.stat(os.path.join(top, n))
                        out.append((os.path.join(top, n), st.st_size, st.st_mtime_ns))
        for p in self.files.values():
            st = p.stat()
            out.append((str(p), st.st_size, st.st_mtime_ns))
        return out


def app_folder(path: str | Path) -> Path:
    """The folder of an application given as its folder or its manifest."""
    p = Path(path)
    return p.parent if p.name == MANIFEST and file_state(p) == "file" else p


def load_app(path: str | Path) -> App:
    """The application in folder `path` (or its app.yaml), its bases merged in."""
    return _load(app_folder(path).resolve(), ())


def _load(folder: Path, seen: tuple[Path, ...]) -> App:
    manifest = folder / MANIFEST
    state = path_kind(folder)
    if state != "dir":
        raise AppError(f"{folder}: an application is a folder holding {MANIFEST}, and this is "
                       f"{'not there' if state == 'missing' else 'not a folder'}")  # fmt: skip
    if file_state(manifest) != "file":
        raise AppError(f"{folder}: no {MANIFEST} in this folder (docs/applications.md says what it holds)")
    located = load_yaml(manifest, error=AppError, what="application manifest")
    from npkit.asm.base.schema import validate

    from .app_schema import AppFile

    model = validate(AppFile, located.data, str(manifest), located=located, error=AppError)
    _check_paths(model, folder, str(manifest), located)
    base: App | None = None
    if model.extends is not None:
        base_dir = _base_folder(model.extends, folder)
        if base_dir == folder or base_dir in seen:
            raise error_at(AppError, str(manifest), ("extends",),
                           f"{model.extends}: extends itself (round {' -> '.join(p.name for p in (*seen, folder, base_dir))})",
                           located)  # fmt: skip
        if len(seen) >= MAX_EXTENDS:
            raise error_at(AppError, str(manifest), ("extends",), f"more than {MAX_EXTENDS} bases", located)
        base = _load(base_dir, (*seen, folder))
    return _merged(model, folder, base, str(manifest), located)


def path_kind(path: Path) -> str:
    """'file', 'dir', 'missing' or what else is there (never raises)."""
    try:
        if path.is_dir():
            return "dir"
    except (OSError, ValueError):
        pass
    return file_state(path)


def _check_paths(model: Any, folder: Path, source: str, located: Any) -> None:
    """Every path the manifest names exists (a file; a folder for `include`, either for `traffic`)."""
    named: list[tuple[tuple[Any, ...], str, tuple[str, ...]]] = []
    named += [(("layouts", k), f, ("file",)) for k, f in model.layouts.items()]
    named += [(("include", i), d, ("dir",)) for i, d in enumerate(model.include)]
    for kind in FILE_FIELDS:
        rel = getattr(model, kind)
        if rel is not None:
            named.append(((kind,), rel, ("file", "dir") if kind == "traffic" else ("file",)))
    if model.chip is not None:
        _check_chip(model.chip, folder, source, located)
    for path, rel, want in named:
        if path_kind(folder / rel) not in want:
            what = " or ".join("folder" if w == "dir" else "file" for w in want)
            raise error_at(AppError, source, path, f"{rel}: no such {what} (relative to the application's folder)",
                           located)  # fmt: skip


def _chip_config(chip: str, folder: Path) -> str:
    """`chip`: a YAML file relative to the folder (resolved), else a config name."""
    return str((folder / chip).resolve()) if Path(chip).suffix in (".yaml", ".yml") else chip


def _check_chip(chip: str, folder: Path, source: str, located: Any) -> None:
    """`chip:` names a chip config there is: a YAML file in the folder or a known name."""
    from npkit.emulator.binding import CONFIG_DIR, EmulatorError, config_path

    where = _chip_config(chip, folder)
    try:
        if path_kind(Path(where)) != "file" and not (CONFIG_DIR / f"{where}.yaml").is_file():
            config_path(where)  # (its error names the known configs)
            raise EmulatorError(f"{chip}: no such file (relative to the application's folder)")
    except EmulatorError as e:
        raise error_at(AppError, source, ("chip",), str(e), located) from None


def _base_folder(extends: str, folder: Path) -> Path:
    """`extends`: "ipv4" (npkit's IPv4 router) or a folder relative to this one."""
    if extends == "ipv4":
        return IPV4_APP.resolve()
    return (folder / extends).resolve()


def _merged(model: Any, folder: Path, base: App | None, source: str, located: Any) -> App:
    layouts = dict(base.layouts) if base else {}
    layouts.update((k, (folder / v).resolve()) for k, v in model.layouts.items())
    default = model.default_layout or (base.default_layout if base else None)
    if model.default_layout is not None and model.default_layout not in layouts:
        raise error_at(AppError, source, ("default_layout",),
                       f"{model.default_layout}: not one of the layouts ({', '.join(layouts) or 'none'})", located)  # fmt: skip
    own = [folder] + [(folder / d).resolve() for d in model.include]
    include = tuple(own) + (base.include if base else ())
    files = dict(base.files) if base else {}
    for kind in FILE_FIELDS:
        value = getattr(model, kind)
        if value is not None:
            files[kind] = (folder / value).resolve()
    chain = (model.name, *(base.chain if base else ()))
    reason_files = base.reason_files if base else (REASONS_PATH.resolve(),)
    if model.reasons is not None and (folder / model.reasons).resolve() not in reason_files:
        reason_files = (*reason_files, (folder / model.reasons).resolve())
    chip = _chip_config(model.chip, folder) if model.chip is not None else (base.chip if base else None)
    return App(model.name, folder, layouts, default, include, files, chain, reason_files, chip)


def app_reasons(app: App | None) -> Reasons:
    """The reasons an application's microcode and judge use: npkit's (microcode/reasons.yaml),
    then each base's own, then the application's.  A name, code (of the same kind) or step
    an application declares that a base already has is an AppError at its line."""
    return reasons_of_files(app.reason_files if app is not None else ())


def reasons_of_image(meta: dict[str, Any]) -> Reasons:
    """The reasons of a linked image: those of the application it was linked from (its
    meta's `app.reasons` files), else npkit's."""
    files = (meta.get("app") or {}).get("reasons") or ()
    return reasons_of_files(tuple(Path(f) for f in files))


def model_of_image(meta: dict[str, Any], reasons: Reasons, router: Any = None) -> AnyModel | None:
    """The application's model of a linked image, None when it has none (the IPv4 oracle
    alone judges): its model.py's rules among the IPv4 oracle's, or -- an application
    without a base -- its own `@decide` function, which gets `router` (the image's router
    config) and judges every frame."""
    app = meta.get("app") or {}
    path = app.get("model")
    if not path:
        return None
    from npkit.emulator.traffic.model import ModelError, load_model

    from .app_tables import model_rows

    try:
        model = load_model(path, reasons, model_rows(app.get("tables") or {}), router)
    except ModelError as e:
        raise AppError(str(e)) from None
    if model.standalone and app.get("extends"):
        raise AppError(f"{path}: a model that decides every frame (@decide) is for an application without "
                       f"extends:; {app.get('name')} extends {app.get('extends')}: write rules (@rule) placed "
                       "among its base's")  # fmt: skip
    return model


def model_of_app(app: App) -> AnyModel | None:
    """The application's model as a run of its linked image gets it (its tables compiled,
    its router config), without linking: for the model's own tests and benchmarks."""
    path = app.file("model")
    if path is None:
        return None
    from npkit.emulator.traffic.router_config import RouterConfig

    from .app_tables import load_tables
    from .paths import DEFAULT_ROUTER

    tables = app.file("tables")
    meta: dict[str, Any] = {"name": app.name, "model": str(path),
                            "tables": {t.name: t.record() for t in load_tables(tables)} if tables else {}}  # fmt: skip
    if len(app.chain) > 1:
        meta["extends"] = app.chain[1]
    return model_of_image({"app": meta}, app_reasons(app), RouterConfig.load(app.file("router") or DEFAULT_ROUTER))


def reasons_of_files(files: tuple[Path, ...]) -> Reasons:
    merged = load_reasons()
    for f in files:
        if f.resolve() != REASONS_PATH.resolve():
            merged = _with_reasons(merged, f)
    return merged


def _with_reasons(base: Reasons, path: Path) -> Reasons:
    from npkit.emulator.traffic.reasons import ReasonError, reasons_in

    located = load_yaml(path, error=AppError, what="reasons")
    if not isinstance(located.data, dict):
        raise AppError(f"{path}: reasons are a mapping (drops, exceptions)")
    try:  # the reasons file's schema (an application may declare one kind only)
        own = reasons_in(located)
    except ReasonError as e:
        raise AppError(f"{e}" if str(e).startswith(str(path)) else f"{path}: {e}") from None
    steps = {r.step: r.name for r in base.in_order()}
    for kind, table, section in (("drop", own.drops, "drops"), ("exception", own.exceptions, "exceptions")):
        theirs = base.table(kind)
        codes = {r.code: r.name for r in theirs.values()}
        for r in table.values():
            if r.name in base.drops or r.name in base.exceptions:
                raise error_at(AppError, str(path), (section, r.name), f"{r.name}: the base already declares "
                               f"a reason of this name ({base.source})", located)  # fmt: skip
            if r.code in codes:
                raise error_at(AppError, str(path), (section, r.name, "code"), f"{kind} code {r.code} is the "
                               f"base's {codes[r.code]} ({base.source}); take a free one", located)  # fmt: skip
            if r.step is not None and r.step in steps:
                raise error_at(AppError, str(path), (section, r.name, "step"), f"step {r.step} is the base's "
                               f"{steps[r.step]} ({base.source})", located)  # fmt: skip
    try:
        return Reasons([*base.drops.values(), *own.drops.values()],
                       [*base.exceptions.values(), *own.exceptions.values()], str(path))  # fmt: skip
    except ReasonError as e:
        raise AppError(str(e)) from None
