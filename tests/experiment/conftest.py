from __future__ import annotations

from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
TRAFFIC = ROOT / "examples" / "traffic" / "seed003_balanced.yaml"


@pytest.fixture
def tiny_design(tmp_path: Path):
    """A design of a few short runs on the real router (about a second each)."""

    def make(levels: list[str], replications: int = 2, name: str = "tiny", routes: int | None = None) -> Path:
        d = {"name": name, "replications": replications, "seed": 5,
             "base": {"layout": "pipelined", "traffic": str(TRAFFIC), "routes": routes},
             "factors": {"B": {"name": "queue manager", "set": "param.qm", "levels": levels}},
             "responses": ["throughput_mbps", "latency_mean_us"],
             "steady": {"window_us": 5, "min_ms": 0.25, "max_ms": 0.25, "drain_us": 20},
             "capacity": False}  # fmt: skip
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(d))
        return path

    return make
