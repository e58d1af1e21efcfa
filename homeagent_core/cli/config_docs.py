"""The configuration reference (``docs/CONFIG.md``), rendered from the ConfigDefs in code.

Every table comes from a :class:`~homeagent_sdk.types.ConfigDef`: the kernel's
:data:`~homeagent_core.config.CORE_DEFS`, the implicit ``core.llm.sources.<name>.<field>``
fields, and what each built-in plugin declares in its ``register_settings`` hook (collected
by loading the built-ins into a fresh plugin host and running that hook against an in-memory
:class:`~homeagent_core.config.ConfigStore`, exactly as the app does). The prose between the
tables is kept here as constants, next to the code it describes.

Regenerate the file with ``python -m homeagent_core.cli.config_docs > docs/CONFIG.md``; a test
fails when the committed file and the rendered text differ.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from homeagent_core.cli.reference_pages import builtins_host, print_page, refuse_failed
from homeagent_core.config import _SOURCE_FIELDS, CORE_DEFS, LLM_API_KEY_ENV, ConfigStore
from homeagent_core.durations import format_duration
from homeagent_core.embeddings.clip import DEFAULT_CHINESE_CLIP
from homeagent_core.plugins.manager import DEFAULT_PLUGINS
from homeagent_core.plugins.registries import PluginSettings
from homeagent_core.providers.manager import COOLDOWN_BASE_S, COOLDOWN_MAX_S
from homeagent_sdk.errors import UsageError
from homeagent_sdk.types import ConfigDef

__all__ = [
    "collect_plugin_definitions",
    "main",
    "render_config_reference",
    "render_table",
]

REGENERATE = "python -m homeagent_core.cli.config_docs > docs/CONFIG.md"

#: Defaults longer than this are listed under the table instead of inside it.
_LONG_DEFAULT = 60

#: What each ``core.llm.sources.<name>.<field>`` does; every field of ``_SOURCE_FIELDS`` needs one.
SOURCE_FIELD_DOCS: dict[str, str] = {
    "base_url": "API base URL; the adapter's endpoint is appended (OpenAI-compatible servers: end it in `/v1`).",
    "model": "Model name sent with each request.",
    "api_key": "API key; empty = `core.llm.api_key`, else the first of the API-key environment variables.",
    "adapter": "Lua adapter that speaks the vendor's wire format (`homeagent adapters list`).",
    "adapter_path": "Adapter file to use instead of the named one; relative paths are tried under `<data>` first.",
    "context_window": "Context size of the model in tokens (the default source's value sizes the kernel's window).",
    "max_concurrent": "Requests in flight to this source at once (default 8).",
    "priority": "Higher is tried first (default 0); see *Several sources* below.",
    "thinking_enabled": "Ask a reasoning model to think before answering.",
    "vision": "The model accepts images.",
    "audio": "The model accepts audio.",
    "temperature": "Accepted and stored; requests use `core.llm.temperature`.",
    "max_tokens": "Accepted and stored; requests use `core.llm.max_tokens`.",
}

_TITLE = """\
# Configuration reference

<!-- Generated from the settings declared in code; do not edit by hand.
     Regenerate: {regenerate} -->

Every HomeAgent setting is declared in code with its type, default and valid range, and every
value is checked against that declaration when it is set. This page lists them all: the
kernel's `core.*` settings and the `plugin.<name>.*` settings of the built-in plugins.
Installed plugins add their own; `homeagent config list plugin.<name>` shows them.
"""

_WHERE = """\
## Where settings live

* **`<data>/config.db`** — a SQLite database (WAL). `<data>` is the `--data DIR` option, else
  `$HOMEAGENT_HOME`, else `~/.homeagent`. `core.*` values are in the table `config`, each
  plugin's in its own table `config_<plugin>`. Only values you set are stored: a default you
  never overrode follows the code when you upgrade.
* **A shared PostgreSQL memory store** — when `core.memory.store` is a `postgresql://` URL, the
  household's media and embedding settings (`core.memory.media.*` and `core.embeddings.*` except
  `allow_download`) are shared by every daemon of the tenant and kept in the database as well;
  everything else stays in `config.db` (docs/SCALE_OUT.md).
* **The command line** — `homeagent config get KEY`, `homeagent config set KEY VALUE`,
  `homeagent config list [PREFIX] [--json]` (value and where it comes from: `set`, `shared`,
  `env` or `default`) and `homeagent config unset KEY` (back to the default). A wrong type, an
  out-of-range number or an unknown option is refused with a message naming the key and what
  it expects; an unknown key gets suggestions.
* **The web UI** — the *Settings* page (设置) of the web UI (`plugin.webui.addr`, by default
  <http://127.0.0.1:8080>) edits the same store with the same checks, one scope at a time.
* **Environment variables** — a few values can come from the environment; see below.

Settings marked **restart** in the tables take effect when the daemon (`homeagent serve`)
starts next; `homeagent config set` says so when you change one. Secret settings (type
`password`) are masked in every listing and their defaults are not shown here.

Value types: `string`; `text` (multi-line string); `int`; `float`; `bool` (`true`/`false`,
also `1`/`0`, `yes`/`no`, `on`/`off`); `duration` (`500ms`, `30s`, `5m`, `2h`, `1h30m`, `1d`;
a bare number is seconds); `password` (a secret string); `select` (one of the listed options);
`json` (a JSON document).
"""

#: (variable, effect) rows of the environment table; ``{llm_env}`` is filled from the config module.
_ENV: tuple[tuple[str, str], ...] = (
    ("`HOMEAGENT_HOME`", "data directory when `--data` is not given (default `~/.homeagent`)"),
    ("{llm_env}", "API key of the LLM sources, consulted in this order when `core.llm.api_key` is empty; "
     "used by every source without its own `api_key`"),
    ("`HOMEAGENT_WEBUI_API_KEY`", "web UI API key to use on the first start instead of a generated one "
     "(`plugin.webui.api_key` wins when both are set)"),
    ("`HOMEAGENT_LOAD_PLUGINS=a,b`", "load only these entry-point plugins (empty value: none)"),
    ("`HOMEAGENT_DISABLE_PLUGINS=x,y`", "never register these plugins (any kind, built-ins included)"),
    ("`HOMEAGENT_TRACE_PLUGINS=1`", "print every hook call, its implementations and its result to stderr"),
    ("`HOMEAGENT_DEBUG=1`", "log every stretch over 50 ms in which the event loop was blocked, with the stack "
     "of the code that blocked it (`homeagent doctor` counts them)"),
    ("`HOMEAGENT_LOOP_WATCH_MS=<ms>`", "the same loop watch with another threshold in milliseconds (`0`: off)"),
    ("`HF_HUB_OFFLINE=1`, `TRANSFORMERS_OFFLINE=1`", "Hugging Face libraries never touch the network; a model "
     "missing from the cache fails at once instead of retrying for about a minute. Recommended on machines "
     "without internet access"),
    ("`HF_HOME`, `HF_HUB_CACHE`", "where the Hugging Face cache is, i.e. where model repo ids are looked up "
     "(default `~/.cache/huggingface/hub`)"),
    ("`HF_HUB_DISABLE_PROGRESS_BARS=1`, `TRANSFORMERS_VERBOSITY=error`", "quieter model loading in logs"),
)


def _env_section() -> str:
    llm_env = ", ".join(f"`{name}`" for name in LLM_API_KEY_ENV)
    rows = ["## Environment variables", "", "| variable | effect |", "|---|---|"]
    rows += [f"| {variable.format(llm_env=llm_env)} | {effect} |" for variable, effect in _ENV]
    return "\n".join(rows) + "\n"


_LLM = """\
## LLM sources

A *source* is one API endpoint with one model: the keys `core.llm.sources.<name>.<field>`,
where `<name>` is 1–64 letters, digits, `_` or `-`. `core.llm.provider` names the default
source. Sources are created by setting their keys; the fields are listed in the table
*core.llm.sources.&lt;name&gt;* below.

### The default: DeepSeek

The source `{provider}` is declared out of the box ({declared}). It only needs a key:

```sh
homeagent config set core.llm.sources.deepseek.api_key sk-...
# or, without storing it: export DEEPSEEK_API_KEY=sk-...
homeagent doctor          # "LLM sources configured: ..." and no API-key warning
```

### A local OpenAI-compatible server

llama.cpp's `llama-server`, vLLM, LM Studio, Ollama's `/v1` endpoint and most gateways speak
the OpenAI Chat Completions API; the `openai` adapter talks to them. `base_url` ends in `/v1`
(the adapter appends `/chat/completions`):

```sh
homeagent config set core.llm.sources.local.base_url http://127.0.0.1:8000/v1
homeagent config set core.llm.sources.local.model qwen3-8b-instruct
homeagent config set core.llm.sources.local.adapter openai
homeagent config set core.llm.sources.local.api_key local   # see below
homeagent config set core.llm.sources.local.context_window 32768
homeagent config set core.llm.provider local
```

A source without its own `api_key` is sent the shared key (`core.llm.api_key` or the
environment variables above); give a local server a placeholder key so your cloud key is not
sent to it. For Ollama's native API use the `ollama` adapter with
`base_url http://127.0.0.1:11434`.

### Several sources: priority and fallback

Every valid source is a candidate for every request, except a remote one without an API key:
a source whose `base_url` is not on this machine or the local network is never asked (nor
shown ready) until it has a key. They are tried in this order: a source
whose `model` equals the model the request names; then higher `priority`; then sources that
are not cooling down; then the default source (`core.llm.provider`); then by name. So
`core.llm.provider` breaks ties between sources of equal priority, and `priority` outranks it.

When a source fails, the next one answers the same request. A failed source cools down for
{base} × 2^(failures − 1), at most {cap}, and is tried again after that (or earlier, when every
source is cooling down). HTTP 401/403 disables a source until its configuration changes. A
streamed reply falls back to the next source while nothing has been streamed yet; after that
the reply restarts once without streaming.

```sh
# DeepSeek first, the local server when DeepSeek fails or is cooling down:
homeagent config set core.llm.sources.deepseek.priority 10
homeagent config set core.llm.sources.local.priority 0
```

`homeagent doctor` lists the configured sources and warns when no source can answer: a source
without a key is fine when its `base_url` is on this machine or a private network and answers
`GET <base_url>/models`. When a daemon runs on the data directory, doctor reports what that
daemon sees instead (the source that answered last, sources it disabled, plugins that failed and
why, worker threads still hung on calls whose callers gave up, and the event-loop stalls its
loop watch recorded), asked over its `cli` socket (`/doctor`). While the daemon runs, the web UI's
`GET /api/v1/status` (field `llm_sources`) and the agent's own `llm_list_sources` tool report
each source's state: available, cooling down, or disabled and why.
"""

_EMBEDDINGS = """\
## Embedding tiers

Memory search uses the best embedding tier that loads; each one that does not is logged with
the reason and the paths or models it looked for, and memory keeps working on the next:

1. **dense** — `core.embeddings.provider`: `chineseclip` (the default: text and images in one
   space, Chinese and English), `openclip` (needs the `clip` extra: `pip install
   "homeagent[clip]"`), `sentence-transformers` (text), `http` (an OpenAI-style embedding
   API; no setting gives it a base URL yet, so selecting it here leaves this tier
   unavailable), or `none` to skip this tier. `core.embeddings.model` is either a
   **local directory** holding the model's `config.json` and weights, or a
   **Hugging Face repo id** already in the local Hugging Face cache (see `HF_HUB_CACHE`);
   empty means `{chinese_clip}` for `chineseclip`. For `openclip` it is
   `local-dir:<folder>` (a folder holding `open_clip_config.json` and the weights) or
   `hf-hub:<org>/<repo>` (such a repo in the local Hugging Face cache, e.g.
   `hf-hub:laion/CLIP-ViT-B-32-laion2B-s34B-b79K`); a bare architecture name such as
   `ViT-B-32` carries no weights and is refused.
2. **static** — `core.agent.embedding_model_path`: comma-separated word-vector files
   (word2vec / fastText `.vec` or `.txt`, optionally `.gz`; word2vec binary `.bin`; ConceptNet
   Numberbatch) or model2vec folders; cheap text vectors, no torch needed.
3. **tfidf** — the lexical index (jieba word segmentation); always available.

Models are loaded **offline by default**: nothing is downloaded unless
`core.embeddings.allow_download` is `true`. To use a hub model, download it once where the
daemon can see it, then name it:

```sh
hf download OFA-Sys/chinese-clip-vit-base-patch16    # into the Hugging Face cache
homeagent config set core.embeddings.model OFA-Sys/chinese-clip-vit-base-patch16
# or a copied folder:
homeagent config set core.embeddings.model /srv/models/chinese-clip-vit-base-patch16
homeagent doctor          # "embedding tier in use: dense (chineseclip)"
```

`homeagent doctor` prints the tier in use and, for each tier that did not load, why and where
it looked. Vectors of different models never mix: every stored vector carries the
fingerprint of its model, and only vectors of the active model take part in dense search.
After a change of model, older entries are still found through the lexical index until they
are re-embedded.

Every dense model declares the languages it understands: the `language:` of its model card
(for sentence-transformers models), Chinese and English for Chinese-CLIP, English for
open_clip models other than the multilingual ones, any language for `http`. A query in
another language is answered by the lexical path alone, so an English-only model never
lowers Chinese recall (and costs no embedding time there). `core.embeddings.languages`
(`zh,en`, `*` for any) overrides the declaration; `homeagent doctor` prints which languages
each path serves.
"""


# ---------------------------------------------------------------------------- collecting


def collect_plugin_definitions(modules: Sequence[str] = DEFAULT_PLUGINS) -> dict[str, list[ConfigDef]]:
    """The settings each plugin module declares, by plugin name, in load order.

    The host is built directly (not with ``create_plugin_manager``) so the operator's
    ``HOMEAGENT_*_PLUGINS`` variables cannot change the reference.

    Raises:
        PluginLoadError: a module failed to import or its ``register_settings`` raised; the
            reference would silently lack its settings otherwise.
    """
    host = builtins_host(modules)
    store = ConfigStore(":memory:")
    try:
        registries = host.call_register("register_settings", lambda name: PluginSettings(name, store, host))
    finally:
        store.close()
    refuse_failed(host, "settings")
    return {name: list(registry.defined) for name, registry in registries.items() if registry.defined}


# ---------------------------------------------------------------------------- formatting


def _cell(text: str) -> str:
    """Code or markup safe inside one markdown table cell (pipes and newlines escaped)."""
    return text.replace("|", "\\|").replace("\n", "<br>")


def _prose(text: str) -> str:
    """Plain text for a table cell: ``<data>`` must not be read as an HTML tag."""
    return _cell(text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;"))


def _code(text: str) -> str:
    """Inline code for any text, even with backticks inside."""
    fence = "``" if "`" in text else "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _number(value: float) -> str:
    return f"{int(value):,}" if float(value).is_integer() else f"{value:g}"


def _bytes_hint(value: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if value >= size and value % size == 0:
            return f" ({value // size} {unit})"
    return ""


def _is_secret(definition: ConfigDef) -> bool:
    return definition.secret or definition.type == "password"


def _default_text(definition: ConfigDef) -> str:
    """The default as a user would type it; ``""`` for none."""
    value = definition.default
    if value is None:
        return ""
    if definition.type == "bool" or isinstance(value, bool):
        return "true" if value else "false"
    if definition.type == "duration" and isinstance(value, int | float):
        return format_duration(float(value))
    if definition.type == "json" and not isinstance(value, str):
        import json

        return json.dumps(value, ensure_ascii=False)
    return str(value)


def _default_cell(definition: ConfigDef) -> str:
    if _is_secret(definition):
        return "*(secret)*"
    text = _default_text(definition)
    if definition.default is None:
        return "*(none)*"
    if text == "":
        return "*(empty)*"
    if len(text) > _LONG_DEFAULT or "\n" in text:
        return "*(below)*"
    hint = _bytes_hint(definition.default) if definition.key.endswith("_bytes") and definition.type == "int" else ""
    return _cell(_code(text)) + hint


def _range_cell(definition: ConfigDef) -> str:
    if definition.options:
        return ", ".join(_cell(_code(option)) for option in definition.options)
    if definition.type not in ("int", "float", "duration"):
        return ""

    def show(value: float) -> str:
        return format_duration(value) if definition.type == "duration" else _number(value)

    low, high = definition.min, definition.max
    if low is not None and high is not None:
        return f"{show(low)} – {show(high)}"
    if low is not None:
        return f"≥ {show(low)}"
    if high is not None:
        return f"≤ {show(high)}"
    return ""


def render_table(definitions: Iterable[ConfigDef]) -> str:
    """One markdown table of settings, followed by any default too long for a cell."""
    rows = [
        "| key | type | default | range / options | description | restart |",
        "|---|---|---|---|---|---|",
    ]
    long_defaults: list[tuple[str, str]] = []
    for definition in definitions:
        rows.append(
            f"| {_cell(_code(definition.key))} | {definition.type} | {_default_cell(definition)} "
            f"| {_range_cell(definition)} | {_prose(definition.description)} "
            f"| {'restart' if definition.restart_required else ''} |"
        )
        text = _default_text(definition)
        if not _is_secret(definition) and (len(text) > _LONG_DEFAULT or "\n" in text):
            long_defaults.append((definition.key, text))
    out = "\n".join(rows) + "\n"
    for key, text in long_defaults:
        out += f"\nDefault of `{key}`:\n\n```text\n{text}\n```\n"
    return out


def _scope_of(key: str) -> str:
    """``core.llm.temperature`` → ``core.llm``; source keys → ``core.llm.sources``."""
    if key.startswith("core.llm.sources."):
        return "core.llm.sources"
    return ".".join(key.split(".")[:2])


def _group(definitions: Iterable[ConfigDef]) -> dict[str, list[ConfigDef]]:
    groups: dict[str, list[ConfigDef]] = {}
    for definition in definitions:
        groups.setdefault(_scope_of(definition.key), []).append(definition)
    return groups


def _sources_section(declared: Sequence[ConfigDef]) -> str:
    """The free-form source fields, then the sources declared out of the box."""
    missing = sorted(set(_SOURCE_FIELDS) - set(SOURCE_FIELD_DOCS))
    if missing:
        raise UsageError(
            f"source fields without a description in SOURCE_FIELD_DOCS: {', '.join(missing)}; "
            f"add them in {__name__} and regenerate"
        )
    rows = [
        "### core.llm.sources.&lt;name&gt;",
        "",
        "Any `<name>` may be used; each source is the set of keys below. None has a default,",
        "except the fields of the sources declared out of the box (second table).",
        "",
        "| key | type | description |",
        "|---|---|---|",
    ]
    for field, type_ in _SOURCE_FIELDS.items():
        shown = f"{type_} (secret)" if type_ == "password" else type_
        rows.append(f"| `core.llm.sources.<name>.{field}` | {shown} | {_cell(SOURCE_FIELD_DOCS[field])} |")
    rows += ["", "Declared out of the box:", "", render_table(declared)]
    return "\n".join(rows)


def render_config_reference(
    core: Sequence[ConfigDef] = CORE_DEFS,
    plugins: dict[str, list[ConfigDef]] | None = None,
) -> str:
    """The whole ``docs/CONFIG.md`` text.

    Args:
        core: the kernel's settings (``CORE_DEFS``).
        plugins: settings by plugin name; default: collected from the built-in plugins.
    """
    if plugins is None:
        plugins = collect_plugin_definitions()
    groups = _group(core)
    declared_sources = groups.pop("core.llm.sources", [])
    defaults = {d.key: _default_text(d) for d in core}
    provider = defaults.get("core.llm.provider", "deepseek")
    prefix = f"core.llm.sources.{provider}."
    declared = ", ".join(f"`{d.key[len(prefix):]}` `{_default_text(d)}`" for d in declared_sources
                         if d.key.startswith(prefix)) or "no fields"

    parts = [
        _TITLE.format(regenerate=REGENERATE),
        _WHERE,
        _env_section(),
        _LLM.format(
            provider=provider,
            declared=declared,
            base=f"{COOLDOWN_BASE_S:g} s",
            cap=f"{COOLDOWN_MAX_S / 60:g} min",
        ),
        _EMBEDDINGS.format(chinese_clip=DEFAULT_CHINESE_CLIP),
        "## Core settings\n",
    ]
    for scope, definitions in groups.items():
        parts.append(f"### {scope}\n\n{render_table(definitions)}")
        if scope == "core.llm":
            parts.append(_sources_section(declared_sources))
    if declared_sources and "core.llm" not in groups:
        parts.append(_sources_section(declared_sources))
    parts.append(
        "## Plugin settings\n\n"
        "Settings of the built-in plugins. A plugin disabled with `homeagent plugins disable` or\n"
        "`HOMEAGENT_DISABLE_PLUGINS` keeps its stored values.\n"
    )
    for name, definitions in plugins.items():
        parts.append(f"### plugin.{name}\n\n{render_table(definitions)}")
    return "\n".join(part.rstrip("\n") + "\n" for part in parts)


def main(argv: Sequence[str] | None = None) -> int:
    """Print the reference to stdout (UTF-8, whatever the locale)."""
    return print_page(render_config_reference, REGENERATE, argv)


if __name__ == "__main__":
    raise SystemExit(main())
