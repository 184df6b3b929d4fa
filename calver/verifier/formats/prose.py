"""Prose: "A causes B, C and D. B and C share a hidden common cause."

Sentence-level phrases (causes/affects/leads to/is caused by/share a hidden common cause/are
confounded/there is an edge from A to B/the variables are ...); unrecognised sentences are ignored;
nothing recognised at all is an error.  A lone capital letter (``A``, ``I``) is a name.  With
declared ``nodes``, relations naming unknown nodes are ignored as filler and multi-word declared
names are recognised.
"""

from __future__ import annotations

import re
from itertools import accumulate, combinations

from calver.verifier.formats.common import MAX_EDGES, ParseError, RenderOrder, order_of
from calver.verifier.graph import CausalGraph, GraphError
from calver.verifier.memo import memoized

_STOP = frozenset("""a an the it its this that these those which who whom what there they them he she we
you i not never no cannot can't doesn't don't didn't won't does do did may might could would should will
can must also directly indirectly only still longer often both either neither each every all some any is
are was were be been being has have had of to from by in on at for with as or and but if then than so
node nodes variable variables vertex vertices common hidden latent edge edges graph model""".split())
_FILLER = frozenset("the a an node nodes variable variables vertex both".split())
_ADJ = r"(?:hidden|latent|unobserved|unmeasured|unobservable|common|shared)"
_PHRASES = re.compile(r"(?<![^ ])(?:" + "|".join(f"(?P<{name}>{pat})" for name, pat in (
    ("decl", r"(?:variables|nodes|vertices)(?: (?:in|of) (?:the|this) (?:graph|model|system|dag|admg))?"
             r"(?: (?:are|include|includes))?(?: :)?"),
    ("frm", r"(?:an? |the )?(?:directed )?(?:edge|arrow|arc|link) (?:going )?from"),
    ("btw", r"an? (?:(?:bi-?directed|bidirectional) (?:edge|arrow|arc|link)|(?:common )?confounder"
            r"|(?:(?:hidden|latent|unobserved|unmeasured|unobservable) )+(?:common )?"
            r"(?:causes?|confounders?|variables?|parents?|confounding))"
            r" (?:between|of|affecting|influencing|for|behind)"
            r"|(?:hidden |latent |unobserved )?confounding (?:between|of)"),
    ("biw", r"(?:is|are) (?:hidden |latently )?confounded with|(?:share|shares|has|have) an? (?:" + _ADJ + r" ){0,3}"
            r"(?:causes?|confounders?|parents?) with"
            r"|(?:has|have) an? (?:bi-?directed|bidirectional) (?:edge|arrow|arc|link) (?:to|with)"),
    ("bi", r"(?:share|shares|have|has) an? (?:" + _ADJ + r" ){0,3}(?:causes?|confounders?|parents?|confounding)"
           r"|(?:are|is) (?:(?:hidden |latently )?confounded"
           r"|(?:connected|linked|joined) by an? (?:bi-?directed|bidirectional) (?:edge|arrow|arc|link))"
           r"|(?:have|has) an? (?:bi-?directed|bidirectional) (?:edge|arrow|arc|link)(?: between them)?"),
    ("rev", r"(?:is|are) (?:directly |causally )?(?:caused|affected|influenced|determined|driven|produced|impacted) by"
            r"|(?:is|are) (?:a |an |the )?(?:direct )?(?:child|children|effects?|consequences?|results?|outcomes?) of"
            r"|depends? (?:directly |causally )?on|(?:has|have) (?:the )?(?:direct )?(?:parents?|causes?)"),
    ("fwd", r"(?:directly |also |causally )?(?:causes|cause|affects|affect|influences|influence|determines|determine"
            r"|drives|drive|produces|produce|impacts|impact|leads to|lead to|results in|result in|points to|point to"
            r"|(?:has|have) an? (?:direct )?(?:causal )?(?:effect|influence|impact) (?:on|upon)"
            r"|(?:has|have) an? (?:directed )?(?:edge|arrow|arc|link) (?:pointing )?(?:to|into)"
            r"|(?:is|are) (?:a |an |the )?(?:common )?(?:direct )?(?:causes?|parents?) of)"),
)) + r")(?![^ ])")
_PROSE_TOK = r"(?P<q>\"[^\"\n]{1,200}\"|“[^”\n]{1,200}”)|(?P<w>\w+(?:['’-]\w+)*)|(?P<p>[,:])|(?P<s>[.!?;\n]+)"


# a compiled alternation of the declared names costs ~100 bytes per character of them
@memoized("prose lexer", lambda known: 4096 + 100 * sum(map(len, known)))
def _prose_lexer(known: tuple[str, ...]):
    multi = sorted((n for n in known if not re.fullmatch(r"\w+", n)), key=len, reverse=True)
    alt = "|".join(map(re.escape, multi))
    return re.compile((rf"(?P<k>(?<!\w)(?:{alt})(?!\w))|" if alt else "") + _PROSE_TOK)


def parse(text: str, hint=None):
    known = set(hint) if hint else None
    nodes: list[str] = []
    d: list[tuple[str, str]] = []
    b: list[tuple[str, str]] = []
    sent: list[tuple[str, str]] = []
    if len(text) > 500_000:
        raise ParseError("prose longer than 500000 characters")
    # Honest prose spends at least ~4 characters per edge ("A causes B, C, D"): a list-times-list
    # sentence that yields more edges than that is refused before it is built (linear cost).
    budget = min(MAX_EDGES, len(text) // 4 + 32)
    for m in _prose_lexer(tuple(hint or ())).finditer(text + "\n"):
        k, v = m.lastgroup, m.group()
        if k != "s":
            sent.append((k, v[1:-1] if k == "q" else v))  # strip only the quote pair: 'a"' stays 'a"'
            continue
        _prose_sentence(sent, known, nodes, d, b, budget)
        sent = []
    if not nodes:
        raise ParseError("no causal relation or node declaration recognised in prose")
    return nodes, d, b, None


def _prose_sentence(toks, known, nodes, d, b, budget=MAX_EDGES):
    low = [v.lower() if k in ("w", "p") else "\x00" for k, v in toks]
    joined = " ".join(low)
    index = {p: i for i, p in enumerate(accumulate((len(w) + 1 for w in low[:-1]), initial=0))}
    matches = [(m.lastgroup, index[m.start()], index[m.start()] + m.group().count(" ") + 1)
               for m in _PHRASES.finditer(joined) if m.start() in index]
    phrase_at = {i for _, i, _ in matches}

    def is_name(i):
        if not 0 <= i < len(toks):
            return False
        k, v = toks[i]
        return k in ("q", "k") or (k == "w" and ((len(v) == 1 and v.isupper()) or v.lower() not in _STOP))

    def fwd_list(j):  # -> (names, index of the next unread token, index after the last name)
        out, end = [], j
        while True:
            while j < len(toks) and toks[j][0] == "w" and toks[j][1].lower() in _FILLER and not (
                    len(toks[j][1]) == 1 and toks[j][1].isupper()):
                j += 1
            if not is_name(j) or (out and j + 1 in phrase_at):
                return out, j, end
            out.append(toks[j][1])
            end = k = j + 1
            if k < len(low) and low[k] == ",":
                k += 1
            if k < len(low) and low[k] == "and":
                k += 1
            if k == j + 1:
                return out, k, end
            j = k

    def back_list(i, floor):
        out = []
        while i >= floor and is_name(i):
            out.append(toks[i][1])
            k = i - 1
            if k >= 0 and low[k] == "and":
                k -= 1
            if k >= 0 and low[k] == ",":
                k -= 1
            if k == i - 1:
                break
            i = k
        return out[::-1]

    last_obj, floor = None, 0
    for kind, i, j in matches:
        i0 = i - 1
        while i0 > floor and low[i0] in ("both", "also", "each", "jointly", "together", "all"):
            i0 -= 1
        subs = back_list(i0, floor)
        if not subs and i > 0 and low[i - 1] in ("which", "that", "who") and last_obj:
            subs = [last_obj]
        if kind == "frm":
            src, j2, _ = fwd_list(j)
            if len(src) != 1 or j2 >= len(low) or low[j2] != "to":
                continue
            subs, kind, j = src, "fwd", j2 + 1
        objs, _, end = fwd_list(j) if kind != "bi" else ([], 0, j)
        floor = max(floor, end) if kind != "decl" else floor
        # size the relation before building it: a list-times-list sentence is quadratic (audit B3)
        group = len(subs if kind == "bi" else objs)
        n = {"decl": group, "fwd": len(subs) * group, "rev": len(subs) * group, "biw": len(subs) * group}.get(
            kind, group * (group - 1) // 2)
        if n + len(d) + len(b) > budget:
            raise ParseError(f"too many edges in prose (more than {budget}: one per four characters of text)"
                             if budget < MAX_EDGES else "too many edges in prose")
        if kind == "decl":
            pairs = [(o, o, "n") for o in objs]
        elif kind in ("fwd", "rev"):
            pairs = [(s, o, kind) for s in subs for o in objs]
        elif kind == "biw":
            pairs = [(s, o, "bi") for s in subs for o in objs]
        else:
            pairs = [(x, y, "bi") for x, y in combinations(subs if kind == "bi" else objs, 2)]
        for s, o, t in pairs:
            if known is not None and (s not in known or o not in known):
                continue
            nodes.extend((s, o) if s != o else (s,))
            if t == "fwd":
                d.append((s, o))
            elif t == "rev":
                d.append((o, s))
            elif t == "bi" and s != o:
                b.append((s, o))
        if objs:
            last_obj = objs[-1]


# A bare prose name must not read as part of a causal phrase ("Causally causes B" would lose the
# edge): every word of the phrase grammar, with and without a plural s, plus the list-skip words.
_PHRASE_WORDS = frozenset(w for x in re.findall(r"[a-z]+", _PHRASES.pattern) for w in (x, x.rstrip("s"))) | {
    "jointly", "together"}


def is_phrase_word(word: str) -> bool:
    """Whether ``word`` (any case) can be part of a prose phrase: a text without such bare words is not prose."""
    return word.lower() in _PHRASE_WORDS


def _name(n: str) -> str:
    if re.fullmatch(r"\w+", n) and ((len(n) == 1 and n.isupper()) or (
            n.lower() not in _STOP and n.lower() not in _PHRASE_WORDS and not _PHRASES.search(n.lower()))):
        return n
    if "\n" not in n and len(n) <= 200:  # the lexer reads "..." and “...” only, up to 200 chars
        if '"' not in n:
            return f'"{n}"'
        if "”" not in n:
            return f"“{n}”"
    raise GraphError(f"node name {n[:60]!r} cannot be rendered as prose "
                     "(newline, over 200 characters, or both \" and ”)")


def render(g: CausalGraph, order: RenderOrder | None = None) -> str:
    o = order_of(g, order)
    names = [_name(n) for n in o.nodes]
    sents = [f"The variables are {', '.join(names[:-1]) + ' and ' if names[:-1] else ''}{names[-1]}."]
    sents += [f"{_name(a)} causes {_name(c)}." for a, c in o.directed]
    sents += [f"{_name(a)} and {_name(c)} share a hidden common cause." for a, c in o.bidirected]
    return " ".join(sents)
