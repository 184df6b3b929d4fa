"""Answer objects: node sets (``{A, B}``, ``set()``, CLEAR's ``[set(), {'A'}]``) and paths
(``X <- C -> Y``, ``[X, M, Y]``), read with the arrow-text lexer."""

from __future__ import annotations

import re

from calver.verifier.formats import arrows
from calver.verifier.formats.common import ParseError, bad_token, quote_name

_EMPTY = {"set()", "frozenset()", "∅", "{}", "[]", "()", "none", "empty", "empty set",
          "the empty set", "no nodes", "nothing", "{∅}", "null"}
_OPENERS = re.compile(r"[\"'“]")
_CLOSER = {'"': '"', "'": "'", "“": "”"}


def unquoted(s: str) -> str:
    """``s`` with every quoted name (as the arrow lexer reads one: ``"..."``, ``'...'``, ``“...”`` on one
    line) blanked out, same length, by a control character that no syntax uses (not a blank, which a
    regex might skip as whitespace), so syntax checks skip what is inside. Linear: the next closer and
    the next line break are found once per stretch, not once per opener."""
    if not _OPENERS.search(s):
        return s
    pieces: list[str] = []
    nxt: dict[str, int] = {}  # character -> its next position at or after the scan point (-1: none left)
    i = 0

    def find(ch: str, start: int) -> int:
        k = nxt.get(ch)
        if k is None or (k != -1 and k < start):
            k = s.find(ch, start)
            nxt[ch] = k
        return k

    for m in _OPENERS.finditer(s):
        j = m.start()
        if j < i:
            continue
        k = find(_CLOSER[m.group()], j + 1)
        if k == -1:
            continue
        nl = find("\n", j + 1)
        if nl != -1 and nl < k:
            continue
        pieces += [s[i:j], "\x01" * (k - j + 1)]
        i = k + 1
    pieces.append(s[i:])
    return "".join(pieces)


def split_unquoted(text: str, separators: str) -> list[str]:
    """``text`` split at each character of ``separators`` that is not inside a quoted name."""
    cuts = [m.start() for m in re.finditer(f"[{re.escape(separators)}]", unquoted(text))]
    return [text[a + 1:b] for a, b in zip([-1] + cuts, cuts + [len(text)])]


def empty_set_word(text: str) -> str | None:
    """The word (lower-cased) by which ``text`` denotes the empty set, such as ``none`` in ``{none}``, or
    None when it does not (a symbol such as ``{}`` / ``set()`` is no word). A problem with a node of that
    name makes the text ambiguous (:func:`calver.verifier.scoring.ambiguous_empty`)."""
    if not isinstance(text, str):
        return None
    for s in (text.strip().rstrip(".").strip(), _strip_wrapper(text)):
        w = s.lower()
        if w in _EMPTY and any(c.isalpha() for c in w):
            return w
    return None


def render_set_name(name: str) -> str:
    """``name`` as a node-set member that reads back as exactly that one name: bare when the lexer reads
    it so and it is no empty-set word, else quoted."""
    from calver.verifier.formats.arrows import render_name

    out = render_name(name)
    if out is name and (name.lower() in _EMPTY or name.lower() in ("set", "frozenset")):
        return quote_name(name, False, ('""', "''", "“”"))
    return out


def format_node_set(nodes) -> str:
    """Canonical set rendering: ``{A, B}`` with sorted members, each quoted when it must be; ``{}`` when
    empty."""
    return "{" + ", ".join(render_set_name(n) for n in sorted(nodes)) + "}"


def _strip_wrapper(s: str) -> str:
    s = s.strip().rstrip(".").strip()
    m = re.fullmatch(r"(?:frozenset|set)\((.*)\)", s, re.S)
    s = m.group(1).strip() if m else s
    if len(s) >= 2 and s[0] + s[-1] in ("{}", "[]", "()"):
        s = s[1:-1].strip()
    return s


def parse_node_set(text: str) -> frozenset[str]:
    """``{A, B}``, ``[A, B]``, ``{'P', 'X'}``, ``set()``, ``∅``, ``none``, ``A, B``, ``A and B``."""
    if not isinstance(text, str):
        raise ParseError(f"node set must be text, got {type(text).__name__}")
    s, bare = _strip_wrapper(text), text.strip().rstrip(".").strip()
    if not bare:
        raise ParseError("empty node-set text (write set() or {} for the empty set)")
    if bare.lower() in _EMPTY or not s or s.lower() in _EMPTY:
        return frozenset()
    m = re.search(r"[\[\](){}]", unquoted(s))
    if m:
        raise bad_token(m.group(), s, m.start(), "node set")
    names = []
    for item in arrows.lex(s, "node set"):
        if len(item) != 1 or item[0][0] != "name":
            t = next((t for t in item if t[0] != "name"), item[-1])
            raise bad_token(t[4], s, t[2], "node set")
        names.append(item[0][1])
    return frozenset(names)


def parse_node_sets(text: str) -> list[frozenset[str]]:
    """A list of node sets such as CLEAR's ``[set(), {'A'}, {'P', 'A'}]``; one bare set gives one."""
    if not isinstance(text, str):
        raise ParseError(f"node sets must be text, got {type(text).__name__}")
    s = text.strip()
    if len(s) >= 2 and s[0] == "[" and s[-1] == "]" and re.search(r"[{(]|set\(|∅", s):
        s = s[1:-1]
    out: list[frozenset[str]] = []
    for m in re.finditer(r"(?:frozenset|set)\(\)|∅|\{[^{}]*\}|(?P<sep>[\s,]+)|(?P<bad>.)", s):
        if m.group("bad"):
            if out or m.start():
                raise bad_token(m.group(), s, m.start(), "node-set list")
            return [parse_node_set(s)]
        if not m.group("sep"):
            out.append(parse_node_set(m.group()))
    if not out:
        raise ParseError(f"no node set found in {text[:40]!r}")
    return out


def parse_path(text: str) -> tuple[list[str], list[str] | None]:
    """``X <- C -> Y`` -> (nodes, edge types); ``[X, M, Y]`` / ``X, M, Y`` -> (nodes, None)."""
    if not isinstance(text, str):
        raise ParseError(f"path must be text, got {type(text).__name__}")
    s = _strip_wrapper(text)
    if len(s) >= 2 and s[0] == s[-1] and s[0] in "'\"" and s[0] not in s[1:-1]:
        s = s[1:-1].strip()
    m = re.search(r"[\[\](){}]", unquoted(s))
    if m:
        raise bad_token(m.group(), s, m.start(), "path")
    items = arrows.lex(s, "path")
    if not items:
        raise ParseError("empty path")
    if any(t[0] == "arrow" for item in items for t in item):
        if len(items) != 1:
            raise ParseError(f"a path with arrows must not contain separators: {text[:60]!r}")
        item = items[0]
        for j, t in enumerate(item + [["end", "", len(s), 0, ""]] if item[-1][0] == "arrow" else item):
            if t[0] != ("name" if j % 2 == 0 else "arrow"):
                raise bad_token(t[4], s, t[2], "path")
        return [t[1] for t in item[0::2]], [t[1] for t in item[1::2]]
    for item in items:
        if len(item) != 1 or item[0][0] != "name":
            raise bad_token(item[-1][4], s, item[-1][2], "path")
    return [item[0][1] for item in items], None


def parse_node_list(text: str) -> list[str]:
    """The node sequence of a path or list (``X -> M -> Y``, ``[X, M, Y]``, ``X, M, Y``)."""
    return parse_path(text)[0]
