"""``calver fit-report``: which trace line a policy has not learned, read off teacher-forced loss.

A sampled trace mixes its errors: one wrong lookup makes STRATEGY, RESULT and ANSWER wrong too. Teacher forcing
scores each line of an SFT row's trace given the row's own lines before it, so a line that only copies what
came before scores near 100% and a line the policy cannot compute stands out. For each set of rows (``--rows
NAME=FILE[:N]``, a `calver gen` sft.jsonl) it reports per trace line, overall and per task family: the lines
whose every token is the model's greedy next token (exact), the token accuracy and the mean token loss. A
rule rationale line (``--rationale rule``) is split at its lookups: ``Lookup`` is the edges each ``Edges into
L:`` reads off the graph (`` K -> L.``), ``Rationale`` the rule's words around them, headers included.
Training rows beside held-out rows tell underfitting (both low) from a policy that memorised its rows
(training high, held-out low). It reads the rows' traces, which hold the answers, like ``calver eval``.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

from calver.config import ConfigError, add_command, cfg_field, parse_command

SLOTS = ("GRAPH", "QUERY", "Rationale", "Lookup", "STRATEGY", "DERIVATION", "RESULT", "ANSWER")
_LINE = re.compile(r"^(GRAPH|QUERY|Rule|STRATEGY|DERIVATION|RESULT|ANSWER):")


def trace_lines(text: str) -> list[tuple[str, int, int]]:
    """``(line, start, end)`` character spans of a trace's lines (see the module doc for the names); a rule line
    with several lookups gives several ``Rationale`` and ``Lookup`` spans, in order."""
    from calver.data_gen.rationales import LOOKUP_RE

    spans, pos = [], 0
    for line in text.split("\n"):
        m = _LINE.match(line)
        if m and m.group(1) == "Rule":
            at = 0
            for look in LOOKUP_RE.finditer(line):  # the edges listed, with the space before and the period after
                a, b = look.start(4) - 1, look.end(4) + 1
                spans += [("Rationale", pos + at, pos + a), ("Lookup", pos + a, pos + b)]
                at = b
            if at < len(line):  # words after the last lookup, or a rule that reads nothing off the graph
                spans.append(("Rationale", pos + at, pos + len(line)))
        elif m:
            spans.append((m.group(1), pos, pos + len(line)))
        pos += len(line) + 1
    return spans


def line_tokens(tokenizer, messages: Sequence[dict]) -> tuple[list[int], dict[str, list[int]]]:
    """The chat's token ids and, per trace line of its last (assistant) turn, the positions of that line's tokens
    (a token belongs to the line its first character falls in)."""
    if not messages or messages[-1].get("role") != "assistant":
        raise ValueError("an SFT row's last message must be the assistant's trace")
    prompt = tokenizer.apply_chat_template(list(messages[:-1]), add_generation_prompt=True, tokenize=False)
    full = tokenizer.apply_chat_template(list(messages), tokenize=False)
    content = messages[-1]["content"]
    start = full.find(content, max(0, len(prompt) - 1))
    if start < 0:
        raise ValueError("the chat template does not write the assistant's trace verbatim")
    enc = tokenizer(full, return_offsets_mapping=True, add_special_tokens=False)
    ids, offsets = enc["input_ids"], enc["offset_mapping"]
    lines: dict[str, list[int]] = {}
    for name, a, b in trace_lines(content):
        at = [i for i, (s, e) in enumerate(offsets) if e > s and start + a <= s < start + b]
        if at:
            lines.setdefault(name, []).extend(at)
    return ids, lines


@dataclass(frozen=True)
class LineFit:
    """One trace line over a set of rows."""

    lines: int
    tokens: int
    exact: float  # share of lines whose every token is the greedy next token
    token_accuracy: float
    loss: float  # mean token cross-entropy (nats)


@dataclass(frozen=True)
class SetFit:
    """A set of rows, teacher-forced: ``lines``, per line and per ``task/LINE``; ``rows``, each row's lines
    (by row id: line -> 1 when written exactly, else 0), what ``calver fit-compare`` pairs; ``tasks``, each
    row's task family."""

    lines: dict[str, LineFit]
    rows: dict[str, dict[str, int]]
    tasks: dict[str, str]


def row_id(row: dict, index: int) -> str:
    """A row's id (its ``id``; ``#index`` for a row without one)."""
    return str(row.get("id") or f"#{index}")


def fit_set(model, tokenizer, rows: Sequence[dict]) -> SetFit:
    """Per trace line (``LINE``) and per task family and line (``task/LINE``) over ``rows``, and each row's
    exact lines."""
    import torch

    tally: dict[str, list[float]] = {}  # key -> [lines, tokens, exact lines, right tokens, loss sum]
    per_row: dict[str, dict[str, int]] = {}
    tasks: dict[str, str] = {}
    for index, row in enumerate(rows):
        try:
            ids, lines = line_tokens(tokenizer, row["messages"])
        except ValueError as e:
            raise ValueError(f"row {row.get('id', '?')!r}: {e}") from e
        x = torch.tensor([ids])
        with torch.no_grad():
            logits = model(x).logits[0, :-1].float()
        target = x[0, 1:]
        loss = torch.nn.functional.cross_entropy(logits, target, reduction="none")
        right = logits.argmax(-1) == target
        exact_lines = per_row.setdefault(row_id(row, index), {})
        tasks[row_id(row, index)] = str(row.get("task", "?"))
        for name, at in lines.items():
            pos = torch.tensor([i - 1 for i in at if i > 0])  # token i is predicted at position i - 1
            if not len(pos):
                continue
            exact_lines[name] = int(bool(right[pos].all()))
            for key in (name, f"{row.get('task', '?')}/{name}"):
                t = tally.setdefault(key, [0, 0, 0, 0, 0.0])
                t[0] += 1
                t[1] += len(pos)
                t[2] += exact_lines[name]
                t[3] += int(right[pos].sum())
                t[4] += float(loss[pos].sum())
    fits = {k: LineFit(int(n), int(tok), ex / n, ok / tok, ls / tok) for k, (n, tok, ex, ok, ls) in tally.items()}
    return SetFit(fits, per_row, tasks)


def fit_rows(model, tokenizer, rows: Sequence[dict]) -> dict[str, LineFit]:
    """Per trace line (``LINE``) and per task family and line (``task/LINE``) over ``rows``."""
    return fit_set(model, tokenizer, rows).lines


def load_rows(path: str | Path, limit: int | None) -> list[dict]:
    """The trace rows of a `calver gen` sft.jsonl (drill rows left out), ``limit`` of them spread evenly over
    the file so that every family is in a sample of a file written family by family."""
    rows = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                messages, task = row["messages"], str(row.get("task", ""))
            except (json.JSONDecodeError, KeyError, TypeError) as e:
                raise ValueError(f"{path}:{n}: not an SFT row with 'messages' ({e})") from e
            if not isinstance(messages, list) or not task or task.endswith("_drill"):
                continue
            rows.append(row)
    if limit and len(rows) > limit:
        rows = rows[:: len(rows) // limit][:limit]
    return rows


@dataclass
class FitReportConfig:
    """``calver fit-report --model DIR --rows NAME=FILE[:N] ...``: per trace line, teacher-forced, the share of
    lines the model writes exactly, its token accuracy and loss, e.g. on training rows beside held-out rows."""

    model: str = cfg_field(help="model directory (a calver train sft output, or any causal LM with a chat template)")
    rows: list[str] = cfg_field(help="NAME=FILE[:N], repeatable: SFT rows (calver gen's sft.jsonl), N of them spread "
                                     "over the file (default: max_rows)")
    max_rows: int = cfg_field(300, help="rows per set when FILE names no N")
    out: str | None = cfg_field(None, help="write fit.md and fit.json here (default: print only)")

    def __post_init__(self) -> None:
        if not self.rows:
            raise ConfigError("field 'rows' is required: pass --rows NAME=FILE[:N]")
        _ = self.sets  # a malformed item raises here, before any model loads
        if not isinstance(self.max_rows, int) or isinstance(self.max_rows, bool) or self.max_rows < 1:
            raise ConfigError(f"field 'max_rows' must be a whole number >= 1, got {self.max_rows!r}")

    @property
    def sets(self) -> dict[str, tuple[str, int]]:
        """``rows`` as name -> (file, number of rows)."""
        out: dict[str, tuple[str, int]] = {}
        for item in self.rows:
            name, sep, spec = item.partition("=")
            path, colon, n = spec.rpartition(":") if re.search(r":\d+$", spec) else (spec, "", "")
            if not sep or not name or not path:
                raise ConfigError(f"field 'rows' takes NAME=FILE[:N], got {item!r}")
            if name in out:
                raise ConfigError(f"field 'rows' names {name!r} twice")
            out[name] = (path, int(n) if colon else self.max_rows)
        return out


def markdown(fits: dict[str, dict[str, LineFit]]) -> str:
    names = list(fits)
    head = "| line | " + " | ".join(f"{n}: exact / token acc. / loss" for n in names) + " |"
    out = [head, "|---|" + "---|" * len(names)]
    for slot in SLOTS:
        cells = [f"{f[slot].exact:.1%} / {f[slot].token_accuracy:.1%} / {f[slot].loss:.3f} (n={f[slot].lines})"
                 if slot in f else "–" for f in fits.values()]
        if any(c != "–" for c in cells):
            out.append(f"| {slot} | " + " | ".join(cells) + " |")
    tasks = sorted({k.split("/")[0] for f in fits.values() for k in f if "/" in k})
    out += ["", "Lines written exactly, per task family (%):", "",
            "| task | line | " + " | ".join(names) + " |", "|---|---|" + "---|" * len(names)]
    for task in tasks:
        for slot in ("Rationale", "Lookup", "STRATEGY"):
            key = f"{task}/{slot}"
            if any(key in f for f in fits.values()):
                cells = [f"{f[key].exact:.1%} (n={f[key].lines})" if key in f else "–" for f in fits.values()]
                out.append(f"| {task} | {slot} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def run_fit(cfg: FitReportConfig) -> dict[str, SetFit]:
    sets = {name: load_rows(path, n) for name, (path, n) in cfg.sets.items()}
    for name, rows in sets.items():
        if not rows:
            raise ValueError(f"rows {name!r}: no trace rows in {cfg.sets[name][0]}")
    try:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as e:
        raise ValueError(f"fit-report runs a model: install the train extra (torch, transformers): {e}") from e
    tokenizer = AutoTokenizer.from_pretrained(cfg.model)
    if not tokenizer.is_fast:
        raise ValueError(f"{cfg.model}: fit-report needs a fast tokenizer (token offsets)")
    model = AutoModelForCausalLM.from_pretrained(cfg.model, dtype=torch.float32).eval()
    return {name: fit_set(model, tokenizer, rows) for name, rows in sets.items()}


def _cli(args) -> int:
    cfg = parse_command("fit-report", FitReportConfig, args)
    if cfg is None:
        return 2
    try:
        fits = run_fit(cfg)
    except (ValueError, OSError) as e:
        print(f"calver fit-report: error: {e}", file=sys.stderr)
        return 2
    md = markdown({n: f.lines for n, f in fits.items()})
    print(md)
    if cfg.out:
        data: dict[str, Any] = {"model": cfg.model, "rows": cfg.sets,
                                "fits": {n: {k: asdict(v) for k, v in f.lines.items()} for n, f in fits.items()},
                                "per_row": {n: {"tasks": f.tasks, "exact": f.rows} for n, f in fits.items()}}
        try:
            out = Path(cfg.out)
            out.mkdir(parents=True, exist_ok=True)
            (out / "fit.md").write_text(md)
            (out / "fit.json").write_text(json.dumps(data, indent=2))
        except OSError as e:  # the table is printed above, so the run is not lost
            print(f"calver fit-report: error: cannot write {cfg.out}: {e}", file=sys.stderr)
            return 2
    return 0


@dataclass
class FitCompareConfig:
    """``calver fit-compare --a DIR --b DIR [--out FILE]``: two fit reports paired over the rows both scored (by
    row id and set name, rows of the same task family): per line and per ``task/LINE``, the share written exactly
    by each, and b − a with a bootstrap interval over rows. The rows may be written in two styles (the same
    problems as two mixes write them): the pairing is by problem."""

    a: str = cfg_field(help="a `calver fit-report --out` folder (or its fit.json)")
    b: str = cfg_field(help="another, on rows with the same ids")
    out: str | None = cfg_field(None, help="write the comparison as JSON here (default: print only)")


def read_fit(path: str | Path) -> dict[str, Any]:
    """A fit report's JSON (a folder: its fit.json); ValueError when it does not read or holds no per-row
    outcomes (a report written before they were recorded)."""
    p = Path(path)
    p = p / "fit.json" if p.is_dir() else p
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ValueError(f"{p}: not a fit report ({e})") from e
    if not isinstance(data, dict) or not isinstance(data.get("per_row"), dict):
        raise ValueError(f"{p}: no per-row outcomes: rerun `calver fit-report --out` on it")
    for name, got in data["per_row"].items():
        exact = got.get("exact") if isinstance(got, dict) else None
        tasks = got.get("tasks") if isinstance(got, dict) else None
        if not isinstance(exact, dict) or not isinstance(tasks, dict) or not all(
                isinstance(lines, dict) and all(v in (0, 1) for v in lines.values()) for lines in exact.values()):
            raise ValueError(f"{p}: per_row[{name!r}] is not {{'tasks': {{id: task}}, 'exact': {{id: {{line: 0|1}}}}}}")
    return data


def compare_fits(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Per set both reports name: the rows both scored, and per line (and ``task/LINE``) over the rows holding
    it in both: each report's exact share and b − a with a clustered bootstrap interval (a row is a cluster)."""
    from calver.evaluation.bootstrap import paired_change_ci

    sets: dict[str, Any] = {}
    for name in [n for n in a["per_row"] if n in b["per_row"]]:
        ra, rb = a["per_row"][name], b["per_row"][name]
        ids = [i for i in ra["exact"] if i in rb["exact"] and ra["tasks"].get(i) == rb["tasks"].get(i)]
        tasks = sorted({ra["tasks"][i] for i in ids})
        table: dict[str, Any] = {}
        for key in [*SLOTS, *(f"{t}/{line}" for t in tasks for line in SLOTS)]:
            task, _, line = key.rpartition("/")
            pairs = [(ra["exact"][i][line], rb["exact"][i][line], i) for i in ids
                     if line in ra["exact"][i] and line in rb["exact"][i] and (not task or ra["tasks"][i] == task)]
            if not pairs:
                continue
            va, vb, rows = zip(*pairs)
            ci = paired_change_ci(va, vb, rows, cluster_key="row")
            table[key] = {"rows": len(pairs), "a": sum(va) / len(va), "b": sum(vb) / len(vb),
                          "b_minus_a": ci["estimate"], "ci": [ci["ci_low"], ci["ci_high"]]}
        sets[name] = {"paired_rows": len(ids), "lines": table}
    return {"a": a.get("model"), "b": b.get("model"), "sets": sets}


def compare_markdown(result: dict[str, Any]) -> str:
    out = []
    for name, got in result["sets"].items():
        out += [f"{name}: {got['paired_rows']} rows in both (a = {result['a']}, b = {result['b']})", "",
                "| line | rows | a exact | b exact | b − a, pp [95% CI] |", "|---|---:|---:|---:|---|"]
        for key, r in got["lines"].items():
            lo, hi = (100 * x for x in r["ci"])
            out.append(f"| {key} | {r['rows']} | {r['a']:.1%} | {r['b']:.1%} | "
                       f"{100 * r['b_minus_a']:+.1f} [{lo:+.1f}, {hi:+.1f}] |")
        out.append("")
    return "\n".join(out)


def _compare_cli(args) -> int:
    from calver.evaluation.report import write_json_out

    cfg = parse_command("fit-compare", FitCompareConfig, args)
    if cfg is None:
        return 2
    try:
        result = compare_fits(read_fit(cfg.a), read_fit(cfg.b))
    except ValueError as e:
        print(f"calver fit-compare: error: {e}", file=sys.stderr)
        return 2
    print(compare_markdown(result))
    return write_json_out("fit-compare", result, cfg.out)


def add_commands(subparsers) -> None:
    add_command(subparsers, "fit-report", (FitReportConfig,),
                help="per trace line, teacher-forced: which line a policy writes exactly, training vs held-out",
                description=FitReportConfig.__doc__).set_defaults(func=_cli)
    add_command(subparsers, "fit-compare", (FitCompareConfig,),
                help="two fit reports paired over the rows both scored: per line, b − a with an interval",
                description=FitCompareConfig.__doc__).set_defaults(func=_compare_cli)


__all__ = ["FitCompareConfig", "FitReportConfig", "LineFit", "SetFit", "compare_fits", "fit_rows", "fit_set",
           "line_tokens", "load_rows", "read_fit", "row_id", "run_fit", "trace_lines"]
