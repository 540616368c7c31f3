"""Run the ``brutus`` command in this process, through its real entry point (``brutus.cli.app.main``: the
same one-line errors and exit codes a shell sees), inside click's ``CliRunner`` isolation: stdin, stdout,
stderr and the environment are swapped for the call. ``BRUTUS_DEBUG`` and ``ANTHROPIC_API_KEY`` are unset
unless the caller sets them, and ``TMPDIR`` counts as it would in a new process. One test per CLI module still runs a real ``python -m brutus`` process."""

from __future__ import annotations

import os
import tempfile
from contextlib import chdir, nullcontext
from dataclasses import dataclass
from pathlib import Path

from click.testing import CliRunner

from brutus.cli.app import main

__all__ = ["Result", "run"]

UNSET = ("BRUTUS_DEBUG", "BRUTUS_TENANT", "ANTHROPIC_API_KEY")


@dataclass(frozen=True)
class Result:
    """What a shell would see: the exit code and both streams (the fields of ``subprocess.CompletedProcess``)."""

    returncode: int
    stdout: str
    stderr: str
    args: tuple[str, ...] = ()


def run(
    *args: str | os.PathLike[str],
    env: dict[str, str] | None = None,
    input: str | bytes | None = None,  # noqa: A002  CliRunner's own name
    cwd: Path | None = None,
) -> Result:
    """``brutus ARGS…`` with ``env`` added to the environment, ``input`` on stdin, in ``cwd``."""
    argv = [os.fspath(a) for a in args]
    overrides: dict[str, str | None] = {name: None for name in UNSET}
    overrides.update(env or {})
    runner, tempdir = CliRunner(), tempfile.tempdir
    if "TMPDIR" in overrides:
        tempfile.tempdir = None  # tempfile reads TMPDIR once per process: again, for this call
    try:
        with runner.isolation(input=input, env=overrides) as (out, err, _), chdir(cwd) if cwd else nullcontext():
            code = main(argv)
    finally:
        tempfile.tempdir = tempdir
    return Result(code, out.getvalue().decode("utf-8", "replace"), err.getvalue().decode("utf-8", "replace"), tuple(argv))
