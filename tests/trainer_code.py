"""The trainers' own code, loaded on CPU for the adapter tests: verl's custom-reward loader and reward manager,
OpenRLHF's agent executor (reward file and HTTP reward client).

verl and openrlhf are installed without their dependencies (``scripts/setup_env.sh``: no Ray, tensordict,
omegaconf or DeepSpeed). Their package ``__init__`` files import those, so each package is entered through a
stand-in package object whose ``__path__`` is the real directory: the modules the adapters meet (verl's
``utils/import_utils.py``, ``trainer/ppo/reward.py``, ``experimental/reward_loop/reward_manager/{registry,
base,naive}.py``; OpenRLHF's ``utils/agent.py``) then load from their own files, unmodified. Only what those
modules import from the missing stacks is stood in for: verl's ``DataProto`` (a type annotation there),
``ray_utils.get_event_loop`` (asyncio's, as verl's own is), ``reward_score`` (never called: the custom
function replaces it) and omegaconf's ``DictConfig`` (an annotation).
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import sys
import types
from pathlib import Path
from typing import Any

import pytest


def _package(name: str, path: Path, **attrs: Any) -> types.ModuleType:
    mod = types.ModuleType(name)
    mod.__path__ = [str(path)]  # submodules load from the real files; the package's __init__ never runs
    for k, v in attrs.items():
        setattr(mod, k, v)
    return mod


def _root(dist: str) -> Path:
    spec = importlib.util.find_spec(dist)
    if spec is None or not spec.submodule_search_locations:
        pytest.skip(f"{dist} is not installed (scripts/setup_env.sh installs it without its dependencies)")
    return Path(next(iter(spec.submodule_search_locations)))


class DataProtoStandIn:
    """verl's ``DataProto`` as ``NaiveRewardManager.run_single`` reads it: ``data[-1:]``, ``data[0]``,
    ``.batch["responses"|"attention_mask"]`` tensors and ``.non_tensor_batch``."""

    def __init__(self, batch: dict[str, Any], non_tensor_batch: dict[str, Any]) -> None:
        self.batch, self.non_tensor_batch = batch, non_tensor_batch

    def __getitem__(self, item: Any) -> DataProtoStandIn:
        return self


def load_verl(monkeypatch) -> types.SimpleNamespace:
    """verl's ``get_custom_reward_fn`` and ``NaiveRewardManager`` (from the installed verl's files)."""
    root = _root("verl")
    monkeypatch.setitem(sys.modules, "verl", _package("verl", root, DataProto=DataProtoStandIn))
    for sub in ("utils", "trainer", "trainer/ppo", "experimental", "experimental/reward_loop",
                "experimental/reward_loop/reward_manager"):
        name = "verl." + sub.replace("/", ".")
        monkeypatch.setitem(sys.modules, name, _package(name, root / sub))
    ray_utils = types.ModuleType("verl.utils.ray_utils")
    ray_utils.get_event_loop = asyncio.get_event_loop
    scores = types.ModuleType("verl.utils.reward_score")
    scores.default_compute_score = scores.get_default_compute_score = None
    omegaconf = types.ModuleType("omegaconf")
    omegaconf.DictConfig = dict
    for name, mod in (("verl.utils.ray_utils", ray_utils), ("verl.utils.reward_score", scores),
                      ("omegaconf", omegaconf)):
        monkeypatch.setitem(sys.modules, name, mod)
    for name in ("verl.utils.import_utils", "verl.trainer.ppo.reward",
                 "verl.experimental.reward_loop.reward_manager.registry"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    registry = importlib.import_module("verl.experimental.reward_loop.reward_manager.registry")
    sys.modules["verl.experimental.reward_loop.reward_manager"].register = registry.register
    monkeypatch.delitem(sys.modules, "verl.experimental.reward_loop.reward_manager.naive", raising=False)
    naive = importlib.import_module("verl.experimental.reward_loop.reward_manager.naive")
    reward = importlib.import_module("verl.trainer.ppo.reward")
    return types.SimpleNamespace(get_custom_reward_fn=reward.get_custom_reward_fn,
                                 NaiveRewardManager=naive.NaiveRewardManager)


class CharTokenizer:
    """Token ids are code points: what verl's manager decodes (``skip_special_tokens`` has nothing to skip)."""

    @staticmethod
    def encode(text: str) -> list[int]:
        return [ord(c) for c in text]

    @staticmethod
    def decode(ids, skip_special_tokens: bool = True) -> str:
        return "".join(chr(int(i)) for i in ids)


def verl_row(response: str, problem_json: str, pad: int = 3) -> DataProtoStandIn:
    """One rollout as verl's manager receives it: response ids right-padded, its attention mask, the parquet
    row's non-tensor fields (``data_source``, ``reward_model``, ``extra_info``) as ``calver``'s exporter
    writes them."""
    import torch

    ids = CharTokenizer.encode(response)
    responses = torch.tensor(ids + [0] * pad)
    mask = torch.tensor([1] * len(ids) + [0] * pad)
    return DataProtoStandIn({"responses": responses, "attention_mask": mask},
                            {"data_source": "calver/test", "reward_model": {"style": "rule", "ground_truth": ""},
                             "extra_info": {"index": 0, "split": "train", "problem_json": problem_json}})


def load_openrlhf_agent(monkeypatch) -> types.ModuleType:
    """OpenRLHF's ``openrlhf/utils/agent.py`` (``SingleTurnAgentExecutor``) from the installed openrlhf."""
    root = _root("openrlhf")
    pytest.importorskip("aiohttp")
    monkeypatch.setitem(sys.modules, "openrlhf", _package("openrlhf", root))
    monkeypatch.setitem(sys.modules, "openrlhf.utils", _package("openrlhf.utils", root / "utils"))
    monkeypatch.delitem(sys.modules, "openrlhf.utils.agent", raising=False)
    return importlib.import_module("openrlhf.utils.agent")
