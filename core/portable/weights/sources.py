"""Where a model's files come from: a catalog name, a config file, or an exported bundle folder.

Catalog names map to the official Hugging Face files (pinned revisions). As in the official package,
the weights come from the voice-cloning repository (`kyutai/pocket-tts`, gated) when the user has
access, else from `kyutai/pocket-tts-without-voice-cloning`, which speaks only with voice states.
Paths in a config may be local (relative to the config's folder first, then the working directory)
or hf:// paths, which the caller's `fetch` downloads: on CPython the host's (core/hub.py, in its
runtime: core/host.py); in the browser there is none (it loads bundle folders from the site).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Callable, Dict, List, NamedTuple, Optional, Tuple

from .. import config
from ..errors import ConfigError, DownloadError, did_you_mean
from . import bundle, catalog, params

# Voice of the official package for a custom model: a recording any model can clone.
CUSTOM_MODEL_VOICE = "alba"

OFFLINE_HELP = (
    "To work offline, fetch these files on a machine with network and load a local config .yaml whose "
    "weights_path and tokenizer_path point at them, or a bundle folder made by `python -m core.cli export`."
)


# How a hf:// file is fetched: url -> local path, a DownloadError when it cannot be.
Fetch = Callable[[str], str]


def no_downloads(url: str) -> str:
    """The fetch of a runtime without downloads."""
    raise DownloadError(f"cannot fetch {url}: this runtime has no downloads (load a bundle folder instead)")


class ModelFiles(NamedTuple):
    config: config.Config
    weights: Dict[str, str]  # part of the checkpoint (params.PARTS) -> local path of the file holding it
    tokenizer: str  # local path
    name: str  # catalog name, or the config / bundle path
    voices: Dict[str, str]  # predefined voice -> local path or hf:// url of its state
    default_voice: Optional[str]  # a key of `voices`, a path, or an hf:// url of a recording
    voice_cloning: bool  # False when only the weights without voice cloning could be had


def resolve(source: str, fetch: Fetch = no_downloads) -> ModelFiles:
    """The files of a model: a catalog name, a config file, a bundle folder, or a checkpoint in the
    official layout (a folder, or a Hugging Face repo `hf://owner/repo[@revision]`: see
    `_checkpoint`); its hf:// files fetched with `fetch`."""
    if source.startswith("hf://") and source[len("hf://") :].split("@")[0].count("/") == 1:
        return _checkpoint(source, fetch)
    if os.path.isdir(source):
        return _checkpoint(source, fetch) if _is_checkpoint(source) else _bundle(source)
    if source.endswith((".yaml", ".yml", ".json")):
        if not os.path.isfile(source):
            raise ConfigError(f"config file not found: {source}")
        return _from_config(_read_config(source), os.path.dirname(os.path.abspath(source)), source, fetch)
    if catalog.is_model(source):
        cfg = catalog.config(source)
        weights, cloning = _weights(cfg, "", f"model {source!r}", fetch)
        tokenizer = _tokenizer(cfg, "", f"model {source!r}", fetch)
        voices = {name: catalog.voice_url(source, name) for name in catalog.voice_names()}
        return ModelFiles(cfg, _whole(weights), tokenizer, source, voices, catalog.default_voice(source), cloning)
    if os.path.exists(source):
        raise ConfigError(f"{source}: expected a model config (.yaml or .json) or a bundle folder")
    raise ConfigError(
        f"unknown model {source!r}: {did_you_mean(source, catalog.model_names())}use a catalog name "
        f"({', '.join(catalog.model_names())}), "
        "a config .yaml/.json, or a bundle folder"
    )


# A checkpoint in the official layout: its config (the official schema, whose paths are relative to
# it: a community checkpoint's repo holds config.yaml, its weights and its tokenizer), and where it
# names no weights, WEIGHTS_NAME beside it.
CONFIG_NAMES = ("config.yaml", "config.yml", "config.json")
WEIGHTS_NAME = "model.safetensors"


def _read_config(path: str) -> config.Config:
    return config.load_json(path) if path.endswith(".json") else config.load_yaml(path)


def _is_checkpoint(folder: str) -> bool:
    """Whether a folder is a checkpoint in the official layout rather than a bundle of ours."""
    return not os.path.isfile(os.path.join(folder, bundle.MANIFEST)) and _config_name(folder) is not None


def _config_name(folder: str) -> Optional[str]:
    return next((name for name in CONFIG_NAMES if os.path.isfile(os.path.join(folder, name))), None)


def _checkpoint(source: str, fetch: Fetch) -> ModelFiles:
    """A folder or a Hugging Face repo holding a config (CONFIG_NAMES), the weights and the
    tokenizer (sentencepiece or tokenizers JSON) the config names, relative to it (the weights:
    WEIGHTS_NAME where it names none)."""
    if os.path.isdir(source):
        base = os.path.abspath(source)
        name = _config_name(base)
        assert name is not None
        cfg = _read_config(os.path.join(base, name))
    else:
        base, cfg = _repo_config(source, fetch)
    if not (cfg.weights_path or cfg.weights_path_without_voice_cloning):
        cfg = dataclasses.replace(cfg, weights_path=WEIGHTS_NAME)
    return _from_config(cfg, base, source, fetch)


def _repo_config(source: str, fetch: Fetch) -> Tuple[str, config.Config]:
    """A repo's base (`hf://owner/repo`, with `@revision` kept for each file) and its config."""
    problems = []
    for name in CONFIG_NAMES:
        try:
            return source, _read_config(fetch(_in_repo(source, name)))
        except DownloadError as e:
            problems.append(str(e))
    raise DownloadError(f"{source}: no config ({', '.join(CONFIG_NAMES)}) could be fetched: {problems[0]}")


def _in_repo(repo: str, file: str) -> str:
    """`file` of the repo `hf://owner/repo[@revision]` as a hf:// path."""
    path, _, revision = repo.partition("@")
    return f"{path.rstrip('/')}/{file}" + (f"@{revision}" if revision else "")


def _from_config(cfg: config.Config, base: str, source: str, fetch: Fetch) -> ModelFiles:
    weights, cloning = _weights(cfg, base, source, fetch)
    tokenizer = _tokenizer(cfg, base, source, fetch)
    return ModelFiles(cfg, _whole(weights), tokenizer, source, {}, catalog.voice_origin(CUSTOM_MODEL_VOICE), cloning)


def voice_names(source: str) -> List[str]:
    """The predefined voices of a model, read without fetching anything: a catalog model's, a
    bundle's (from its bundle.json), none for a config file or a checkpoint."""
    if catalog.is_model(source):
        return catalog.voice_names()
    if source.startswith("hf://"):
        return []
    if os.path.isdir(source):
        return [] if _is_checkpoint(source) else list(bundle.read(source).voices)
    if not (source.endswith((".yaml", ".yml", ".json")) and os.path.isfile(source)):
        resolve(source)  # the error of a model that is not there (a config file's would fetch its files)
    return []


def _whole(path: str) -> Dict[str, str]:
    """One file holding every part of the checkpoint."""
    return {part: path for part in params.PARTS}


def _file(value: Optional[str], base: str, source: str, field: str, fetch: Fetch) -> str:
    if not value:
        raise ConfigError(f"{source}: {field} is not set")
    if value.startswith("hf://"):
        return fetch(value)
    if base.startswith("hf://"):  # a repo's config names its files relative to the repo
        return fetch(_in_repo(base, value))
    if value.startswith(("http://", "https://")):
        raise ConfigError(f"{source}: {field}: only local paths and hf:// paths are supported, got {value}")
    for candidate in (os.path.join(base, value), value):
        if os.path.isfile(candidate):
            return candidate
    raise ConfigError(f"{source}: {field}: file not found: {value}")


def _tokenizer(cfg: config.Config, base: str, source: str, fetch: Fetch) -> str:
    try:
        field = "flow_lm.lookup_table.tokenizer_path"
        return _file(cfg.flow_lm.lookup_table.tokenizer_path, base, source, field, fetch)
    except DownloadError as e:
        raise DownloadError(f"{source}: {e}. {OFFLINE_HELP}") from None


def _weights(cfg: config.Config, base: str, source: str, fetch: Fetch) -> Tuple[str, bool]:
    if cfg.flow_lm.weights_path or cfg.mimi.weights_path:
        raise ConfigError(
            f"{source}: separate flow_lm.weights_path / mimi.weights_path checkpoints are not supported; "
            "use a single weights_path in the released model.safetensors layout"
        )
    candidates = [
        (path, field, cloning)
        for path, field, cloning in (
            (cfg.weights_path, "weights_path", True),
            (cfg.weights_path_without_voice_cloning, "weights_path_without_voice_cloning", False),
        )
        if path
    ]
    if not candidates:
        raise ConfigError(f"{source}: weights_path is not set")
    problems, offline = [], False
    for path, field, cloning in candidates:
        try:
            return _file(path, base, source, field, fetch), cloning
        except DownloadError as e:
            problems.append(str(e))
            offline = True
        except ConfigError as e:
            problems.append(str(e))
    if offline:
        raise DownloadError(f"{source}: could not get the weights: {'; '.join(problems)}. {OFFLINE_HELP}")
    raise ConfigError("; ".join(problems))


def _bundle(directory: str) -> ModelFiles:
    contents = bundle.read(directory)
    return ModelFiles(
        config.load_json(contents.config),
        contents.weights,
        contents.tokenizer,
        contents.name,
        contents.voices,
        contents.default_voice,
        contents.voice_cloning,
    )
