"""The import progress bar at 80 columns: the count always shows whole; a long file name is what gets cut.
A terminal is what rich takes for one (``TTY_COMPATIBLE=1`` with ``COLUMNS``, as in test_cli_tables.py); the
bar is transient, so its frames are read from what was written to stderr before it was erased."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from cli_helpers import run
from corpus_helpers import opencode_files

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
FRAME = re.compile(r"^importing [━╸╺]{20} +(\d+)/12( \S+…)? *$")  # the file just imported, cut


def test_the_count_shows_whole_at_80_columns(tmp_path: Path) -> None:
    files = []
    for path in opencode_files():  # twelve files named far wider than the terminal
        files.append(tmp_path / f"{'a-very-long-directory-name-' * 3}{path.name}")
        shutil.copyfile(path, files[-1])
    result = run("import", *files, "--db", tmp_path / "p.db", env={"COLUMNS": "80", "TTY_COMPATIBLE": "1"})
    assert result.returncode == 0, result.stderr
    frames = [line for line in re.split(r"[\r\n]", ANSI.sub("", result.stderr)) if line.startswith("importing")]
    assert frames and all(len(line) <= 80 for line in frames), max(frames, key=len)
    counts = [FRAME.match(line) for line in frames]
    assert all(counts), [line for line, match in zip(frames, counts) if not match]
    assert counts[-1].group(1) == "12"
    names = [m.group(2).strip() for m in counts if m.group(2)]
    assert names and all(any(f.name.startswith(name[:-1]) for f in files) for name in names)
