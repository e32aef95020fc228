"""Where the router's sources and example configuration live in the tree."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MICROCODE = ROOT / "microcode"
LAYOUTS = MICROCODE / "layouts"
INCLUDE = MICROCODE / "include"
REASONS_H = INCLUDE / "reasons.h"
DEFAULT_ROUTER = ROOT / "examples" / "traffic" / "router.yaml"
DEFAULT_ROUTES = ROOT / "examples" / "traffic" / "routes.txt"
