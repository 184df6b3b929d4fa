"""Sampler settings of the judge / confidence / refine models reach make_sampler: ``calver select``
(``judge_sampler_kwargs``, ``policy_sampler_kwargs``), ``calver refine`` (``sampler_kwargs``) and
``calver audit-judges`` (``judge_sampler_kwargs``); checked on real HF samplers of the tiny model via
``dtype``, which the HF backend honours."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

import torch  # noqa: E402

import calver.infer.sampler as sampler_mod  # noqa: E402
from calver.config import parse  # noqa: E402
from calver.infer.cli import SelectConfig, _build  # noqa: E402


class _Pool:
    """What ``_build`` reads of a pool when the policy is given explicitly."""

    def manifest(self):
        return {}

    def selection_names(self):
        return []


def test_select_builds_judge_and_policy_samplers_with_their_kwargs(tiny_model_dir):
    cfg = parse(SelectConfig, None, ["--pool", "p", "--selectors", "judge,confidence", "--backend", "hf",
                                     "--judge_model", str(tiny_model_dir), "--policy", str(tiny_model_dir),
                                     "--judge_sampler_kwargs", "{dtype: bfloat16}"])
    assert cfg.judge_sampler_kwargs == {"dtype": "bfloat16"} and cfg.policy_sampler_kwargs == {}
    sels, samplers = _build(["judge", "confidence"], cfg, _Pool())
    try:
        by_name = {s.name: s.sampler for s in sels}
        assert by_name["judge"].model.dtype == torch.bfloat16 and by_name["confidence"].model.dtype == torch.float32
        assert len(samplers) == 2  # same model, different settings: two samplers
    finally:
        for s in samplers.values():
            s.close()
    cfg.policy_sampler_kwargs = {"dtype": "bfloat16"}
    sels, samplers = _build(["judge", "confidence"], cfg, _Pool())
    try:
        assert len(samplers) == 1 and sels[0].sampler is sels[1].sampler  # same settings: shared
    finally:
        for s in samplers.values():
            s.close()


class _Built(Exception):
    pass


def _evaluation_cli(argv: list[str]) -> int:
    """The evaluation commands' parser alone (the top-level CLI imports every command module)."""
    import argparse

    from calver.config import ArgumentParser
    from calver.evaluation.cli import add_commands

    ap = argparse.ArgumentParser(prog="calver")
    add_commands(ap.add_subparsers(dest="command", required=True, parser_class=ArgumentParser))
    args = ap.parse_args(argv)
    return args.func(args)


@pytest.fixture()
def built(monkeypatch):
    """Record each make_sampler call's kwargs and the real sampler's dtype, then stop the command."""
    seen: list[tuple[dict, torch.dtype]] = []
    real = sampler_mod.make_sampler

    def recording(model, adapter=None, **kw):
        smp = real(model, adapter, **kw)
        seen.append((kw, smp.model.dtype))
        smp.close()
        raise _Built

    monkeypatch.setattr(sampler_mod, "make_sampler", recording)
    return seen


def test_refine_passes_sampler_kwargs(tiny_model_dir, tmp_path, built):
    with pytest.raises(_Built):
        _evaluation_cli(["refine", "--pool", str(tmp_path / "none"), "--model", str(tiny_model_dir), "--backend", "hf",
                         "--out", str(tmp_path / "o"), "--sampler_kwargs", "{dtype: bfloat16}"])
    assert built == [({"backend": "hf", "dtype": "bfloat16"}, torch.bfloat16)]


def test_audit_judges_passes_judge_sampler_kwargs(tiny_model_dir, tmp_path, built):
    with pytest.raises(_Built):
        _evaluation_cli(["audit-judges", "--pool", str(tmp_path / "none"), "--out", str(tmp_path / "o"),
                         "--backend", "hf", "--judge_model", str(tiny_model_dir),
                         "--judge_sampler_kwargs", "{dtype: bfloat16}"])
    assert built == [({"backend": "hf", "dtype": "bfloat16"}, torch.bfloat16)]
