"""Configuration: a TOML file, overridden key by key by ``WIKID_*`` variables.

Why this order (defaults < file < environment < command line): systemd units
and CI set the environment, people edit the file, and a flag is the most
deliberate. Secrets (API keys) are read only from the environment and never
appear in ``as_dict()``, logs or status.

File: ``$XDG_CONFIG_HOME/wikid/config.toml`` or ``--config``. Top-level keys are
defaults for every vault; ``[vaults.NAME]`` tables hold per-vault keys (at least
``path``). See ``config/wikid.example.toml`` for every key.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, NamedTuple

from wikid import _where
from wikid._where import ConfigError as ConfigError  # re-exported: its users import it from here
from wikid._where import safe_name as safe_name

QUERY_MODES = ("local", "global", "hybrid", "mix", "naive")
LLM_KINDS = ("openai", "ollama")
BACKENDS = ("sqlite", "lightrag-files", "postgres")
DEFAULT_EMBEDDING = "minilm"
DEFAULT_BACKEND = "sqlite"

SECRET_ENV = {"llm_api_key": "WIKID_LLM_API_KEY", "postgres_password": "WIKID_POSTGRES_PASSWORD"}
# What a query without a configured LLM says (it returns the evidence).
NO_LLM = (
    "no LLM is configured, so this is the evidence only; for answers set WIKID_LLM_BASE_URL "
    "and WIKID_LLM_MODEL (and WIKID_LLM_API_KEY if the endpoint needs one), or llm_base_url "
    "and llm_model in the config; llm_kind is openai (any OpenAI-compatible server) or ollama"
)


class LLMConfig(NamedTuple):
    """Where the user's LLM is. Plain data here, so that reading the config never
    imports an HTTP client; ``wikid.store.llm`` talks to it."""

    base_url: str
    model: str
    kind: str = "openai"
    api_key: str | None = None
    timeout_s: float = 300.0


class ExtractSettings(NamedTuple):
    """LLM extraction of implicit relations (``wikid.sync.extract``)."""

    llm: LLMConfig | None
    threshold: float = 0.3
    concurrency: int = 4
    retry_s: float = 30.0


def workspace_name(vault: Path) -> str:
    """A vault's key when no [vaults.NAME] table names it (``_where.workspace_name``)."""
    return _where.workspace_name(os.fspath(vault))


def legacy_workspace_name(vault: Path) -> str:
    """What wikid before 0.2 named every vault: its folder name alone."""
    return safe_name(vault.expanduser().resolve().name)


def data_home() -> Path:
    return Path(os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")) / "wikid"


def default_workdir(vault: Path, name: str | None = None) -> Path:
    return data_home() / safe_name(name or workspace_name(vault))


class VaultConfig(NamedTuple):
    path: Path
    name: str = ""
    workdir: Path | None = None
    socket: Path | None = None
    store: str = DEFAULT_BACKEND
    # "minilm" (shipped, English), or a local ONNX model: a .onnx file, or a folder with
    # model.onnx, beside its tokenizer.json (docs/languages.md). Another re-embeds.
    embedding: str = DEFAULT_EMBEDDING
    # postgresql://USER@HOST:PORT/DATABASE for store = "postgres" (password: environment).
    postgres_url: str | None = None
    debounce_ms: int = 300
    reconcile_interval_s: float = 300.0
    max_queue: int = 100_000
    max_note_bytes: int = 10 * 1024 * 1024
    ignore: tuple[str, ...] = ()
    # Folders outside the vault that symlinks in the vault may lead into (else never read).
    allow_outside: tuple[str, ...] = ()
    log_level: str = "info"
    query_mode: str = "mix"
    query_budget: int = 3000
    llm_base_url: str | None = None
    llm_model: str | None = None
    llm_kind: str = "openai"
    # Prices per million tokens, {model: [input, output]}, for the cost estimate.
    llm_prices: dict[str, Any] = {}  # noqa: RUF012 (never changed: a NamedTuple's, replaced whole)
    # LLM extraction of implicit relations: off unless asked for (it costs tokens).
    extract: bool = False
    extract_threshold: float = 0.3  # salience below which a chunk is not sent
    extract_concurrency: int = 4
    extract_retry_s: float = 30.0  # first wait after a failed call (doubles, at most 1 h)
    extra: dict[str, Any] = {}  # noqa: RUF012

    def extraction(self) -> ExtractSettings | None:
        """The extraction settings when extraction is on (with or without an LLM: with
        none, cached extractions still count and nothing new is sent)."""
        if not self.extract:
            return None
        return ExtractSettings(
            self.llm(), self.extract_threshold, self.extract_concurrency, self.extract_retry_s
        )

    def llm(self) -> LLMConfig | None:
        """The configured LLM, or None: wikid then answers with evidence only."""
        if not (self.llm_base_url and self.llm_model):
            return None
        return LLMConfig(self.llm_base_url, self.llm_model, self.llm_kind, self.llm_api_key)

    @property
    def llm_api_key(self) -> str | None:
        return os.environ.get(SECRET_ENV["llm_api_key"]) or None

    def resolved(self) -> VaultConfig:
        """Fill in what derives from the vault path."""
        path = self.path.expanduser().resolve()
        name = self.name or workspace_name(path)
        return self._replace(
            path=path,
            name=name,
            workdir=(self.workdir.expanduser() if self.workdir else default_workdir(path, name)),
            socket=(self.socket.expanduser() if self.socket else default_socket(safe_name(name))),
        )

    @property
    def workspace(self) -> str:
        """The vault's LightRAG workspace (and its store's folder name)."""
        return safe_name(self.name or workspace_name(self.path))

    def legacy_store(self) -> Path:
        """Where wikid before 0.2 kept this vault's store (to be moved, not rebuilt): a
        folder named after the vault's folder alone, in the given working dir or, by
        default, in one named so too."""
        old = legacy_workspace_name(self.path)
        if self.workdir is not None and self.workdir != default_workdir(self.path, self.name):
            return self.workdir / old
        return data_home() / old / old

    def daemon(self) -> _where.Where:
        """Where a client finds this (resolved) vault's daemon."""
        return _where.Where(str(self.path), str(self.socket), self.name)

    def as_dict(self) -> dict[str, Any]:
        """JSON-safe view, with no secrets."""
        out = {k: (str(v) if isinstance(v, Path) else v) for k, v in self._asdict().items()}
        out["ignore"] = list(self.ignore)
        out["llm_api_key"] = "set" if self.llm_api_key else None
        return out


def runtime_dir() -> Path:
    """``$XDG_RUNTIME_DIR/wikid``, else a private per-user folder under the temp dir."""
    return Path(_where.runtime_dir())


def default_socket(name: str) -> Path:
    return Path(_where.default_socket(name))


def default_config_path() -> Path:
    return Path(_where.default_config_path())


# Each key's declared type, as written (NamedTuple keeps this module's string
# annotations as ForwardRefs).
_FIELDS = {
    k: str(getattr(t, "__forward_arg__", t))
    for k, t in VaultConfig.__annotations__.items()
    if k != "extra"
}


def _coerce(key: str, value: Any) -> Any:
    kind = _FIELDS[key]
    try:
        if "Path" in kind:
            return Path(str(value)) if value not in (None, "") else None
        if kind.startswith("bool"):
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text not in ("1", "0", "true", "false", "yes", "no", "on", "off"):
                raise ValueError("use true or false")
            return text in ("1", "true", "yes", "on")
        if kind.startswith("int"):
            return int(value)
        if kind.startswith("float"):
            return float(value)
        if kind.startswith("dict"):
            table = json.loads(value) if isinstance(value, str) else dict(value)
            return {str(m): [float(x) for x in p] for m, p in table.items()}
        if kind.startswith("tuple"):
            if isinstance(value, str):
                return tuple(v.strip() for v in value.split(",") if v.strip())
            return tuple(str(v) for v in value)
        return None if value in (None, "") and "None" in kind else str(value)
    except (TypeError, ValueError, AttributeError) as exc:
        raise ConfigError(f"config key {key!r}: cannot use {value!r} ({exc})") from exc


def _apply(base: dict[str, Any], table: dict[str, Any], where: str) -> None:
    for key, value in table.items():
        if key == "vaults":
            continue
        if key in SECRET_ENV:
            raise ConfigError(
                f"{where}: {key!r} is a secret; set {SECRET_ENV[key]} in the environment"
            )
        if key not in _FIELDS:
            raise ConfigError(f"{where}: unknown key {key!r} (known: {', '.join(sorted(_FIELDS))})")
        base[key] = _coerce(key, value)


def env_overrides(environ: dict[str, str] | None = None) -> dict[str, Any]:
    env = os.environ if environ is None else environ
    out: dict[str, Any] = {}
    for key in _FIELDS:
        name = f"WIKID_{key.upper()}"
        if name in env:
            out[key] = _coerce(key, env[name])
    return out


def load(
    config: Path | None = None,
    vault: Path | str | None = None,
    *,
    overrides: dict[str, Any] | None = None,
    environ: dict[str, str] | None = None,
) -> VaultConfig:
    """The configuration of one vault.

    ``vault`` is a path or the name of a ``[vaults.NAME]`` table; with neither, the
    file must hold exactly one vault (or ``WIKID_PATH`` names one)."""
    path = config or default_config_path()
    data: dict[str, Any] = {}
    if path.exists():
        import tomllib  # only when there is a file: a client call without one skips it

        try:
            data = tomllib.loads(path.read_text("utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"{path}: {exc}") from exc
    elif config is not None:
        raise ConfigError(f"config file {path} does not exist")
    values: dict[str, Any] = {}
    _apply(values, data, str(path))
    vaults = data.get("vaults", {})
    if not isinstance(vaults, dict) or not all(isinstance(t, dict) for t in vaults.values()):
        raise ConfigError(f'{path}: vaults must be tables, [vaults.NAME] with path = "..."')
    table: dict[str, Any] | None = None
    wanted: Path | None = None
    if vault is not None and str(vault) in vaults:
        table, values["name"] = vaults[str(vault)], str(vault)
    elif vault is not None:
        wanted = Path(vault).expanduser().resolve()
        for vname, vtable in vaults.items():
            if "path" in vtable and Path(vtable["path"]).expanduser().resolve() == wanted:
                table, values["name"] = vtable, vname
        values["path"] = wanted
    elif len(vaults) == 1:
        ((vname, table),) = vaults.items()
        values["name"] = vname
    if table is not None:
        _apply(values, table, f"{path} [vaults.{values.get('name')}]")
    values.update(env_overrides(environ))
    if wanted is not None:
        values["path"] = wanted  # the command line's vault, over WIKID_PATH
    values.update({k: v for k, v in (overrides or {}).items() if v is not None})
    if values.get("path") is None:
        names = ", ".join(vaults) or "none"
        raise ConfigError(f"no vault given: pass --vault PATH or NAME (vaults in {path}: {names})")
    cfg = VaultConfig(**values).resolved()
    if cfg.llm_kind not in LLM_KINDS:
        raise ConfigError(f"llm_kind {cfg.llm_kind!r}: choose from {', '.join(LLM_KINDS)}")
    if cfg.store not in BACKENDS:
        raise ConfigError(f"store {cfg.store!r}: choose from {', '.join(sorted(BACKENDS))}")
    if cfg.store == "postgres" and not cfg.postgres_url:
        raise ConfigError(
            "store 'postgres' needs postgres_url (or WIKID_POSTGRES_URL) = "
            "postgresql://USER@HOST:PORT/DATABASE; the password goes in WIKID_POSTGRES_PASSWORD"
        )
    for key, (low, high) in RANGES.items():
        value = getattr(cfg, key)
        if not low <= value <= high:
            raise ConfigError(f"{key} = {value!r}: use a number from {low} to {high}")
    if cfg.query_mode not in QUERY_MODES:
        raise ConfigError(f"query_mode {cfg.query_mode!r}: choose from {', '.join(QUERY_MODES)}")
    if cfg.embedding != DEFAULT_EMBEDDING and not os.path.exists(os.path.expanduser(cfg.embedding)):
        raise ConfigError(
            f"embedding {cfg.embedding!r}: use {DEFAULT_EMBEDDING!r}, or the path of an ONNX "
            "model (a .onnx file, or a folder with model.onnx) beside its tokenizer.json"
        )
    if cfg.log_level.lower() not in LOG_LEVELS:
        raise ConfigError(f"log_level {cfg.log_level!r}: choose from {', '.join(LOG_LEVELS)}")
    return cfg


# Documented ranges (config/wikid.example.toml): a value outside is an error, never
# a daemon that spins (reconcile_interval_s = 0) or rejects every note (-1 bytes).
RANGES: dict[str, tuple[float, float]] = {
    "debounce_ms": (1, 60_000),
    "reconcile_interval_s": (0.5, 86_400),
    "max_queue": (1, 10_000_000),
    "max_note_bytes": (1024, 1 << 30),
    "query_budget": (50, 100_000),
    "extract_threshold": (0.0, 1.0),
    "extract_concurrency": (1, 64),
    "extract_retry_s": (1, 86_400),
}
LOG_LEVELS = ("debug", "info", "warning", "error")


def all_vaults(config: Path | None = None) -> list[VaultConfig]:
    path = config or default_config_path()
    if not path.exists():
        return []
    import tomllib

    data = tomllib.loads(path.read_text("utf-8"))
    return [load(path, name) for name in data.get("vaults", {})]
