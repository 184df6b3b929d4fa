"""docs/trace-contract.md's family section is generated from the registry and must not drift."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_contract_doc_matches_registry():
    res = subprocess.run([sys.executable, "scripts/gen_contract_doc.py", "--check"], cwd=ROOT)
    assert res.returncode == 0, "docs/trace-contract.md is stale: run python scripts/gen_contract_doc.py"


def test_every_registered_family_is_documented_and_prompted():
    from calver.verifier import contract_instructions, families

    doc = (ROOT / "docs/trace-contract.md").read_text()
    for name, fam in families().items():
        assert f"### `{name}`" in doc
        text = contract_instructions(name)
        assert fam.operation in text and all(s in text for s in ("QUERY", "STRATEGY", "DERIVATION", "RESULT", "ANSWER"))
