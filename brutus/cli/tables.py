"""How every command prints for people: a console that knows a terminal from a pipe, and tables fitted to it.

Rules:

- On a terminal, lines wrap at word boundaries at the terminal's width, and a table is fitted to the width:
  ``whole`` columns (ids, times) and ``number`` columns never wrap or shorten, numbers are right-aligned, and
  ``text`` columns (titles, names, details) give way first, cut with an ellipsis down to their minimum. Only
  a header may wrap, at its spaces. When even the minimums do not fit, the table is printed wider than the
  terminal rather than cut an id.
- Piped (stdout is not a terminal): plain text for a machine to read (or ask for ``--json``): no colour, no
  box drawing, no width limit. A table is a header line and one line per row, columns two spaces apart,
  nothing cut; text is flattened onto one line.
- Rich decides what a terminal is (``isatty``, or ``FORCE_COLOR`` / ``TTY_COMPATIBLE``) and how wide it is
  (the terminal, or ``COLUMNS``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["Column", "console", "fits", "flat", "is_plain", "print_table", "table_widths"]

Kind = Literal["whole", "number", "text"]
PLAIN_WIDTH = 4096  # what rich lays out against when nothing limits the width (a pipe, a file)
GAP = 3  # columns of a terminal table: a space of padding either side of the header rule's blank separator


@dataclass(frozen=True, slots=True)
class Column:
    """A table column: ``whole`` and ``number`` cells are never cut (numbers right-aligned); a ``text`` column
    is cut with an ellipsis, no narrower than ``least`` (or its widest cell when that is narrower)."""

    header: str
    kind: Kind = "text"
    least: int = 12


def console(*, stderr: bool = False) -> Any:
    """The rich console every command prints through: word-wrapped at the terminal's width on a terminal,
    plain and unlimited in width when piped. A reader that closed the pipe (``brutus show | head``) ends the
    command quietly with exit 0 (``main`` handles the ``BrokenPipeError``), where rich's own default exits 1."""
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:  # rich's documented hook
            raise BrokenPipeError

    out = _Console(highlight=False, stderr=stderr)
    if not out.is_terminal:
        out = _Console(highlight=False, stderr=stderr, soft_wrap=True, width=PLAIN_WIDTH, color_system=None)
    return out


def is_plain(out: Any) -> bool:
    """Whether ``out`` writes to a pipe or a file (plain text) rather than a terminal."""
    return not out.is_terminal


def flat(text: str | None) -> str:
    """``text`` on one line: newlines and tabs become spaces."""
    if not text:
        return ""
    return " ".join(text.replace("\r", "").replace("\t", " ").split("\n"))


def _width(text: str) -> int:
    from rich.cells import cell_len

    return cell_len(text)


def _least(column: Column, cells: list[str]) -> int:
    widest = max((_width(c) for c in cells), default=0)
    word = max((_width(w) for w in column.header.split()), default=0)
    if column.kind == "text":
        return max(word, min(column.least, max(widest, _width(column.header))))
    return max(widest, word)


def table_widths(columns: Sequence[Column], rows: Sequence[Sequence[str]], width: int) -> list[int]:
    """Each column's width in a terminal ``width`` wide (see the module rules): everything at its natural
    width when it fits; else text columns shrink (the widest first) and headers wrap."""
    cells = [[flat(row[i]) for row in rows] for i in range(len(columns))]
    natural = [max([_width(c.header), *(_width(x) for x in cells[i])]) for i, c in enumerate(columns)]
    room = width - GAP * (len(columns) - 1)
    if sum(natural) <= room:
        return natural
    widths = [_least(c, cells[i]) for i, c in enumerate(columns)]
    spare = room - sum(widths)
    # headers of ids and numbers whole first (a wrapped header costs a line), then the text columns, a column
    # at a time to the narrowest: the room goes where it shows the most
    for i, c in enumerate(columns):
        grow = natural[i] - widths[i]
        if c.kind != "text" and 0 < grow <= spare:  # a header whole, or left wrapped: never half-way
            widths[i] += grow
            spare -= grow
    texts = [i for i, c in enumerate(columns) if c.kind == "text"]
    while spare > 0:
        wanting = [i for i in texts if widths[i] < natural[i]]
        if not wanting:
            break
        narrowest = min(wanting, key=lambda i: widths[i])
        widths[narrowest] += 1
        spare -= 1
    return widths


def fits(columns: Sequence[Column], rows: Sequence[Sequence[str]], width: int) -> bool:
    """Whether the table fits ``width`` with every text column at its ``least`` or wider."""
    cells = [[flat(row[i]) for row in rows] for i in range(len(columns))]
    return sum(_least(c, cells[i]) for i, c in enumerate(columns)) + GAP * (len(columns) - 1) <= width


def print_table(
    out: Any,
    columns: Sequence[Column],
    rows: Sequence[Sequence[str]],
    *,
    title: str | None = None,
    fold: Sequence[int] = (),
    wrap: bool = False,
) -> None:
    """Print ``rows`` (cells as plain strings, no markup) under ``columns``: fitted to the terminal, or plain.
    On a terminal too narrow for them all, the ``fold`` columns leave the table for a dim second line under
    each row's first cell (``header value · …``), cut with an ellipsis at the table's width, or with ``wrap``
    wrapped at words."""
    if is_plain(out):
        _print_plain(out, columns, rows, title)
        return
    from rich import box
    from rich.table import Table
    from rich.text import Text

    details: list[str] | None = None
    if fold and not fits(columns, rows, out.width):
        keep = [i for i in range(len(columns)) if i not in fold]
        details = [
            " · ".join(_labelled(columns[i], flat(row[i])) for i in fold if flat(row[i]) not in ("", "-"))
            for row in rows
        ]
        columns, rows = [columns[i] for i in keep], [[row[i] for i in keep] for row in rows]
    widths = table_widths(columns, rows, out.width)
    if details is not None:
        widths[0] = max(widths[0], out.width - sum(widths[1:]) - GAP * (len(widths) - 1))
    if title:
        out.print(Text(title))  # wrapped at the terminal's width, not the table's
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1))
    for index, (column, width) in enumerate(zip(columns, widths)):
        cut = column.kind == "text" or (index == 0 and details is not None and not wrap)
        table.add_column(
            column.header,
            width=width,
            justify="right" if column.kind == "number" else "left",
            no_wrap=cut,
            overflow="ellipsis" if cut else "fold",
        )
    for index, row in enumerate(rows):
        first = Text(flat(row[0]))
        if details is not None and details[index]:
            first.append("\n  " + details[index], style="dim")
        table.add_row(first, *(Text(flat(cell)) for cell in row[1:]))
    total = sum(widths) + GAP * (len(widths) - 1)
    if total <= out.width:
        out.print(table)
        return
    width = out.width  # the minimums do not fit: print wider than the terminal rather than cut an id
    out.width = total
    try:
        out.print(table)
    finally:
        out.width = width


def _labelled(column: Column, cell: str) -> str:
    return cell if column.kind == "text" else f"{column.header} {cell}"


def _print_plain(out: Any, columns: Sequence[Column], rows: Sequence[Sequence[str]], title: str | None) -> None:
    lines = [[c.header for c in columns], *([flat(cell) for cell in row] for row in rows)]
    widths = [max(_width(line[i]) for line in lines) for i in range(len(columns))]
    if title:
        out.out(title, highlight=False)
    for line in lines:
        cells = []
        for cell, column, width in zip(line, columns, widths):
            pad = " " * (width - _width(cell))
            cells.append(pad + cell if column.kind == "number" else cell + pad)
        out.out("  ".join(cells).rstrip(), highlight=False)
