"""The linker's errors, raised by the layout reader, the control plane's set-up and the
linker alike (npkit.toolchain.system.{layout,control,link})."""

from __future__ import annotations


class LinkError(ValueError):
    """An inconsistent layout or a block that does not build; the message says why."""


class DefineError(LinkError):
    """A -D option that is not NAME=VALUE (a usage error of the command that takes it)."""
