"""An application's own reasons among the combined table (npkit.toolchain.system.app):
which are its own, and what the control daemon does with each of its exceptions
(`control:` in its reasons.yaml: consume, the default, or forward).

    exception_actions(reasons)      # {"acl_log": "consume", ...}
    daemon_exception_lines(reasons) # ["40 consume", ...]: npkd's npkd.exceptions (xscale/npkd/cp.h)
"""

from __future__ import annotations

from npkit.emulator.traffic.reasons import Reasons, load_reasons

DEFAULT_ACTION = "consume"


def app_only(reasons: Reasons) -> frozenset[str]:
    """The names of the reasons (drops and exceptions) npkit's reasons.yaml does not declare."""
    base = load_reasons()
    return frozenset(n for n in (*reasons.drops, *reasons.exceptions) if n not in base.drops and n not in base.exceptions)


def exception_actions(reasons: Reasons) -> dict[str, str]:
    """An application's exception reasons -> what the control daemon does with the packet."""
    own = app_only(reasons)
    return {r.name: r.control or DEFAULT_ACTION for r in reasons.exceptions.values() if r.name in own}


def daemon_exception_lines(reasons: Reasons) -> list[str]:
    """The lines "CODE ACTION" of npkd's NPKD_APP_EXCEPTIONS file (xscale/npkd/cp.h)."""
    actions = exception_actions(reasons)
    return [f"{reasons.exceptions[n].code} {a}" for n, a in sorted(actions.items(), key=lambda kv: reasons.exceptions[kv[0]].code)]
