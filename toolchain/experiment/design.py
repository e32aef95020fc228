"""Experiment designs as data: factors, levels, design kinds, replications, runs.

A design is a YAML file (examples in examples/experiments/)::

    name: seed003
    kind: full                  # full | fractional | sweep
    replications: 3             # r; replicate i uses traffic seed `seed` + i
    seed: 3
    base:                       # what every run starts from
      layout: pipelined
      params: {}                # -D layout parameters
      chip: ixp2800             # chip config name or YAML path
      chip_set: {}              # dotted chip-config keys -> values
      traffic: ../traffic/seed003_balanced.yaml   # relative to the design file
      traffic_set: {}           # dotted traffic-spec keys -> values
      routes: 10000             # N random prefixes (as npk demo), a route file, or null
      app: ../apps/acl          # optional: an application folder (docs/applications.md),
                                # relative to the design file: `layout` names one of its
                                # layouts (default: its default_layout), its params are
                                # param.NAME factors, its chip config (`chip:`), traffic,
                                # routes and router config are the defaults (`traffic:`
                                # may then be left out)
    factors:
      A: {name: packet size, set: traffic.defaults.size, levels: [78, 256]}
      B: {name: queue manager, set: param.qm, levels: [full, stub]}
      S: {name: SRAM latency, set: [chip.units.sram.read_latency,
                                    chip.units.sram.write_latency],
          scale: true, levels: [1, 1.5, 2]}       # levels multiply the base values
      W: {name: frame, levels: {64: {traffic.defaults.size: 64, traffic.wire: ethernet},
                                78: {traffic.defaults.size: 78, traffic.wire: seed003}}}
    generators: {D: ABC}        # fractional: D's level is the product of A, B and C's
    sweep: P                    # sweep: the numeric factor on the x axis
    responses: [capacity_mbps, throughput_mbps, latency_p99_us]
    steady: {...}               # npkit.toolchain.experiment.steady.SteadySettings
    capacity: {...}             # npkit.toolchain.experiment.capacity.CapacitySettings
    quick: {...}                # merged over the design by --quick (tests)

Targets a level can set: `layout`; `param.NAME` (a -D layout parameter: block
variants such as qm full/stub, thread counts, pool_mes); `block.NAME.variant`,
`block.NAME.threads`, `block.NAME.define.X` (edit one block of the layout);
`chip` (config name or file) and `chip.KEY.KEY...` (clock_mhz, units.dram.read_latency,
...); `traffic.KEY.KEY...` (size, load, link_bps, mix, seed, ...) and
`traffic.ip_payload` (bytes after the IPv4 header: sets defaults.size); `routes`.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from npkit.asm.base.reading import Located

KINDS = ("full", "fractional", "sweep")
TOP_KEYS = {"name", "title", "description", "kind", "replications", "seed", "base", "factors",
            "generators", "sweep", "responses", "steady", "capacity", "compare", "quick"}  # fmt: skip
BASE_KEYS = {"layout", "params", "chip", "chip_set", "traffic", "traffic_set", "routes", "app"}
FACTOR_KEYS = {"name", "set", "levels", "scale"}
TARGET_HEADS = ("layout", "param", "block", "chip", "traffic", "routes")
BLOCK_FIELDS = ("variant", "threads", "define")
DEFAULT_RESPONSES = ["capacity_mbps", "throughput_mbps", "latency_mean_us", "latency_p99_us"]
MAX_REPLICATIONS = 1000
MAX_RUNS = 10_000  # design points x replications
DESIGN_LIMIT = 1 << 20  # bytes of a design file


class DesignError(ValueError):
    """An invalid design; the message names the file and the key."""


@dataclass(frozen=True)
class Level:
    label: str
    settings: dict[str, Any]  # target -> value (a multiplier when the factor scales)

    @property
    def number(self) -> float | None:
        try:
            return float(self.label)
        except ValueError:
            return None


@dataclass(frozen=True)
class Factor:
    key: str
    name: str
    levels: list[Level]
    scale: bool = False

    @property
    def numeric(self) -> bool:
        return all(lv.number is not None for lv in self.levels)

    def level(self, label: str) -> Level:
        for lv in self.levels:
            if lv.label == label:
                return lv
        raise DesignError(f"factor {self.key}: no level {label!r}")


@dataclass(frozen=True)
class RunSpec:
    """One run: a design point, a replicate and everything a worker needs (plain data)."""

    run_id: str
    point: int
    replicate: int
    seed: int
    levels: dict[str, str]
    config: dict[str, Any]
    config_hash: str


@dataclass
class Design:
    name: str
    kind: str
    factors: list[Factor]
    base: dict[str, Any]
    replications: int = 1
    seed: int = 1
    generators: dict[str, list[str]] = field(default_factory=dict)
    sign_of: dict[str, int] = field(default_factory=dict)  # generator sign (+1 / -1)
    sweep: str | None = None
    responses: list[str] = field(default_factory=lambda: list(DEFAULT_RESPONSES))
    steady: dict[str, Any] = field(default_factory=dict)
    capacity: dict[str, Any] | None = None
    compare: str | None = None
    title: str = ""
    description: str = ""
    source: Path | None = None
    quick: bool = False
    raw: dict[str, Any] = field(default_factory=dict)

    # -- structure
    def factor(self, key: str) -> Factor:
        for f in self.factors:
            if f.key == key:
                return f
        raise DesignError(f"no factor {key!r} (factors: {', '.join(f.key for f in self.factors)})")

    @property
    def keys(self) -> list[str]:
        return [f.key for f in self.factors]

    @property
    def two_level(self) -> bool:
        return all(len(f.levels) == 2 for f in self.factors)

    @property
    def base_factors(self) -> list[str]:
        return [k for k in self.keys if k not in self.generators]

    def points(self) -> list[dict[str, str]]:
        """Design points in standard order (the first factor varies fastest)."""
        if self.kind == "fractional":
            out = []
            for codes in standard_order(len(self.base_factors)):
                code = dict(zip(self.base_factors, codes, strict=True))
                for g, word in self.generators.items():
                    c = self.sign_of.get(g, 1)
                    for letter in word:
                        c *= code[letter]
                    code[g] = c
                out.append({k: self.factor(k).levels[(code[k] + 1) // 2].label for k in self.keys})
            return out
        grids = [[lv.label for lv in f.levels] for f in self.factors]
        return [
            dict(zip(self.keys, reversed(combo), strict=True))
            for combo in itertools.product(*reversed(grids))
        ]

    def runs(self) -> list[RunSpec]:
        out = []
        for p, point in enumerate(self.points()):
            for rep in range(self.replications):
                seed = self.seed + rep
                cfg = self.config(point, seed)
                out.append(RunSpec(f"p{p:03d}r{rep}", p, rep, seed, point, cfg, config_hash(cfg)))
        return out

    def config(self, point: dict[str, str], seed: int) -> dict[str, Any]:
        """The plain-data configuration of one run (what execute.run_config takes)."""
        cfg: dict[str, Any] = {
            "layout": self.base.get("layout", "pipelined"),
            "params": dict(self.base.get("params") or {}),
            "blocks": {},
            "chip": self.base.get("chip", "ixp2800"),
            "chip_set": dict(self.base.get("chip_set") or {}),
            "chip_scale": {},
            "traffic": self.base["traffic"],
            "traffic_set": dict(self.base.get("traffic_set") or {}),
            "traffic_scale": {},
            "routes": self.base.get("routes"),
            **({"app": self.base["app"]} if self.base.get("app") else {}),  # (no key without: same hashes)
            "seed": seed,
            "steady": dict(self.steady),
            "capacity": None if self.capacity is None else dict(self.capacity),
        }
        for f in self.factors:
            lv = f.level(point[f.key])
            for target, value in lv.settings.items():
                apply_target(cfg, target, value, f.scale)
        return cfg

    # -- fractional designs
    def defining_relation(self) -> list[tuple[int, frozenset[str]]]:
        """Every word of the defining relation I = ... (sign, letters), identity excluded."""
        words = [(self.sign_of.get(g, 1), frozenset(w) ^ {g}) for g, w in self.generators.items()]
        out = []
        for n in range(1, len(words) + 1):
            for combo in itertools.combinations(words, n):
                sign, letters = 1, frozenset()
                for s, w in combo:
                    sign *= s
                    letters = letters ^ w
                out.append((sign, letters))
        return out

    def resolution(self) -> int | None:
        rel = self.defining_relation()
        return min(len(w) for _, w in rel) if rel else None

    def effects(self) -> list[tuple[str, ...]]:
        """The estimable effects, main effects first: all interactions of a full 2^k; for
        a fractional design one representative (the lowest order) of each alias set."""
        all_effects = [
            tuple(c) for n in range(1, len(self.keys) + 1) for c in itertools.combinations(self.keys, n)
        ]
        if self.kind != "fractional":
            return all_effects
        seen: set[frozenset[str]] = set()
        out = []
        for e in all_effects:
            fs = frozenset(e)
            if fs in seen:
                continue
            group = {fs} | {fs ^ w for _, w in self.defining_relation()}
            if frozenset() in group:
                continue  # aliased with the mean
            seen |= group
            out.append(e)
        return out

    def aliases(self, effect: tuple[str, ...]) -> list[tuple[int, tuple[str, ...]]]:
        """What `effect` is confounded with: (sign, effect) for each other word."""
        fs = frozenset(effect)
        order = {k: i for i, k in enumerate(self.keys)}
        out = []
        for sign, w in self.defining_relation():
            other = fs ^ w
            out.append((sign, tuple(sorted(other, key=order.__getitem__))))
        return sorted(out, key=lambda a: (len(a[1]), [order[x] for x in a[1]]))

    def effect_name(self, effect: tuple[str, ...]) -> str:
        sep = "" if all(len(k) == 1 for k in self.keys) else ":"
        return sep.join(effect) if effect else "I"

    def summary(self) -> dict[str, Any]:
        """What the design is, for people and for `--json`."""
        out: dict[str, Any] = {
            "name": self.name, "title": self.title, "kind": self.kind, "quick": self.quick,
            "factors": [{"key": f.key, "name": f.name, "scale": f.scale,
                         "levels": [{"label": lv.label, "sets": lv.settings} for lv in f.levels]}
                        for f in self.factors],
            "points": len(self.points()), "replications": self.replications,
            "runs": len(self.points()) * self.replications,
            "seeds": [self.seed + i for i in range(self.replications)],
        }  # fmt: skip
        if self.kind == "fractional":
            out["generators"] = {g: ("-" if self.sign_of.get(g, 1) < 0 else "") + "".join(w)
                                 for g, w in self.generators.items()}  # fmt: skip
            out["defining_relation"] = ["I"] + [
                ("-" if s < 0 else "") + self.effect_name(tuple(k for k in self.keys if k in w))
                for s, w in self.defining_relation()
            ]
            out["resolution"] = self.resolution()
            out["confounding"] = {
                self.effect_name(e): [("-" if s < 0 else "") + self.effect_name(a) for s, a in self.aliases(e)]
                for e in self.effects()
            }  # fmt: skip
        return out


def standard_order(k: int) -> list[tuple[int, ...]]:
    """The 2^k sign-table rows: row i has factor j at +1 when bit j of i is set."""
    return [tuple(1 if (i >> j) & 1 else -1 for j in range(k)) for i in range(2**k)]


def config_hash(cfg: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(cfg, sort_keys=True, default=str).encode()).hexdigest()[:16]


# ---------------------------------------------------------------------------- targets


def _check_target(target: str, where: str) -> None:
    head, _, rest = target.partition(".")
    if head not in TARGET_HEADS:
        raise DesignError(f"{where}: unknown target {target!r}; targets start with "
                          f"{', '.join(TARGET_HEADS)}")  # fmt: skip
    if head in ("layout", "routes") and rest:
        raise DesignError(f"{where}: {head} takes no sub-key ({target!r})")
    if head == "param" and not rest:
        raise DesignError(f"{where}: param.NAME (a -D layout parameter)")
    if head == "block":
        parts = rest.split(".")
        if len(parts) < 2 or parts[1] not in BLOCK_FIELDS or (parts[1] == "define") != (len(parts) == 3):
            raise DesignError(f"{where}: block.NAME.variant, block.NAME.threads or "
                              f"block.NAME.define.MACRO ({target!r})")  # fmt: skip
    if head == "traffic" and not rest:
        raise DesignError(f"{where}: traffic.KEY... (a key of the traffic spec)")


def apply_target(cfg: dict[str, Any], target: str, value: Any, scale: bool = False) -> None:
    """Put one factor setting into a run configuration."""
    head, _, rest = target.partition(".")
    if scale:
        if head not in ("chip", "traffic") or not rest:
            raise DesignError(f"{target}: only chip.* and traffic.* values can be scaled")
        cfg[f"{head}_scale"][rest] = cfg[f"{head}_scale"].get(rest, 1.0) * float(value)
        return
    if head == "layout":
        cfg["layout"] = value
    elif head == "routes":
        cfg["routes"] = value
    elif head == "param":
        cfg["params"][rest] = value
    elif head == "block":
        name, fld, *macro = rest.split(".")
        blk = cfg["blocks"].setdefault(name, {})
        if fld == "define":
            blk.setdefault("defines", {})[macro[0]] = value
        else:
            blk[fld] = value
    elif head == "chip":
        if rest:
            cfg["chip_set"][rest] = value
        else:
            cfg["chip"] = value
    elif head == "traffic":
        cfg["traffic_set"][rest] = value


# ---------------------------------------------------------------------------- loading


def _merge(base: Any, over: Any) -> Any:
    """`over` merged into `base`, mapping by mapping; a factor's `levels` are replaced as a
    whole (a quick design's fewer levels, also when they are a mapping label -> settings)."""
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for k, v in over.items():
            out[k] = _merge(base.get(k), v) if k in base and k != "levels" else copy.deepcopy(v)
        return out
    return copy.deepcopy(over)


def _levels(key: str, spec: dict[str, Any]) -> list[Level]:
    where = f"factors.{key}"
    levels = spec.get("levels")
    targets = spec.get("set")
    if isinstance(targets, str):
        targets = [targets]
    if isinstance(levels, dict):
        if targets:
            raise DesignError(f"{where}: give `set:` with a list of levels, or levels as a "
                              "mapping label -> {target: value}, not both")  # fmt: skip
        out = []
        for label, settings in levels.items():
            if not isinstance(settings, dict) or not settings:
                raise DesignError(f"{where}.levels.{label}: a mapping target -> value")
            for t in settings:
                _check_target(str(t), f"{where}.levels.{label}")
            out.append(Level(str(label), {str(t): v for t, v in settings.items()}))
    elif isinstance(levels, list):
        if not targets or not all(isinstance(t, str) for t in targets):
            raise DesignError(f"{where}: `set:` names the target(s) the levels go to")
        for t in targets:
            _check_target(t, where)
        out = [Level(str(v), {t: v for t in targets}) for v in levels]
    else:
        raise DesignError(f"{where}: levels must be a list (with set:) or a mapping")
    if len(out) < 2:
        raise DesignError(f"{where}: a factor needs at least two levels")
    labels = [lv.label for lv in out]
    if len(set(labels)) != len(labels):
        raise DesignError(f"{where}: repeated level {labels}")
    for i, j in itertools.combinations(range(len(out)), 2):
        if out[i].settings == out[j].settings:  # 1 and 1.0: two labels, one configuration
            raise DesignError(f"{where}: levels {out[i].label} and {out[j].label} set the same values "
                              f"({out[i].settings}): a repeated level")  # fmt: skip
    if spec.get("scale") and not all(lv.number is not None for lv in out):
        raise DesignError(f"{where}: scale: true needs numeric levels (multipliers)")
    return out


def _generators(raw: Any, keys: list[str]) -> tuple[dict[str, list[str]], dict[str, int]]:
    if not isinstance(raw, dict) or not raw:
        raise DesignError("generators: a mapping FACTOR -> word of base factors (e.g. {D: ABC})")
    gens: dict[str, list[str]] = {}
    signs: dict[str, int] = {}
    for g, word in raw.items():
        g = str(g)
        if g not in keys:
            raise DesignError(f"generators: {g} is not a factor")
        sign = 1
        if isinstance(word, str):
            text = word.strip()
            if text.startswith("-"):
                sign, text = -1, text[1:]
            letters = list(text)
        elif isinstance(word, list):
            letters = [str(x) for x in word]
        else:
            raise DesignError(f"generators.{g}: a word such as ABC, -ABC or [A, B, C]")
        bad = [x for x in letters if x not in keys or x in raw]
        if bad or not letters or len(set(letters)) != len(letters):
            raise DesignError(f"generators.{g}: {word!r} must use distinct base factors "
                              f"({', '.join(k for k in keys if k not in raw)})")  # fmt: skip
        gens[g], signs[g] = letters, sign
    return gens, signs


def _where(source: Path | None, located: Located | None, message: str) -> str:
    """`file:line` of the key a DesignError's message starts with (`factors.A.levels: ...`)."""
    where = str(source) if source else "<design>"
    head = message.split(":", 1)[0]
    if located is None or not re.fullmatch(r"[\w.\-\[\]]+", head):
        return where
    path = tuple(int(k) if k.isdigit() else k for k in head.replace("[", ".").replace("]", "").split("."))
    line = located.line(path)
    return f"{where}:{line}" if line is not None else where


def _check_finite(value: Any, path: str) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise DesignError(f"{path}: must be a finite number, got {value}")
    if isinstance(value, dict):
        for k, v in value.items():
            _check_finite(v, f"{path}.{k}" if path else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _check_finite(v, f"{path}[{i}]")


def design_from_dict(data: dict[str, Any], source: Path | None = None, quick: bool = False,
                     check_files: bool = True, located: Located | None = None) -> Design:
    where = str(source) if source else "<design>"
    if not isinstance(data, dict):
        raise DesignError(f"{where}: a design is a mapping")
    data = copy.deepcopy(data)
    quick_over = data.pop("quick", None) or {}
    if quick:
        if not isinstance(quick_over, dict):
            raise DesignError(f"{where}: quick: a mapping merged over the design")
        data = _merge(data, quick_over)
    try:
        _check_finite(data, "")
        return _design(data, source, quick, check_files)
    except DesignError as e:
        raise DesignError(f"{_where(source, located, str(e))}: {e}") from None


def _design(data: dict[str, Any], source: Path | None, quick: bool, check_files: bool) -> Design:
    unknown = set(data) - TOP_KEYS
    if unknown:
        raise DesignError(f"unknown keys {sorted(unknown)}; allowed: {sorted(TOP_KEYS)}")
    kind = data.get("kind", "full")
    if kind not in KINDS:
        raise DesignError(f"kind: {kind!r}; one of {', '.join(KINDS)}")
    base = data.get("base")
    if not isinstance(base, dict) or ("traffic" not in base and not base.get("app")):
        raise DesignError("base: a mapping with at least `traffic:` (a traffic spec) or `app:` (an application)")
    bad = set(base) - BASE_KEYS
    if bad:
        raise DesignError(f"base: unknown keys {sorted(bad)}; allowed: {sorted(BASE_KEYS)}")
    base = dict(base)
    root = source.parent if source else Path.cwd()
    if base.get("app"):
        _app_base(base, root)
    base["traffic"] = str(_resolve(root, base["traffic"]))
    if check_files and not Path(base["traffic"]).exists():
        raise DesignError(f"base.traffic: {base['traffic']}: no such file")
    if isinstance(base.get("chip"), str) and base["chip"].endswith((".yaml", ".yml")):
        base["chip"] = str(_resolve(root, base["chip"]))
    routes = base.get("routes")
    if isinstance(routes, str):
        base["routes"] = str(_resolve(root, routes))
    elif routes is not None and (not isinstance(routes, int) or routes < 1):
        raise DesignError("base.routes: a count of random prefixes, a route file or null")
    for k in ("params", "chip_set", "traffic_set"):
        if not isinstance(base.get(k) or {}, dict):
            raise DesignError(f"base.{k}: a mapping")
    raw_factors = data.get("factors")
    if not isinstance(raw_factors, dict) or not raw_factors:
        raise DesignError("factors: a mapping KEY -> {name, set, levels}")
    factors = []
    for key, spec in raw_factors.items():
        key = str(key)
        if not isinstance(spec, dict):
            raise DesignError(f"factors.{key}: a mapping")
        bad = set(spec) - FACTOR_KEYS
        if bad:
            raise DesignError(f"factors.{key}: unknown keys {sorted(bad)}; allowed: {sorted(FACTOR_KEYS)}")
        factors.append(Factor(key, str(spec.get("name", key)), _levels(key, spec), bool(spec.get("scale"))))
    keys = [f.key for f in factors]
    reps = data.get("replications", 1)
    if not isinstance(reps, int) or isinstance(reps, bool) or not 1 <= reps <= MAX_REPLICATIONS:
        raise DesignError(f"replications: an integer in 1..{MAX_REPLICATIONS}, got {reps!r}")
    seed = data.get("seed", 1)
    if not isinstance(seed, int):
        raise DesignError("seed: an integer")
    design = Design(name=str(data.get("name") or (source.stem if source else "design")), kind=kind,
                    factors=factors, base=base, replications=reps, seed=seed,
                    title=str(data.get("title", "")), description=str(data.get("description", "")),
                    source=source, quick=quick, raw={**data, "base": base})  # fmt: skip
    if kind == "fractional":
        if not design.two_level:
            raise DesignError("kind fractional: every factor needs exactly two levels")
        design.generators, design.sign_of = _generators(data.get("generators"), keys)
    elif data.get("generators"):
        raise DesignError(f"generators: only for kind fractional (this design is {kind})")
    if kind == "sweep":
        sw = data.get("sweep")
        if sw not in keys:
            raise DesignError(f"sweep: the swept factor (one of {', '.join(keys)})")
        if not design.factor(str(sw)).numeric:
            raise DesignError(f"sweep: factor {sw} needs numeric levels")
        design.sweep = str(sw)
    npoints = 2 ** len(design.base_factors) if kind == "fractional" else math.prod(len(f.levels) for f in factors)
    if npoints * reps > MAX_RUNS:
        raise DesignError(f"replications: {npoints} points x {reps} replications = {npoints * reps:,} runs, "
                          f"more than {MAX_RUNS:,}")  # fmt: skip
    _check_overlap(factors)
    responses = data.get("responses", DEFAULT_RESPONSES)
    if not isinstance(responses, list) or not responses or not all(isinstance(r, str) for r in responses):
        raise DesignError("responses: a list of response names")
    from .execute import RESPONSE_FAMILIES, RESPONSES

    for i, r in enumerate(responses):
        if r not in RESPONSES and not r.startswith(RESPONSE_FAMILIES):
            raise DesignError(f"responses[{i}]: no response {r!r}; responses: {', '.join(RESPONSES)}, and "
                              f"{', '.join(x + '...' for x in RESPONSE_FAMILIES)}")  # fmt: skip
    design.responses = list(responses)
    design.steady = _section(data, "steady")
    cap = data.get("capacity", {})
    design.capacity = None if cap is False or cap is None else _section(data, "capacity")
    design.compare = _compare(data.get("compare"), root, check_files)
    if design.compare is not None:
        design.raw["compare"] = design.compare
    # validate the settings and every run's configuration now, not in a worker
    from .capacity import CapacitySettings
    from .steady import SteadySettings

    try:
        SteadySettings.from_dict(design.steady)
        if design.capacity is not None:
            CapacitySettings.from_dict(design.capacity)
    except ValueError as e:
        raise DesignError(str(e)) from None
    design.runs()
    return design


def _check_overlap(factors: list[Factor]) -> None:
    """Two factors that set the same target: the later would override the earlier in
    every run, leaving it no effect (factors that scale a target multiply, and may)."""
    owner: dict[str, str] = {}
    for f in factors:
        if f.scale:
            continue
        # ip_payload is turned into defaults.size when a run is prepared
        targets = {"traffic.defaults.size" if t == "traffic.ip_payload" else t for lv in f.levels for t in lv.settings}
        for t in sorted(targets):
            if t in owner:
                raise DesignError(f"factors.{f.key}: sets {t}, as factor {owner[t]} does: in every run one "
                                  "would override the other (make them one factor)")  # fmt: skip
            owner[t] = f.key


def _section(data: dict[str, Any], key: str) -> dict[str, Any]:
    v = data.get(key) or {}
    if not isinstance(v, dict):
        raise DesignError(f"{key}: a mapping")
    return dict(v)


def _app_base(base: dict[str, Any], root: Path) -> None:
    """`base.app`: the application folder (relative to the design), and what it gives the
    base that the design leaves out: its default layout, chip config, traffic and routes
    (the router config is the application's: execute.prepare)."""
    from npkit.toolchain.system.app import load_app
    from npkit.toolchain.system.layout import LinkError

    if not isinstance(base["app"], str):
        raise DesignError(f"base.app: an application folder, got {base['app']!r}")
    try:
        app = load_app(_resolve(root, base["app"]))
        base["app"] = str(app.folder)
        base.setdefault("layout", app.default_layout)
        if app.chip is not None:  # the application's chip config (its `chip:`), unless the design names one
            base.setdefault("chip", app.chip)
    except LinkError as e:
        raise DesignError(f"base.app: {e}") from None
    if "traffic" not in base:
        own = app.file("traffic")
        if own is None:
            raise DesignError(f"base.traffic: application {app.name} names no traffic; give one")
        base["traffic"] = str(own)
    if "routes" not in base and app.file("routes") is not None:
        base["routes"] = str(app.file("routes"))
    elif "routes" not in base:
        base["routes"] = 10_000  # as npk demo --app: the demo's random table


def _resolve(root: Path, value: Any) -> Path:
    p = Path(str(value))
    return p if p.is_absolute() else (root / p).resolve()


COMPARE_BUILTIN = ("seed003",)  # published effects the report knows by name


def _compare(value: Any, root: Path, check_files: bool) -> str | None:
    """`compare:` -- seed003, or a results directory (relative to the design) that must
    hold an experiment when the design is checked for running."""
    if value is None or value in COMPARE_BUILTIN:
        return value
    if not isinstance(value, str) or not value:
        raise DesignError(f"compare: {', '.join(COMPARE_BUILTIN)} or a results directory, got {value!r}")
    path = _resolve(root, value)
    if check_files and not (path / "experiment.json").is_file():
        why = "does not exist" if not path.exists() else "holds no experiment (no experiment.json)"
        raise DesignError(f"compare: results directory {path} {why}: run that design first, or name "
                          f"{' or '.join(COMPARE_BUILTIN)}")  # fmt: skip
    return str(path)


def load_design(path: str | Path, quick: bool = False) -> Design:
    """Read, check and return a design; every run's inputs are checked too (check_runs)."""
    from npkit.asm.base.reading import load_yaml

    path = Path(path)
    located = load_yaml(path, limit=DESIGN_LIMIT, error=DesignError, what="experiment design")
    design = design_from_dict(located.data, path.resolve(), quick, located=located)
    check_runs(design, located)
    return design


def check_runs(design: Design, located: Located | None = None) -> None:
    """What each design point's runs would read (chip config, traffic spec, layout and its
    parameters), checked before any run starts; the error names the design and the levels."""
    from .execute import check_config

    seen: set[str] = set()
    for point in design.points():
        cfg = design.config(point, design.seed)
        h = config_hash(cfg)
        if h in seen:
            continue
        seen.add(h)
        try:
            check_config(cfg)
        except ValueError as e:
            levels = ", ".join(f"{k}={v}" for k, v in point.items())
            blamed = _blamed_factor(design, point, str(e))
            head = f"factors.{blamed}.levels" if blamed else "factors"
            msg = f"{head}: the run with {levels}: {e}"
            raise DesignError(f"{_where(design.source, located, msg)}: {msg}") from None


def _blamed_factor(design: Design, point: dict[str, str], error: str) -> str | None:
    """The factor of `point` whose level sets a field the error names (`chip.units.dram.
    read_latency` for an error about `units.dram.read_latency`), if one does."""
    for f in design.factors:
        label = point.get(f.key)
        if label is None:
            continue
        for target in f.level(label).settings:
            field = target.partition(".")[2] or target
            if re.search(rf"(?<![\w.]){re.escape(field)}(?![\w])", error):
                return f.key
    return None
