"""Arrow text: ``A -> B, C <-> D, E`` (the canonical encoding of prompts and traces).

``->``/``-->``/``→``/``=>`` directed, ``<-``/``<--``/``←``/``<=`` reversed, ``<->``/``<-->``/``↔``/
``<=>`` bidirected; chains allowed; items separated by ``,`` ``;`` ``.`` newlines, brackets or the
word ``and``; a leading ``label:`` is dropped (``DAG:``/``ADMG:`` also declare the class).  Names
are ``\\w`` words (hyphens inside allowed); consecutive unquoted words form one multi-word name;
quoted names (``"..."``/``'...'``) may hold anything but newlines.  A bare name is an isolated node.
``and`` as a name must be quoted.  The lexer is shared with CLEAR, JSON edge strings, node sets and
paths.
"""

from __future__ import annotations

import re
from typing import Any

from calver.verifier.formats.common import MAX_EDGES, ParseError, RenderOrder, bad_token, order_of, quote_name
from calver.verifier.graph import CausalGraph, GraphClass, GraphError

_ARROWS = {"->": "->", "-->": "->", "→": "->", "⟶": "->", "=>": "->", "⇒": "->", "—>": "->",
           "–>": "->", "<-": "<-", "<--": "<-", "←": "<-", "⟵": "<-", "<=": "<-", "⇐": "<-",
           "<->": "<->", "<-->": "<->", "↔": "<->", "⟷": "<->", "<=>": "<->", "⇔": "<->"}
_ARROW_TOK = re.compile(r"""(?P<ws>[^\S\n]+)|(?P<sep>[,;.\n\[\](){}][\s,;.\[\](){}]*)
 |(?P<q>"[^"\n]*"|'[^'\n]*'|“[^”\n]*”)|(?P<w>\w+(?:-\w+)*)
 |(?P<arrow>[-<>=\u2010-\u2015\u2190-\u21ff\u27f5-\u27ff]+)|(?P<colon>:)|(?P<bad>.)""", re.X | re.S)
_BARE = re.compile(r"\w+(?:-\w+)*(?: \w+(?:-\w+)*)*")
_HAS_ARROW = re.compile(r"<->|->|<-|[→←↔⟶⟵⟷⇒⇐⇔]|-->|<=>|=>")


def lex(text: str, what: str) -> list[list]:
    """Items (lists of [kind, value, pos, joinable, raw]) of arrow text; separators split items.
    A bare (joinable) name's value is its words joined by one space."""
    items: list[list[Any]] = []
    cur: list[list[Any]] = []
    arrows = 0
    for m in _ARROW_TOK.finditer(text):
        k, v, p = m.lastgroup, m.group(), m.start()
        if k == "ws":
            continue
        if k == "arrow" and (arrows := arrows + 1) > MAX_EDGES:
            raise ParseError(f"more than {MAX_EDGES} edges in {what}")
        if k == "sep" or (k == "w" and v.lower() == "and"):
            if cur:
                items.append(_joined(cur))
                cur = []
        elif k == "w":
            if cur and cur[-1][0] == "name" and cur[-1][3]:
                cur[-1][1].append(v)  # words are joined once per name: += per word is quadratic
            else:
                cur.append(["name", [v], p, True, v])
        elif k == "bad" or (k == "arrow" and v not in _ARROWS) or v in ('""', "''", "“”"):
            raise bad_token(v, text, p, what)
        else:
            cur.append(["name" if k == "q" else k, v[1:-1] if k == "q" else _ARROWS.get(v, v), p, False, v])
    if cur:
        items.append(_joined(cur))
    return items


def _joined(item: list[list]) -> list[list]:
    for t in item:
        if t[3]:
            t[1] = " ".join(t[1])
    return item


class ProseLike(ParseError):
    """Arrow text whose unquoted names run longer than ``parse_arrows(max_words=)`` allows."""


def max_bare_words(items: list[list]) -> int:
    """The most words in one unquoted name of lexed ``items`` (0 if none): many reads like prose."""
    return max((t[1].count(" ") + 1 for item in items for t in item if t[3]), default=0)


# Edge spellings this format does not read, which the lexer would otherwise take for names: PAG circle marks
# (``A o-o B`` became one node "A o-o B") and an edge kind in brackets (``A <-> B [bidirected]`` added a node).
_CIRCLE_MARK = re.compile(r"(?<![\w-])(?:o-+o|o-+>|<-+o)(?![\w-])")
# a prose relation inside an arrow list ("X -> A, A confounded with B") became one multi-word node name
_PROSE_EDGE = re.compile(r"\b(?:confounded (?:with|by)|(?:share|shares|sharing) an? "
                         r"(?:hidden|latent|common|unobserved) (?:cause|confounder|parent)|common cause of)\b",
                         re.IGNORECASE)
_EDGE_NOTE = re.compile(r"[\[(]\s*(?:bi-?directed|directed|confound(?:ed|ing|er)|latent|hidden(?: cause)?)\s*[\])]",
                        re.IGNORECASE)


def _unread_edges(text: str, what: str) -> None:
    from calver.verifier.formats.objects import unquoted

    syntax = unquoted(text)
    for rx, why in ((_CIRCLE_MARK, "a PAG circle mark is not an edge calver reads (write A -> B or A <-> B)"),
                    (_EDGE_NOTE, "an edge kind in brackets is not a node (write the edge itself: A <-> B)")):
        m = rx.search(syntax)
        if m:
            raise bad_token(text[m.start():m.end()], text, m.start(), what, f" ({why})")
    m = _PROSE_EDGE.search(syntax) if _HAS_ARROW.search(syntax) else None
    if m:
        raise bad_token(text[m.start():m.end()], text, m.start(), what,
                        " (a relation in words inside an arrow list is not a node: write A <-> B)")


def parse_arrows(text: str, what: str = "arrow text", max_words: int | None = None):
    """-> (nodes, directed, bidirected, declared kind, bare names). With ``max_words``, an unquoted name
    of more words is a ParseError (a bare node list that reads like unparsed prose)."""
    nodes: list[str] = []
    d: list[tuple[str, str]] = []
    b: list[tuple[str, str]] = []
    bare: list[str] = []
    declared = None
    _unread_edges(text, what)
    items = lex(text, what)
    if max_words is not None and max_bare_words(items) > max_words:
        raise ProseLike(f"an unquoted name of more than {max_words} words in {what}")
    for item in items:
        if len(item) >= 2 and item[0][0] == "name" and item[1][0] == "colon":
            try:
                declared = GraphClass.parse(item[0][1])
            except GraphError:
                pass
            item = item[2:]
        if not item:
            continue
        for j, t in enumerate(item):
            if t[0] != ("name", "arrow")[j % 2]:
                raise bad_token(t[4], text, t[2], what, f" (expected {('a node name', 'an arrow')[j % 2]})")
        if item[-1][0] == "arrow":
            raise bad_token(item[-1][4], text, item[-1][2], what, " (arrow without a head node)")
        names = [t[1] for t in item[0::2]]
        nodes.extend(names)
        if len(names) == 1:
            bare.append(names[0])
        for a, arrow, c in zip(names, item[1::2], names[1:]):
            (b if arrow[1] == "<->" else d).append((c, a) if arrow[1] == "<-" else (a, c))
    return nodes, d, b, declared, bare


def parse(text: str, hint=None):
    return parse_arrows(text)[:4]


def detect(body: str) -> bool:
    return bool(_HAS_ARROW.search(body))


# Fast path for the canonical arrow text that traces and prompts use ("A -> B, C <-> D, E"):
# one regex pass instead of the general lexer. Anything else (chains, quotes, "and", labels)
# takes the general path; tests/test_parsers.py checks both agree.
_FN = r"[A-Za-z_][A-Za-z0-9_]*"
_FAST_ITEM = rf"{_FN}(?:[ \t]*(?:<->|->|<-)[ \t]*{_FN})?"
_FAST_TEXT = re.compile(rf"{_FAST_ITEM}(?:[ \t]*[,;\n][ \t]*{_FAST_ITEM})*")
_FAST_EDGE = re.compile(rf"({_FN})(?:[ \t]*(<->|->|<-)[ \t]*({_FN}))?")
_FAST_AND = re.compile(r"\band\b", re.I)


def parse_fast(body: str):
    """``parse`` for canonical arrow text, or None when ``body`` is not canonical."""
    if not _FAST_TEXT.fullmatch(body) or _FAST_AND.search(body):
        return None
    found: list[str] = []
    d: list[tuple[str, str]] = []
    b: list[tuple[str, str]] = []
    for a, op, c in _FAST_EDGE.findall(body):
        found.append(a)
        if op:
            found.append(c)
            if op == "->":
                d.append((a, c))
            elif op == "<-":
                d.append((c, a))
            else:
                b.append((a, c))
    return found, d, b, None


def _edgeless_name(n: str) -> str:
    from calver.verifier.formats.prose import is_phrase_word

    out = render_name(n)
    # a lone capital is a name to prose ("A", "I"), and no phrase is made of single letters alone
    if out is n and any(is_phrase_word(w) and not (len(w) == 1 and w.isupper()) for w in n.split()):
        return quote_name(n, False, ('""', "“”", "''"))
    return out


def render_name(n: str) -> str:
    """``n`` as arrow text reads it back: bare when it lexes as one name (and cannot start a matrix row:
    no leading digit), else quoted."""
    from calver.verifier.contract import slot_safe

    # quoted too: a name the slot splitter would read as decoration (``_``), and one spelling edge syntax
    bare = bool(_BARE.fullmatch(n)) and not n[0].isdigit() and "and" not in n.lower().split() \
        and slot_safe(n) and not _CIRCLE_MARK.search(n) and not _PROSE_EDGE.search(n)
    return quote_name(n, bare, ('""', "''", "“”"))


def render(g: CausalGraph, order: RenderOrder | None = None, *, child_first: bool = False) -> str:
    """``g`` as arrow text, edges in ``order``; ``child_first`` writes each directed edge ``B <- A`` (the node
    before its parent, as a parents lookup reads it)."""
    o = order_of(g, order)
    if not (g.directed or g.bidirected):
        # No arrow to detect the format by, so the text is tried as prose first: quote each name that
        # holds a word of a prose phrase ("nodes", "causes"), and prose cannot recognise one.
        names = [_edgeless_name(n) for n in o.nodes]
        if any(r is not n for r, n in zip(names, o.nodes)):  # one quoted: all (a mixed list reads as prose)
            names = [r if r is not n else quote_name(n, False, ('""', "''", "“”")) for r, n in zip(names, o.nodes)]
        return ", ".join(names)
    touched = {n for e in g.directed | g.bidirected for n in e}
    parts = [f"{render_name(c)} <- {render_name(a)}" if child_first else f"{render_name(a)} -> {render_name(c)}"
             for a, c in o.directed]
    parts += [f"{render_name(a)} <-> {render_name(c)}" for a, c in o.bidirected]
    return ", ".join(parts + [render_name(n) for n in o.nodes if n not in touched])
