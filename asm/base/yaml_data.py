"""YAML read by libyaml when PyYAML was built with it (about ten times faster than its
pure-Python parser; the same data).

libyaml's composer recurses in C, so a document nested some 50,000 deep overflows the
stack (PyYAML 6.0): text goes to libyaml only when it cannot nest deeper than
`MAX_FAST_DEPTH` (few enough of the indicators that open a nested node, and short enough
that indentation cannot nest it deeper either); the rest to the pure-Python parser.

`load_data(text)` is yaml.safe_load, its result kept in the content cache by the text
(npkit.asm.base.cache.plain_result): a warm run reads its YAML data files without
importing PyYAML (about 10 ms of a process's start).  `parse_yaml` in
npkit.asm.base.reading uses `fast_loader(text)` and reads a text it fails on again with
the pure-Python parser, so errors keep their messages.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import yaml

MAX_FAST_DEPTH = 1000
_MAX_FAST_BYTES = 1 << 20  # block nesting by indentation alone: under 1,500 levels in this much


def fast_loader(text: str) -> type[yaml.SafeLoader]:
    """libyaml's loader when it is there and `text` is shallow enough for it."""
    import yaml

    c_loader: type[yaml.SafeLoader] | None = getattr(yaml, "CSafeLoader", None)
    if c_loader is None or len(text) > _MAX_FAST_BYTES:
        return yaml.SafeLoader
    if sum(text.count(ch) for ch in "[{-?") > MAX_FAST_DEPTH:
        return yaml.SafeLoader
    return c_loader


def load_data(text: str) -> Any:
    """yaml.safe_load of `text`, by libyaml when it can (or the same from the cache)."""
    from .cache import package_digest, plain_result

    return plain_result("yaml", (text, package_digest("yaml")), lambda: _load(text))


def _load(text: str) -> Any:
    import yaml

    return yaml.load(text, Loader=fast_loader(text))
