"""The chip config a run of images uses.

An image records the chip config it was linked for (`Image.config`: a config name or a
YAML path; "" for any, as the assembler writes it).  `npk run`, `debug`, `trace` and
`why` run it on that config unless told otherwise:

    config, notes = run_config([("router.elf", image)], given=None)

- no `--config` (given=None): the config the images were linked for; "ixp2800" when none
  names one.  Images linked for configs that differ are refused (LoadError), as is an
  image whose config cannot be read here (a YAML path that moved): give `--config`.
- `--config X`: X, which must be the config each image was linked for.  Configs are
  compared by what they hold, not by name or path (a copy of ixp2800.yaml under another
  name is ixp2800), and ConfigMismatch (a LoadError) names the fields that differ.  An image
  whose own config cannot be read runs on X with a note saying so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .binding import CONFIG_DIR, EmulatorError, config_path, load_config
from .loader import LoadError

DEFAULT_CONFIG = "ixp2800"
MAX_LISTED = 4  # differing fields a message lists


class ConfigMismatch(LoadError):
    """--config names a chip other than the one an image was linked for."""


def recorded_config(name_or_path: str) -> str:
    """How an image records the config it is linked for: a config of the tree by its name,
    a YAML file elsewhere by its absolute path (the image may be run from another
    directory)."""
    try:
        path = config_path(name_or_path)
    except EmulatorError:
        return name_or_path
    if path.parent.resolve() == CONFIG_DIR.resolve() and not Path(name_or_path).suffix:
        return name_or_path
    return str(path.resolve())


def _flat(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, Mapping):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def config_differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """'field (value in a vs value in b)' for each field two loaded configs disagree on
    (their names aside: two files that model the same chip are the same chip)."""
    fa, fb = _flat(a), _flat(b)
    return [f"{k} ({fa.get(k, 'unset')} vs {fb.get(k, 'unset')})" for k in sorted(fa.keys() | fb.keys())
            if k != "name" and fa.get(k) != fb.get(k)]  # fmt: skip


def _listed(diffs: list[str]) -> str:
    more = len(diffs) - MAX_LISTED
    return ", ".join(diffs[:MAX_LISTED]) + (f" and {more} more" if more > 0 else "")


def _linked_for(image: Any) -> tuple[str, dict[str, Any] | None, str]:
    """(config name, the loaded config or None when it cannot be read here, why not)."""
    name = str(getattr(image, "config", "") or "")
    try:
        return name, load_config(name), ""
    except EmulatorError as e:
        return name, None, str(e)


def run_config(images: Sequence[tuple[str, Any]], given: str | None) -> tuple[str, list[str]]:
    """The config to run `images` ((label, image) pairs) on, and notes for the user."""
    linked = [(label, *_linked_for(img)) for label, img in images if getattr(img, "config", "")]
    if given is None:
        return _from_images(linked), []
    try:
        chosen = load_config(given)
    except EmulatorError as e:
        raise LoadError(f"--config {given}: {e}") from None
    notes = []
    for label, name, cfg, why in linked:
        if cfg is None:
            notes.append(f"{label} was linked for chip config '{name}', which cannot be read here ({why}); "
                         f"it runs on --config {given}")  # fmt: skip
            continue
        diffs = config_differences(cfg, chosen)
        if diffs:
            raise ConfigMismatch(f"{label} was linked for chip config '{name}', and --config {given} differs in "
                                 f"{_listed(diffs)}: run it with --config {name}, or link it again with "
                                 f"--config {given}")  # fmt: skip
    return given, notes


def _from_images(linked: list[tuple[str, str, dict[str, Any] | None, str]]) -> str:
    if not linked:
        return DEFAULT_CONFIG
    first_label, first_name, first_cfg, _ = linked[0]
    for label, name, cfg, why in linked:
        if cfg is None:
            raise LoadError(f"{label} was linked for chip config '{name}', which cannot be read here ({why}); "
                            "give the chip config with --config")  # fmt: skip
        diffs = config_differences(cfg, first_cfg or {})
        if diffs:
            raise LoadError(f"{label} was linked for chip config '{name}' and {first_label} for '{first_name}', "
                            f"which differ in {_listed(diffs)}: images that run together must be linked for one chip config")  # fmt: skip
    return first_name
