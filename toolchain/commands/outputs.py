"""What every command does with the outputs it is asked to write, before it reads anything."""

from __future__ import annotations

import click

from npkit.asm.base.writing import Named, SameFileError, refuse_overwrite


def refuse_overwrite_usage(outputs: list[Named], inputs: list[Named]) -> None:
    """An output that names one of the command's inputs, or another of its outputs, is a
    usage error (exit 2): `npkit.asm.base.writing.refuse_overwrite`."""
    try:
        refuse_overwrite(outputs, inputs)
    except SameFileError as e:
        raise click.UsageError(str(e)) from None
