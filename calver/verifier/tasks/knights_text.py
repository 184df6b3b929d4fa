"""Candidate-local `knights_knaves`: the puzzle's statements read from its text.

The label firewall drops the formal ``data.statements`` of a problem marked ``meta["verification"] =
"candidate_local"`` (:func:`calver.infer.firewall.strip_problem`), as the paper's K&K study does: the
selector sees the puzzle as the policy does, as prose. The verifier must still earn every bit against the
puzzle, never against the trace's own claims (a trace that formalizes every speaker as ``knight(S) <-> true``
is determinate and self-consistent, and wrong). So it reads the prose itself: :func:`read_statements` is a
deterministic reader for the puzzle grammars the package ships (its own generator,
:mod:`calver.data_gen.knights`, and reasoning-gym's ``knights_knaves``, :mod:`calver.data_gen.reasoning_gym_kk`),
which turns each speaker's sentence into a formula. b1 then holds only when every CONSTRAINTS formula is
truth-table-equivalent to what its speaker said, exactly as on a grounded problem, and b3/b5 run on the
text's truth table.

It fails closed: a text with a sentence the reader cannot parse (a quote, or a person's name, in a sentence
that is neither a statement in a known template nor the known list of people / answer-format hint) raises
:class:`PuzzleTextError`, and the family then fails b1 with that reason (and b3/b5, which have nothing to
check against). ``calver data kk --verification candidate_local`` checks that the reader reproduces every
generated puzzle's statements (truth-table-equivalent, per speaker) before writing it.
"""

from __future__ import annotations

import re
from typing import Callable, Iterable

from calver.verifier.logic import Atom, Bin, Formula, Not, says
from calver.verifier.problem import Problem, ProblemError

# meta["verification"] of a K&K problem: the firewall keeps (grounded) or drops (candidate_local) its statements
VERIFICATION_MODES: tuple[str, ...] = ("grounded", "candidate_local")
MAX_TEXT = 20_000  # characters of puzzle text the reader reads (a 20-person puzzle is ~3,000)


class PuzzleTextError(ValueError):
    """The puzzle text is not in a grammar the reader knows: b1 fails closed with this reason."""


def problem_speakers(problem: Problem, people: tuple[str, ...]) -> tuple[str, ...] | None:
    """``data.speakers`` (validated, in the order of ``people``), or None when absent."""
    declared = problem.data.get("speakers")
    if declared is None:
        return None
    if not isinstance(declared, (list, tuple)) or not all(isinstance(s, str) for s in declared):
        raise ProblemError("data field 'speakers' must be a list of people")
    unknown = [s for s in declared if s not in people]
    if unknown:
        raise ProblemError(f"data field 'speakers': {unknown[0][:40]!r} is not one of the people")
    if len(set(declared)) != len(declared):
        raise ProblemError("data field 'speakers' lists a person twice")
    return tuple(p for p in people if p in declared)


# ---- where a statement is: the speech templates of the supported generators ---------------------------------
_CALVER_VERBS = ("says", "claims", "states", "tells you", "insists", "declares")  # data_gen/knights.py
_SPEECH = (
    *(f'{{name}} {v}: "{{content}}"' for v in _CALVER_VERBS),
    # reasoning-gym 0.1.25, logic/knights_knaves.py TEMPLATES
    "{name} said that {content}.", "{name} told you that {content}.", '{name} said, "{content}."',
    '{name} stated, "{content}".', 'According to {name}, "{content}".', "In {name}'s words: \"{content}\".",
    '{name} remarked, "{content}".', '"{content}," {name} declared.', '{name} was heard saying, "{content}".',
    "{name} expressed that {content}.", '"{content}" - {name}.', 'As {name} put it, "{content}".',
    '{name} asserted: "{content}".', '"{content}," {name} mentioned.', '{name} commented, "{content}".',
    'In a statement by {name}: "{content}".', '{name} noted, "{content}".', '"{content}," {name} claimed.',
)
# sentences that name people or quote without being a statement
_PEOPLE_LIST = re.compile(r"You meet (\d+) inhabitants?: (.*)\.")
_FORMAT_HINT = re.compile(r'\(Format your answer like: "[^"]*"\)')
# sentence boundary: whitespace after . ? ! (optionally closed by a quote or a parenthesis), or a line break
_SENTENCE_END = re.compile(r'(?:(?<=[.?!])|(?<=[.?!]["\)]))[ \t]+|\s*\n\s*')


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(text) if s.strip()]


def _speech_patterns(people: Iterable[str]) -> list[re.Pattern[str]]:
    names = "|".join(re.escape(p) for p in sorted(people, key=len, reverse=True))
    out = []
    for t in _SPEECH:
        rx = re.escape(t).replace(r"\{name\}", f"(?P<name>{names})").replace(r"\{content\}", '(?P<content>[^"]+?)')
        out.append(re.compile(rx))
    return out


# ---- what a statement says: literals, then a small phrase grammar over them ----------------------------------
def _plurals(word: str) -> set[str]:
    return {word + "s", word + "es"}


def _literal_pattern(people: Iterable[str], truthful: str, lying: str) -> re.Pattern[str]:
    names = "|".join(re.escape(p) for p in sorted(people, key=len, reverse=True))
    singular = "|".join(re.escape(w) for w in sorted({truthful, lying}, key=len, reverse=True))
    plural = "|".join(re.escape(w) for w in sorted(_plurals(truthful) | _plurals(lying), key=len, reverse=True))
    return re.compile(
        rf"(?<![\w-])(?:(?P<me>I) am|(?P<name>{names}) is) (?P<neg>not )?"
        rf"(?:an? (?P<role>{singular})|one of the (?P<roles>{plural}))(?![\w-])")


_SKELETON_TOKEN = re.compile(r"\s*(?:(?P<lit>\x00\d+\x00)|(?P<word>[a-z]+)|(?P<punct>[(),:]))")

# (prefix, separator, suffix) of a two-operand phrase -> its formula
_BINARY: dict[tuple[str, str, str], Callable[[Formula, Formula], Formula]] = {
    ("", "and", ""): lambda a, b: Bin("and", a, b),
    ("both", "and", ""): lambda a, b: Bin("and", a, b),
    ("", "or", ""): lambda a, b: Bin("or", a, b),
    ("at least one of these is true :", ", or", ""): lambda a, b: Bin("or", a, b),
    ("", "or", "( or both )"): lambda a, b: Bin("or", a, b),
    ("if", ", then", ""): lambda a, b: Bin("->", a, b),
    ("if", "then", ""): lambda a, b: Bin("->", a, b),
    ("", "if", ""): lambda a, b: Bin("->", b, a),
    ("", "only if", ""): lambda a, b: Bin("->", a, b),
    ("", "if and only if", ""): lambda a, b: Bin("<->", a, b),
    ("", "exactly when", ""): lambda a, b: Bin("<->", a, b),
    ("neither is it true that", "nor that", ""): lambda a, b: Not(Bin("or", a, b)),
    ("it is false that", ", and it is also false that", ""): lambda a, b: Not(Bin("or", a, b)),
    ("it is not the case that both", "and", ""): lambda a, b: Not(Bin("and", a, b)),
    ("", "and", "are not both true"): lambda a, b: Not(Bin("and", a, b)),
}
_NEGATION = "it is not the case that"
MAX_PHRASE_DEPTH = 8


def _tokens(skeleton: str) -> list[str | int]:
    out: list[str | int] = []
    pos = 0
    while pos < len(skeleton):
        m = _SKELETON_TOKEN.match(skeleton, pos)
        if m is None:
            rest = skeleton[pos:].strip()
            if not rest:
                break
            raise PuzzleTextError(f"unexpected text {rest[:30]!r}")
        if m.group("lit"):
            out.append(int(m.group("lit").strip("\x00")))
        else:
            out.append(m.group("word") or m.group("punct"))
        pos = m.end()
    return out


def _phrase(tokens: list[str | int], lits: list[Formula], depth: int = 0) -> Formula:
    """One phrase of literal placeholders (ints) and connective words as a formula; PuzzleTextError if its
    shape is not one the grammar knows. An operand is a literal or a parenthesised phrase holding one."""
    if depth > MAX_PHRASE_DEPTH:
        raise PuzzleTextError("the statement nests too deeply")
    operands: list[Formula] = []
    words: list[list[str]] = [[]]
    i = 0
    while i < len(tokens):
        t = tokens[i]
        if isinstance(t, int):
            operands.append(lits[t])
            words.append([])
            i += 1
        elif t == "(":
            level, j = 0, i
            while j < len(tokens):
                level += tokens[j] == "("
                level -= tokens[j] == ")"
                if level == 0:
                    break
                j += 1
            if j == len(tokens):
                raise PuzzleTextError("unbalanced parentheses")
            inner = tokens[i + 1:j]
            if any(isinstance(x, int) for x in inner):
                operands.append(_phrase(inner, lits, depth + 1))
                words.append([])
            else:
                words[-1].extend(str(x) for x in tokens[i:j + 1])
            i = j + 1
        elif t == ")":
            raise PuzzleTextError("unbalanced parentheses")
        else:
            words[-1].append(str(t))
            i += 1
    joined = [" ".join(w) for w in words]
    if len(operands) == 1:
        if joined == ["", ""]:
            return operands[0]
        if joined == [_NEGATION, ""]:
            return Not(operands[0])
    elif len(operands) == 2:
        build = _BINARY.get((joined[0], joined[1], joined[2]))
        if build is not None:
            return build(operands[0], operands[1])
    elif len(operands) > 2 and joined[0] == joined[-1] == "" and len(set(joined[1:-1])) == 1 \
            and joined[1] in ("and", "or"):
        out = operands[0]
        for f in operands[1:]:
            out = Bin(joined[1], out, f)
        return out
    shape = " ".join(w if w else "·" for w in _interleave(joined))
    raise PuzzleTextError(f"a statement of the shape {shape[:80]!r} is not in the reader's grammar")


def _interleave(joined: list[str]) -> list[str]:
    out: list[str] = []
    for k, w in enumerate(joined):
        if w:
            out.append(w)
        if k < len(joined) - 1:
            out.append("<literal>")
    return out


def read_statement(content: str, speaker: str, people: Iterable[str], truthful: str, lying: str) -> Formula:
    """One speaker's sentence (the quoted part) as a formula over the people; PuzzleTextError if unreadable."""
    text = " ".join(content.split()).rstrip(".").strip()
    if not text:
        raise PuzzleTextError(f"{speaker}'s statement is empty")
    lits: list[Formula] = []

    def lit(m: re.Match[str]) -> str:
        who = speaker if m.group("me") else m.group("name")
        word = m.group("role") or m.group("roles")
        knight = word == truthful or word in _plurals(truthful)
        f: Formula = Atom(who, knight)
        lits.append(Not(f) if m.group("neg") else f)
        return f" \x00{len(lits) - 1}\x00 "

    skeleton = _literal_pattern(people, truthful, lying).sub(lit, text)
    if not lits:
        raise PuzzleTextError(f"{speaker}'s statement {text[:60]!r} names no one's role")
    try:
        return _phrase(_tokens(skeleton.lower()), lits)
    except PuzzleTextError as e:
        raise PuzzleTextError(f"{speaker}'s statement {text[:60]!r}: {e}") from None


def read_statements(text: str | None, people: tuple[str, ...], truthful: str = "knight",
                    lying: str = "knave") -> dict[str, list[Formula]]:
    """Each speaker's statements (formulas, in text order) read from the puzzle ``text``.

    Raises :class:`PuzzleTextError` when the text is missing or holds a sentence that names a person or
    quotes speech but is neither a statement in a known template nor the list of people / the answer
    format hint, or when a statement is outside the phrase grammar. Nobody speaking is an error too."""
    if not isinstance(text, str) or not text.strip():
        raise PuzzleTextError("the problem has no puzzle text to read the statements from")
    if len(text) > MAX_TEXT:
        raise PuzzleTextError(f"the puzzle text is longer than {MAX_TEXT} characters")
    name_rx = re.compile(r"(?<![\w-])(?:" + "|".join(re.escape(p) for p in people) + r")(?![\w-])")
    patterns = _speech_patterns(people)
    out: dict[str, list[Formula]] = {}
    for sentence in _sentences(text):
        m = next((m for rx in patterns if (m := rx.fullmatch(sentence))), None)
        if m is not None:
            who = m.group("name")
            out.setdefault(who, []).append(read_statement(m.group("content"), who, people, truthful, lying))
            continue
        if _FORMAT_HINT.fullmatch(sentence):
            continue
        listed = _PEOPLE_LIST.fullmatch(sentence)
        if listed is not None:
            named = [w for w in re.split(r",\s*(?:and\s+)?|\s+and\s+", listed.group(2)) if w]
            if sorted(named) != sorted(people) or int(listed.group(1)) != len(people):
                raise PuzzleTextError(f"the sentence {sentence[:60]!r} lists other people than the puzzle's")
            continue
        if name_rx.search(sentence) or '"' in sentence:
            raise PuzzleTextError(f"the reader cannot parse the sentence {sentence[:80]!r}")
    if not out:
        raise PuzzleTextError("the puzzle text holds no statement the reader can parse")
    return out


def text_statements(problem: Problem, people: tuple[str, ...]) -> dict[str, list[Formula]]:
    """Each speaker's constraints ``knight(S) <-> φ`` read from the puzzle text (:mod:`.knights_text`);
    PuzzleTextError when the text cannot be read or names other speakers than ``data.speakers``."""
    truthful, lying = problem.data.get("roles") or ("knight", "knave")
    stmts = read_statements(problem.text, people, truthful, lying)
    declared = problem_speakers(problem, people)
    if declared is not None and set(stmts) != set(declared):
        raise PuzzleTextError("the speakers in the puzzle text differ from data field 'speakers'")
    return {s: [says(s, f) for f in fs] for s, fs in stmts.items()}
