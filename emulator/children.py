"""Child processes that end with the process that started them.

A child the run forks or spawns (the traffic read-ahead, an experiment's pool workers)
serves its parent only.  On Linux it asks the kernel to SIGKILL it when the parent goes
(`prctl(PR_SET_PDEATHSIG)`), so a parent killed with SIGKILL leaves no child blocked on a
pipe nobody reads; elsewhere nothing changes.  The kernel sends the signal when the
*thread* that created the child ends: children here are made by their parent's main
thread, which ends with the process.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def die_with_parent(parent_pid: int) -> bool:
    """SIGKILL this process when its parent ends; if `parent_pid` is gone already (it
    died before this call), exit now.  False where the kernel offers no such request."""
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) != 0:
        return False
    if os.getppid() != parent_pid:  # orphaned between the fork and the request
        os._exit(1)
    return True
