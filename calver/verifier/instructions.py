"""Contract instructions (system prompts) generated from the task registry.

Prompts, canonical traces and the parser share one source — the registered families' slot docs —
so they cannot drift apart.
"""

from __future__ import annotations

from calver.verifier.contract import CONTRACT_VERSION, SLOTS
from calver.verifier.registry import families, get_family

_GENERIC = {
    "GRAPH": "the graph you reason on, one edge per item: A -> B (directed), A <-> B (bidirected); "
    "comma-separated",
    "QUERY": "task=<task>; the query's variables as key=value pairs; graph=<DAG|ADMG|directed>",
}


def contract_instructions(task: str | None = None) -> str:
    """The system-prompt text for one task family (or a short form covering all of them)."""
    fams = [get_family(task)] if task else list(families().values())
    labels = list(SLOTS)
    if task:
        labels[0] = fams[0].graph_label
    head = (
        "Answer with exactly six labelled slots, in this order, each on its own line starting with its "
        "label and a colon: " + ", ".join(labels) + ". You may reason before the slots; "
        "the ANSWER slot holds only the requested object."
    )
    lines = [head, ""]
    for fam in fams:
        label = fam.graph_label
        lines.append(f"Task {fam.name}: {fam.description}.")
        docs = dict(_GENERIC)
        docs.update(fam.slot_docs)
        keys = "; ".join(f"{k}=..." for k in fam.query_keys)
        docs["QUERY"] = docs["QUERY"].replace("the query's variables as key=value pairs", keys or "(no variables)")
        for slot in SLOTS:
            name = label if slot == "GRAPH" else slot
            lines.append(f"  {name}: {docs[slot]}")
        lines.append("")
    lines.append(f"(contract version {CONTRACT_VERSION})")
    return "\n".join(lines).strip() + "\n"
