"""Run VLLMSampler jobs in a fresh process (vLLM spawns an engine process: needs a __main__ guard).

Usage: python tests/vllm_worker.py MODEL ADAPTER|- SPEC.json OUT.json
SPEC: {"jobs": [{"name": str, "prompts": [...], "seeds": [...]|null, "cfg": {...}, "adapter": bool}]}
One engine serves all jobs; with ADAPTER given it is built with LoRA enabled and each job says
whether its requests use the adapter.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from pathlib import Path


def main() -> None:
    model, adapter, spec_path, out_path = sys.argv[1:5]
    from calver.infer.sampler import SamplingConfig, VLLMSampler

    t0 = time.time()
    sampler = VLLMSampler(model, None if adapter == "-" else adapter, max_model_len=512)
    init_s = time.time() - t0
    lora = sampler.lora_request
    out: dict = {"init_s": init_s, "jobs": {}}
    for job in json.loads(Path(spec_path).read_text())["jobs"]:
        sampler.lora_request = lora if job.get("adapter") else None
        t = time.time()
        res = sampler.generate(job["prompts"], SamplingConfig(**job.get("cfg", {})), job.get("seeds"))
        out["jobs"][job["name"]] = {
            "gen_s": time.time() - t,
            "results": [[dataclasses.asdict(c) for c in r] for r in res],
        }
    sampler.close()
    Path(out_path).write_text(json.dumps(out))


if __name__ == "__main__":
    main()
