"""Regenerate the per-family section of docs/trace-contract.md from the task registry."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "trace-contract.md"
BEGIN, END = "<!-- BEGIN GENERATED: families -->", "<!-- END GENERATED: families -->"


def families_section() -> str:
    from calver.verifier import contract_instructions, families

    parts = []
    for name, fam in families().items():
        classes = ", ".join(c.value for c in fam.graph_classes)
        variants = ", ".join(fam.variants) if "variant" in fam.query_keys else "-"
        parts.append(
            f"### `{name}`\n\n{fam.description[0].upper() + fam.description[1:]}. Graph classes: {classes}. "
            f"Variants: {variants}. Answer type: {fam.answer_type}. Derivation operation: `{fam.operation}`.\n\n"
            "```text\n" + contract_instructions(name).strip() + "\n```\n"
        )
    return "\n".join(parts)


def render(text: str) -> str:
    body = f"{BEGIN}\n{families_section()}{END}"
    return re.sub(re.escape(BEGIN) + r".*?" + re.escape(END), lambda _m: body, text, flags=re.DOTALL)


def main() -> int:
    text = DOC.read_text()
    new = render(text)
    if "--check" in sys.argv:
        return 0 if new == text else 1
    DOC.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
