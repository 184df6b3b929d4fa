"""Adjacency matrix.

Optional header row of names (an extra leading corner cell is dropped), rows optionally led by their
name; cells separated by spaces/tabs/commas/semicolons/pipes.  Each entry is a bit field: 1 = row ->
column, 2 = row <-> column (must be mirrored), 3 = both.  Mutual 1s are two directed edges (a cycle).
Without a header the ``nodes`` argument names the rows.
"""

from __future__ import annotations

import re

from calver.verifier.formats.common import ParseError, RenderOrder, bad_token, order_of, quote_name
from calver.verifier.graph import CausalGraph

_CELL_TOK = re.compile(r"""(?P<q>"[^"\n]*"|'[^'\n]*')|(?P<c>[^\s,;|"']+)|(?P<s>[\s,;|]+)|(?P<bad>.)""")
_NUM = re.compile(r"[0-3](?:\.0*)?")
_BARE_CELL = re.compile(r"[^\s,;|\"'\ufeff]+")  # BOM: parse_graph lstrips it


def matrix_edges(names, rows, out, what, lines=None):
    """Append the edges of the square cell grid ``rows`` (entries 0-3) to ``out`` = (nodes, d, b)."""
    n = len(names)
    cells = [[int(float(c)) if _NUM.fullmatch(c) else None for c in r] for r in rows]
    for i in range(n):
        for j in range(n):
            v = cells[i][j]
            if v is None:
                where = f"line {lines[i]}" if lines else f"row {i + 1}"
                raise ParseError(f"unexpected token {rows[i][j][:20]!r} at {where} cell {j + 1} in {what} "
                                 "(entries are 0-3)")
            if v & 1:
                out[1].append((names[i], names[j]))
            if (v & 2) != ((cells[j][i] or 0) & 2):
                raise ParseError(f"bidirected entry at row {i + 1} col {j + 1} of {what} is not mirrored")
            if v & 2 and i <= j:
                out[2].append((names[i], names[j]))


def _rows(text: str):
    rows, off = [], 0
    for ln, line in enumerate(text.split("\n"), 1):
        cells = []
        for m in _CELL_TOK.finditer(line):
            if m.lastgroup == "bad":
                raise bad_token(m.group(), text, off + m.start(), "adjacency matrix")
            if m.lastgroup != "s":
                cells.append((m.group()[1:-1] if m.lastgroup == "q" else m.group(), m.lastgroup == "q"))
        if cells:
            rows.append((ln, cells))
        off += len(line) + 1
    return rows


def _isnum(cell) -> bool:
    return not cell[1] and bool(_NUM.fullmatch(cell[0]))


def detect(text: str) -> bool:
    try:
        rows = _rows("\n".join(ln[:4096] for ln in text.split("\n", 3)[:3]))
    except ParseError:
        return False
    last = rows[-1][1] if rows else [("x", False)]
    if len(rows) < 2:
        return all(map(_isnum, last))
    return all(map(_isnum, last[1:])) and (len(last) > 1 or _isnum(last[0]))


def parse(text: str, hint=None):
    rows = _rows(text)
    if not rows:
        raise ParseError("empty adjacency matrix")
    if all(_isnum(c) for c in rows[0][1]):
        body, names = rows, list(hint or [])
        if len(names) != len(body):
            raise ParseError("an adjacency matrix without a header row needs the node names (nodes=...)")
    else:
        body, names = rows[1:], [c[0] for c in rows[0][1]]
        if len(names) == len(body) + 1:
            names = names[1:]
    n = len(body)
    if len(names) != n or len(set(names)) != n or n == 0:
        raise ParseError(f"adjacency matrix has {n} rows but its header names {len(names)} distinct nodes")
    grid: list = [None] * n
    lines: list = [0] * n
    for i, (ln, cells) in enumerate(body):
        if len(cells) == n + 1 and not _isnum(cells[0]):
            if cells[0][0] not in names:
                raise ParseError(f"unexpected token {cells[0][0]!r} at line {ln} in adjacency matrix "
                                 "(unknown row name)")
            r = names.index(cells[0][0])
            cells = cells[1:]
        elif len(cells) == n:
            r = i
        else:
            raise ParseError(f"adjacency matrix row at line {ln} has {len(cells)} cells, expected {n}")
        if grid[r] is not None:
            raise ParseError(f"duplicate row for {names[r]!r} at line {ln} in adjacency matrix")
        grid[r], lines[r] = [c[0] if not c[1] else "?" + c[0] for c in cells], ln
    out: tuple[list, list, list] = (list(names), [], [])
    matrix_edges(names, grid, out, "adjacency matrix", lines)
    return out[0], out[1], out[2], None


def _cell(n: str) -> str:
    from calver.verifier.contract import slot_safe

    # a row starts with its name: it must not read as a slot header or decoration where the trace is split
    return quote_name(n, bool(_BARE_CELL.fullmatch(n)) and not _NUM.fullmatch(n) and ":" not in n and slot_safe(n))


def render(g: CausalGraph, order: RenderOrder | None = None) -> str:
    nodes = order_of(g, order).nodes  # rows and columns; a matrix has no edge order
    return "\n".join([" ".join(map(_cell, nodes))] + [" ".join([_cell(a)] + [
        str(((a, c) in g.directed) + 2 * g.has_edge(a, c, "<->")) for c in nodes]) for a in nodes])
