"""Knights-and-knaves propositional logic: a closed formula grammar and a truth-table engine.

Grammar (keywords case-insensitive; names are identifiers ``[A-Za-z][A-Za-z0-9_]*``)::

    formula  := iff
    iff      := imp ( ('<->' | 'iff') imp )*           left-associative
    imp      := or ( ('->' | 'implies') imp )?         right-associative
    or       := and ( ('or' | '|' | '∨') and )*
    and      := unary ( ('and' | '&' | '∧') unary )*
    unary    := ('not' | '~' | '!' | '¬') unary | '(' formula ')' | atom
    atom     := 'knight' '(' NAME ')' | 'knave' '(' NAME ')' | 'true' | 'false'

``knight(A)`` is true iff A is a knight (the truthful role, whatever the puzzle calls it);
``knave(A)`` is ``not knight(A)``. A constraint set is a list of formulas separated by ``;``,
``,`` or newlines at parenthesis depth 0; each speaker S saying φ contributes
``knight(S) <-> φ``.

Truth tables are Python ints over the 2^n assignments of the people (assignment ``a``: person
``i`` is a knight iff bit ``i`` of ``a`` is set; truth-table bit ``a`` is the formula's value
under ``a``), so every connective is one big-int bit operation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Sequence, Union

MAX_DEPTH = 64
MAX_TOKENS = 5000
MAX_PEOPLE = 20

# Role vocabulary: (truthful, lying) pairs. The formal grammar uses knight/knave only; answers
# and prose may use any pair.
ROLE_PAIRS: tuple[tuple[str, str], ...] = (
    ("knight", "knave"),
    ("truth-teller", "liar"),
    ("angel", "devil"),
    ("saint", "sinner"),
    ("hero", "villain"),
    ("sage", "fool"),
)
ROLE_WORDS: dict[str, bool] = {}
for _t, _l in ROLE_PAIRS:
    for _w, _v in ((_t, True), (_l, False)):
        ROLE_WORDS[_w] = _v
        ROLE_WORDS[_w + "s"] = _v
        ROLE_WORDS[_w.replace("-", "")] = _v
        ROLE_WORDS[_w.replace("-", " ")] = _v
ROLE_WORDS.update({"truthteller": True, "truthful": True, "honest": True, "lying": False})


# ---- AST ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Atom:
    name: str
    knight: bool  # knight(name) if True, knave(name) if False


@dataclass(frozen=True)
class Const:
    value: bool


@dataclass(frozen=True)
class Not:
    arg: "Formula"


@dataclass(frozen=True)
class Bin:
    op: str  # 'and' | 'or' | '->' | '<->'
    left: "Formula"
    right: "Formula"


Formula = Union[Atom, Const, Not, Bin]


# ---- tokenizer / parser ---------------------------------------------------------------------------
_TOKEN = re.compile(
    r"\s*(?:(?P<op><->|<=>|->|=>|[()&|~!¬∧∨⊤⊥↔→])|(?P<word>[A-Za-z][A-Za-z0-9_]*)|(?P<bad>\S))"
)
_OPS = {"<=>": "<->", "↔": "<->", "=>": "->", "→": "->", "&": "and", "∧": "and", "|": "or", "∨": "or",
        "~": "not", "!": "not", "¬": "not", "⊤": "true", "⊥": "false"}
_KEYWORDS = {"and": "and", "or": "or", "not": "not", "iff": "<->", "implies": "->",
             "true": "true", "false": "false", "knight": "knight", "knave": "knave"}


_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")


def is_person_name(name: object) -> bool:
    """A name the grammar can write inside knight(...): an identifier that is not a keyword."""
    return isinstance(name, str) and bool(_NAME.fullmatch(name)) and name.lower() not in _KEYWORDS


def tokenize(text: str) -> list[tuple[str, str, int]]:
    """(kind, value, position) tokens; kind is 'op', 'name'. Raises ValueError on a bad character."""
    out: list[tuple[str, str, int]] = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            break
        if m.group("bad") is not None:
            raise ValueError(f"unexpected character {m.group('bad')!r} at position {m.start('bad')}")
        if m.group("op") is not None:
            out.append(("op", _OPS.get(m.group("op"), m.group("op")), m.start("op")))
        else:
            w = m.group("word")
            kw = _KEYWORDS.get(w.lower())
            out.append(("op", kw, m.start("word")) if kw else ("name", w, m.start("word")))
        pos = m.end()
        if len(out) > MAX_TOKENS:
            raise ValueError(f"formula has more than {MAX_TOKENS} tokens")
    return out


class _Parser:
    def __init__(self, tokens: list[tuple[str, str, int]]):
        self.toks = tokens
        self.i = 0

    def peek(self) -> str | None:
        return self.toks[self.i][1] if self.i < len(self.toks) and self.toks[self.i][0] == "op" else None

    def where(self) -> str:
        if self.i >= len(self.toks):
            return "end of formula"
        kind, val, pos = self.toks[self.i]
        return f"token {val!r} at position {pos}"

    def take(self, value: str) -> None:
        if self.peek() != value:
            raise ValueError(f"expected {value!r} but found {self.where()}")
        self.i += 1

    def formula(self, depth: int) -> Formula:
        if depth > MAX_DEPTH:
            raise ValueError(f"formula nests deeper than {MAX_DEPTH} levels")
        left = self.imp(depth)
        while self.peek() == "<->":
            self.i += 1
            left = Bin("<->", left, self.imp(depth))
        return left

    def imp(self, depth: int) -> Formula:
        left = self.disj(depth)
        if self.peek() == "->":
            self.i += 1
            return Bin("->", left, self.imp(depth + 1))
        return left

    def disj(self, depth: int) -> Formula:
        left = self.conj(depth)
        while self.peek() == "or":
            self.i += 1
            left = Bin("or", left, self.conj(depth))
        return left

    def conj(self, depth: int) -> Formula:
        left = self.unary(depth)
        while self.peek() == "and":
            self.i += 1
            left = Bin("and", left, self.unary(depth))
        return left

    def unary(self, depth: int) -> Formula:
        if depth > MAX_DEPTH:
            raise ValueError(f"formula nests deeper than {MAX_DEPTH} levels")
        tok = self.peek()
        if tok == "not":
            self.i += 1
            return Not(self.unary(depth + 1))
        if tok == "(":
            self.i += 1
            f = self.formula(depth + 1)
            self.take(")")
            return f
        if tok in ("true", "false"):
            self.i += 1
            return Const(tok == "true")
        if tok in ("knight", "knave"):
            self.i += 1
            self.take("(")
            if self.i >= len(self.toks) or self.toks[self.i][0] != "name":
                raise ValueError(f"expected a person's name but found {self.where()}")
            name = self.toks[self.i][1]
            self.i += 1
            self.take(")")
            return Atom(name, tok == "knight")
        raise ValueError(f"expected knight(NAME), knave(NAME), 'not' or '(' but found {self.where()}")


def parse_formula(text: str) -> Formula:
    """Parse one formula; raises ``ValueError`` naming the offending token."""
    toks = tokenize(text)
    if not toks:
        raise ValueError("empty formula")
    p = _Parser(toks)
    f = p.formula(0)
    if p.i != len(toks):
        raise ValueError(f"unexpected {p.where()} after a complete formula")
    return f


def split_constraints(text: str) -> list[str]:
    """Split a constraint list on ``;``, ``,`` and newlines at parenthesis depth 0."""
    items: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch in ";,\n" and depth <= 0:
            items.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    items.append("".join(cur))
    out = []
    for it in items:
        it = re.sub(r"^\s*(?:[-*•]|\d+[.)])\s+", "", it).strip().rstrip(".").strip()
        if it:
            out.append(it)
    return out


def parse_constraints(text: str) -> list[Formula]:
    """Parse a CONSTRAINTS slot: formulas separated by ``;``/``,``/newlines. Raises ValueError."""
    items = split_constraints(text)
    if not items:
        raise ValueError("no constraints")
    out = []
    for k, item in enumerate(items, 1):
        try:
            out.append(parse_formula(item))
        except ValueError as e:
            raise ValueError(f"constraint {k} ({item[:60]!r}): {e}") from None
    return out


def names(f: Formula) -> set[str]:
    out: set[str] = set()
    stack = [f]
    while stack:
        g = stack.pop()
        if isinstance(g, Atom):
            out.add(g.name)
        elif isinstance(g, Not):
            stack.append(g.arg)
        elif isinstance(g, Bin):
            stack += [g.left, g.right]
    return out


def to_text(f: Formula, top: bool = True) -> str:
    """Render in the grammar; compound sub-formulas are parenthesized."""
    if isinstance(f, Atom):
        return f"{'knight' if f.knight else 'knave'}({f.name})"
    if isinstance(f, Const):
        return "true" if f.value else "false"
    if isinstance(f, Not):
        return "not " + to_text(f.arg, top=False)
    s = f"{to_text(f.left, top=False)} {f.op} {to_text(f.right, top=False)}"
    return s if top else f"({s})"


def says(speaker: str, statement: Formula) -> Formula:
    """The constraint a speaker contributes: knight(S) <-> statement."""
    return Bin("<->", Atom(speaker, True), statement)


def speakers(f: Formula) -> list[str]:
    """Who ``f`` can be attributed to: the S of ``lit(S) <-> φ`` or ``φ <-> lit(S)``, where lit(S) is
    knight(S) or knave(S) under any number of ``not`` (left side first; [] if ``f`` is no such iff).
    The attribution only groups formulas by person; the formula itself is compared by truth table."""
    if not (isinstance(f, Bin) and f.op == "<->"):
        return []
    out: list[str] = []
    for side in (f.left, f.right):
        while isinstance(side, Not):
            side = side.arg
        if isinstance(side, Atom) and side.name not in out:
            out.append(side.name)
    return out


# ---- truth tables ----------------------------------------------------------------------------------
class TruthTable:
    """Truth tables over the 2^n assignments of ``people`` as Python-int bitsets."""

    def __init__(self, people: Sequence[str]):
        people = tuple(people)
        if len(set(people)) != len(people):
            raise ValueError("people must be distinct")
        if len(people) > MAX_PEOPLE:
            raise ValueError(f"at most {MAX_PEOPLE} people")
        self.people = people
        self.n = len(people)
        self.size = 1 << self.n
        self.full = (1 << self.size) - 1
        self.index = {p: i for i, p in enumerate(people)}
        self.atom: dict[str, int] = {}
        for i, p in enumerate(people):
            h = 1 << i  # run length of equal bits
            t, width = ((1 << h) - 1) << h, 2 * h  # h zeros then h ones, repeated by doubling:
            while width < self.size:  # shifts and ORs only (a big-int division took seconds at 20 people)
                t |= t << width
                width *= 2
            self.atom[p] = t

    def table(self, f: Formula) -> int:
        if isinstance(f, Atom):
            try:
                t = self.atom[f.name]
            except KeyError:
                raise ValueError(f"{f.name!r} is not one of the people ({', '.join(self.people)})") from None
            return t if f.knight else self.full ^ t
        if isinstance(f, Const):
            return self.full if f.value else 0
        if isinstance(f, Not):
            return self.full ^ self.table(f.arg)
        a, b = self.table(f.left), self.table(f.right)
        if f.op == "and":
            return a & b
        if f.op == "or":
            return a | b
        if f.op == "->":
            return (self.full ^ a) | b
        if f.op == "<->":
            return self.full ^ (a ^ b)
        raise ValueError(f"unknown connective {f.op!r}")

    def models(self, constraints: Iterable[Formula]) -> int:
        """Bitset of the assignments satisfying every constraint."""
        t = self.full
        for f in constraints:
            t &= self.table(f)
            if not t:
                break
        return t

    def code(self, assignment: dict[str, bool]) -> int:
        """The assignment index ``a`` of a complete assignment (raises on missing/extra people)."""
        extra = sorted(set(assignment) - set(self.people))
        missing = [p for p in self.people if p not in assignment]
        if extra:
            raise ValueError(f"assignment names unknown people: {', '.join(extra)}")
        if missing:
            raise ValueError(f"assignment leaves out: {', '.join(missing)}")
        return sum(1 << i for i, p in enumerate(self.people) if assignment[p])

    def decode(self, a: int) -> dict[str, bool]:
        return {p: bool((a >> i) & 1) for i, p in enumerate(self.people)}

    def solutions(self, constraints: Iterable[Formula]) -> list[dict[str, bool]]:
        t = self.models(constraints)
        out = []
        while t:
            low = t & -t
            out.append(self.decode(low.bit_length() - 1))
            t ^= low
        return out

    def satisfies(self, constraints: Iterable[Formula], assignment: dict[str, bool]) -> bool:
        return bool((self.models(constraints) >> self.code(assignment)) & 1)


def count_models(t: int) -> int:
    return bin(t).count("1")


def evaluate(f: Formula, assignment: dict[str, bool]) -> bool:
    """Direct recursive evaluation under one assignment (an independent oracle for tests)."""
    if isinstance(f, Atom):
        return assignment[f.name] if f.knight else not assignment[f.name]
    if isinstance(f, Const):
        return f.value
    if isinstance(f, Not):
        return not evaluate(f.arg, assignment)
    a, b = evaluate(f.left, assignment), evaluate(f.right, assignment)
    return {"and": a and b, "or": a or b, "->": (not a) or b, "<->": a == b}[f.op]


# ---- assignments (STRATEGY / ANSWER objects) -----------------------------------------------------------
# Linear-time by construction: the name/separator prefix is unambiguous and the role is the rest of
# the item, validated by one single-class pattern (no lazy group against ``\s*$``: that was quadratic).
_PAIR = re.compile(r"(?P<name>[A-Za-z][A-Za-z0-9_]*)\s*(?:=|:|-|\bis\b)(?P<role>.*)", re.IGNORECASE | re.DOTALL)
_ROLE = re.compile(r"[A-Za-z][A-Za-z \-]*")
_ARTICLE = re.compile(r"(?:an?|the)\s+")
_RESERVED_ROLE_WORDS = {"true", "false", "t", "f", "and", "is", "a", "an", "the", "not", "knight", "knave"}


def role_forms(word: str) -> set[str]:
    """The spellings of a role word an assignment may use: case-folded, plural, hyphen/space variants."""
    w = " ".join(word.lower().split())
    forms = {w, w + "s", w + "es"}
    if w.endswith("y"):
        forms.add(w[:-1] + "ies")
    return forms | {f.replace("-", "") for f in forms} | {f.replace("-", " ") for f in forms}


def role_vocabulary(truthful: str, lying: str, people: Iterable[str] = ()) -> dict[str, bool]:
    """The extra role words of a puzzle declaring ``(truthful, lying)`` (truthful ↔ knight, lying ↔
    knave), beyond :data:`ROLE_WORDS`. Raises ValueError when a word could be read two ways: the two
    roles share a spelling, a word is a built-in role word of the opposite side or a reserved word,
    or it spells a person's name."""
    out: dict[str, bool] = {}
    names_lower = {str(p).lower() for p in people}
    both = {}
    for word, value in ((truthful, True), (lying, False)):
        if not isinstance(word, str) or not _ROLE.fullmatch(word.strip()) or len(word) > 40:
            raise ValueError(f"role {word!r} must be a word of letters, spaces or hyphens (at most 40 characters)")
        if _ARTICLE.match(word.strip().lower()) or re.search(r"\band\b", word, re.IGNORECASE):
            raise ValueError(f"role {word!r} must not start with an article or contain 'and'")
        both[value] = role_forms(word)
    clash = both[True] & both[False]
    if clash:
        raise ValueError(f"the truthful and lying roles share the spelling {sorted(clash)[0]!r}")
    for value, forms in both.items():
        for f in forms:
            if ROLE_WORDS.get(f, value) != value:
                raise ValueError(f"role word {f!r} is the built-in word for the "
                                 f"{'lying' if value else 'truthful'} role")
            if f in names_lower:
                raise ValueError(f"role word {f!r} is also a person's name")
            if f in _RESERVED_ROLE_WORDS and ROLE_WORDS.get(f) is None:
                raise ValueError(f"role word {f!r} is reserved")
            if f not in ROLE_WORDS:
                out[f] = value
    return out


def parse_assignment(text: str, roles: dict[str, bool] | None = None) -> dict[str, bool]:
    """``A=knight, B=knave`` (also ``A: knave``, ``A is a liar``, any role pair of ROLE_PAIRS, the
    extra words ``roles`` (a :func:`role_vocabulary`), ``true``/``false``; separators ``,`` ``;``
    newlines ``and``). Raises ValueError."""
    body = text.strip().strip("{}[]().*`").strip()
    if not body:
        raise ValueError("empty assignment")
    parts = [p for p in re.split(r"[,;\n]|\band\b", body) if p.strip()]
    out: dict[str, bool] = {}
    for part in parts:
        item = part.strip().rstrip(".")
        m = _PAIR.fullmatch(item)
        if not m:
            raise ValueError(f"{item[:40]!r} is not of the form NAME=knight / NAME=knave")
        raw = m.group("role").strip()
        role = " ".join(raw.lower().split())
        article = _ARTICLE.match(role)
        role = role[article.end():] if article else role
        if role in ("true", "t", "1"):
            val = True
        elif role in ("false", "f", "0"):
            val = False
        elif _ROLE.fullmatch(role) and role in ROLE_WORDS:
            val = ROLE_WORDS[role]
        elif roles and role in roles:
            val = roles[role]
        else:
            raise ValueError(f"unknown role {raw[:40]!r} for {m.group('name')}")
        name = m.group("name")
        if name in out and out[name] != val:
            raise ValueError(f"{name} is given two different roles")
        out[name] = val
    return out


def format_assignment(assignment: dict[str, bool], people: Sequence[str] | None = None,
                      roles: tuple[str, str] = ("knight", "knave")) -> str:
    order = list(people) if people is not None else sorted(assignment)
    return ", ".join(f"{p}={roles[0] if assignment[p] else roles[1]}" for p in order if p in assignment)
