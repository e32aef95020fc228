"""The results store: one JSON record per run, and the table built from them.

    RESULTS_DIR/design.yaml        the design as run (--quick merged in)
    RESULTS_DIR/experiment.json    name, design hash, code hash, run ids
    RESULTS_DIR/runs/<id>.json     one record per finished run (ok or failed), written
                                   atomically: a killed experiment leaves whole records
    RESULTS_DIR/results.csv        one row per run: factor levels, seed, responses,
    RESULTS_DIR/results.parquet    status, error, config and code hash

A run counts as done when its record exists with the same config hash; starting the
experiment again executes only the runs that are not done (failed runs too with
`retry_failed`).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
# what a run's result depends on: the emulator, the microcode, the assembler and linker,
# the traffic generator and this package's run code
CODE_PATHS = ["asm", "emulator/src", "emulator/include", "emulator/configs", "emulator/traffic",
              "emulator/msf_device.py", "emulator/traffic_run.py", "emulator/binding.py", "emulator/loader.py",
              "microcode", "toolchain/system", "asm/image.py", "toolchain/router", "asm/isa",
              "toolchain/experiment/execute.py", "toolchain/experiment/steady.py",
              "toolchain/experiment/capacity.py"]  # fmt: skip
CODE_SUFFIXES = {".py", ".c", ".h", ".uc", ".yaml"}


def code_hash() -> str:
    h = hashlib.sha256()
    for rel in CODE_PATHS:
        p = ROOT / rel
        files = [p] if p.is_file() else sorted(x for x in p.rglob("*") if x.is_file())
        for f in files:
            if f.suffix in CODE_SUFFIXES and "__pycache__" not in f.parts:
                h.update(str(f.relative_to(ROOT)).encode())
                h.update(f.read_bytes())
    return h.hexdigest()[:16]


def _clean(v: Any) -> Any:
    """JSON without NaN/inf (they become null)."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {k: _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    return v


class StoreError(ValueError):
    """A results directory that cannot be read as one: the message names the file."""


RECORD_LIMIT = 64 << 20  # a run record or the manifest (a run's windows included)
RECORD_KEYS = ("run_id", "point", "replicate", "seed", "levels", "status", "config_hash")


def read_json(path: Path, what: str, keys: tuple[str, ...], hint: str = "") -> dict[str, Any]:
    """A JSON object of the store holding `keys`; StoreError naming the file otherwise."""
    from npkit.asm.base.reading import InputError, parse_json, read_text

    text = read_text(path, limit=RECORD_LIMIT, error=StoreError, what=what)
    try:
        data = parse_json(text, str(path), what=what)
    except InputError as e:
        raise StoreError(f"{e}{hint}") from None
    if not isinstance(data, dict):
        raise StoreError(f"{path}: {what} is not a JSON object{hint}")
    missing = [k for k in keys if k not in data]
    if missing:
        raise StoreError(f"{path}: {what} has no {', '.join(missing)}{hint}")
    return data


def write_json(path: Path, data: Any) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(_clean(data), indent=1, sort_keys=True, allow_nan=False) + "\n")
    os.replace(tmp, path)


class Store:
    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.runs_dir = self.root / "runs"

    def init(self, manifest: dict[str, Any], design_text: str) -> None:
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        (self.root / "design.yaml").write_text(design_text)
        write_json(self.root / "experiment.json", manifest)

    def manifest(self) -> dict[str, Any]:
        path = self.root / "experiment.json"
        if not path.exists():
            raise StoreError(f"{self.root}: not a results directory (no experiment.json)")
        return read_json(path, "experiment manifest", ("factors", "runs"))

    def save(self, record: dict[str, Any]) -> None:
        write_json(self.runs_dir / f"{record['run_id']}.json", record)

    def records(self) -> dict[str, dict[str, Any]]:
        out = {}
        if self.runs_dir.exists():
            for p in sorted(self.runs_dir.glob("*.json")):
                rec = read_json(p, "run record", RECORD_KEYS, "; delete it to run that run again")
                out[rec["run_id"]] = rec
        return out

    def done(self, config_hashes: dict[str, str], retry_failed: bool = False) -> set[str]:
        """Run ids whose stored record matches the run's current configuration."""
        out = set()
        for rid, rec in self.records().items():
            if config_hashes.get(rid) != rec.get("config_hash"):
                continue
            if rec.get("status") == "ok" or not retry_failed:
                out.add(rid)
        return out

    # -- the table
    def table(self) -> Any:
        """One row per run of the current design (pandas DataFrame)."""
        import pandas as pd

        man = self.manifest()
        factors = man["factors"]
        recs = self.records()
        rows = []
        hashes = man.get("config_hashes", {})
        for rid in man["runs"]:
            rec = recs.get(rid)
            if rec is None or rec.get("config_hash") != hashes.get(rid, rec.get("config_hash")):
                continue  # not run yet, or run for an earlier version of the design
            row: dict[str, Any] = {"run_id": rid, "point": rec["point"], "replicate": rec["replicate"],
                                   "seed": rec["seed"]}  # fmt: skip
            row.update({f: rec["levels"][f] for f in factors})
            row.update({"status": rec["status"], "error": rec.get("error", "")})
            row.update({k: v for k, v in (rec.get("responses") or {}).items()})
            row.update({"host_s": rec.get("host_s"), "config_hash": rec["config_hash"],
                        "code_hash": rec.get("code_hash", "")})  # fmt: skip
            rows.append(row)
        # the fixed columns even when no run is in (a store whose runs are all missing)
        columns = ["run_id", "point", "replicate", "seed", *factors, "status", "error", "host_s", "config_hash",
                   "code_hash"]  # fmt: skip
        df = pd.DataFrame(rows) if rows else pd.DataFrame(columns=columns)
        for f in factors:
            if f in df:
                df[f] = df[f].astype(str)
        return df

    def write_table(self) -> Any:
        df = self.table()
        df.to_csv(self.root / "results.csv", index=False)
        # parquet wants one type a column: responses that are text in some rows stay text
        pq = df.copy()
        for c in pq.columns:
            if pq[c].dtype == object:
                kinds = {type(v) for v in pq[c] if v is not None and v == v}
                if len(kinds) > 1 or kinds - {str, bool}:
                    pq[c] = pq[c].map(lambda v: None if v is None or v != v else str(v))
        pq.to_parquet(self.root / "results.parquet", index=False)
        return df
