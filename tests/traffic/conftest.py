"""Shared fixtures: the example router and small frame builders."""

from __future__ import annotations

from pathlib import Path

import pytest

from npkit.emulator.traffic.oracle import RefRouter
from npkit.emulator.traffic.router_config import RouterConfig

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "traffic"
ROUTER_YAML = EXAMPLES / "router.yaml"


@pytest.fixture(scope="session")
def config() -> RouterConfig:
    return RouterConfig.load(ROUTER_YAML)


@pytest.fixture(scope="session")
def router(config: RouterConfig) -> RefRouter:
    return RefRouter(config)
