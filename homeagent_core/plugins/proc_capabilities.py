"""Which ``core.*`` methods each capability grants an out-of-process plugin, and what counts as a secret.

Every method belongs to ``core`` (always allowed) or to one capability group; a plugin may call
``core`` plus the groups its ``plugin.json`` lists. A denied call gets the original's message
naming the missing capability (:func:`denial`). Settings whose last key segment names a secret
read as :data:`MASK`; changing one, or one that decides where secrets are sent, needs ``secrets``.
"""

from __future__ import annotations

import re

from homeagent_core.plugins.packages import CAPABILITIES

__all__ = ["MASK", "METHOD_CAPABILITIES", "denial", "names_a_secret", "sends_secrets"]

_GROUPS: dict[str, tuple[str, ...]] = {
    "io": (
        "io.injectText",
        "io.injectInterrupt",
        "io.injectTextNoMem",
        "io.injectInputSync",
        "io.injectMedia",
        "io.injectMediaSync",
        "io.injectInterruptMedia",
    ),
    "memory": (
        "memory.recall",
        "memory.commit",
        "memory.introspect",
        "memory.merge",
        "memory.purge",
        "memory.entities",
        "memory.relations",
    ),
    "doc_memory": ("doc.query", "doc.insert", "doc.insertWithMedia", "doc.remove", "doc.stats"),
    "knowledge": ("knowledge.search", "knowledge.add", "knowledge.list"),
    "text_memory": ("textmemory.append",),
    "llm": ("llm.listSources", "llm.setSource", "llm.currentSource", "llm.chat"),
    "social": ("social.getPerson", "social.getNetwork", "social.getTrait", "social.getRelations", "social.listPersons"),
    "events": ("events.subscribe", "events.unsubscribe"),
    "plugin_mgr": ("plugin.reloadOne", "plugin.listLoaded", "plugin.isDisabled"),
    "settings_cross": (
        "settings.getCore",
        "settings.setCore",
        "settings.listCore",
        "settings.getPlugin",
        "settings.setPlugin",
        "settings.listPlugin",
        "settings.dump",
        "settings.plugins",
    ),
    "secrets": ("settings.getSecret",),
}
#: method -> capability group; methods not listed are ``core``.
METHOD_CAPABILITIES: dict[str, str] = {m: cap for cap, methods in _GROUPS.items() for m in methods}


#: Last key segments that hold a secret even without a ``secret`` ConfigDef.
_SECRET_NAME = re.compile(r"(api_?key|token|password|passwd|secret)$", re.IGNORECASE)
#: Last key segments that decide where secrets are sent (changing one can exfiltrate a key).
_ROUTE_NAME = re.compile(r"(url|endpoint|adapter|adapter_path|proxy|headers?)$", re.IGNORECASE)
#: What a secret reads as without the ``secrets`` capability.
MASK = "****"


def names_a_secret(key: str) -> bool:
    """Whether the last segment of ``key`` names a secret (an API key, token, password...)."""
    return bool(_SECRET_NAME.search(key.rsplit(".", 1)[-1]))


def sends_secrets(key: str) -> bool:
    """Whether the last segment of ``key`` decides where secrets are sent (an URL, endpoint, proxy...)."""
    return bool(_ROUTE_NAME.search(key.rsplit(".", 1)[-1]))


def denial(plugin: str, method: str, capability: str) -> str:
    """The original's denial message, word for word."""
    return (
        f'插件 {plugin} 调用 {method} 被拒：缺少 "{capability}" 能力。请在 plugin.json 的 capabilities 数组中声明它'
        f"（可用能力：{', '.join(CAPABILITIES)}）"
    )
