"""``KernelSettings``: the kernel's tunables, checked when they are made.

The app maps ``core.agent.*`` / ``core.llm.*`` config keys onto them; library users and tests
build them directly. A value that cannot work (a zero timeout, no room for children) is refused
here, naming the field, rather than failing a turn later.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from homeagent_core.agent.prompt import DEFAULT_SYSTEM_PROMPT
from homeagent_sdk.errors import ConfigValueError

__all__ = ["KernelSettings", "ResidentLimits"]


@dataclass
class ResidentLimits:
    """Limits of the resident sub-agents (``core.agent.residents.*``).

    :param max_residents: residents that may exist at once (``core.agent.residents.max``).
    :param turns_per_hour: messages one resident may run in any hour.
    :param tokens_per_hour: model tokens one resident may use in any hour.
    :param max_tool_turns: model rounds with tool calls per message.
    :param context_size: messages of its own conversation a resident keeps.
    :param queue_capacity: messages that may wait for one resident.
    :param report: whether each result goes back to the main agent on ``_resident_``.
    """

    max_residents: int = 8
    turns_per_hour: int = 60
    tokens_per_hour: int = 200_000
    max_tool_turns: int = 10
    context_size: int = 20
    queue_capacity: int = 64
    report: bool = True


@dataclass
class KernelSettings:
    """Kernel tunables (the app fills them from ``core.agent.*`` / ``core.llm.*`` config).

    :param max_tool_turns: model rounds with tool calls per turn (``core.agent.max_tool_turns``).
    :param tool_timeout: seconds a tool call may run unless the tool declares its own.
    :param stage_timeout: seconds each stage handler may run.
    :param max_context_size: events the kernel's own timeline keeps.
    :param context_window: the model's context window in tokens (prompt budget).
    :param llm_timeout: seconds one model call may take (None = no limit).
    :param max_children: children running at once.
    :param child_max_depth: deepest child level (``core.agent.child_max_depth``; 1 = children
        cannot spawn children).
    :param child_max_per_turn: children one top-level turn may spawn, descendants included
        (``core.agent.child_max_per_turn``).
    :param residents: limits of the resident sub-agents (``core.agent.residents.*``).
    :param offload_after: seconds the agent may be busy with one turn before waiting inputs
        are handed to backlog triage (``core.agent.offload_after``; 0 = never).
    :param offload_max_inputs: waiting inputs triage looks at at once (``core.agent.offload_max_inputs``).
    :param offload_max_turns: model rounds with tool calls the triage assistant takes per input.
    """

    max_tool_turns: int = 10
    tool_timeout: float = 60.0
    stage_timeout: float = 30.0
    max_context_size: int = 30
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    personal_prompt: str = ""
    context_window: int = 128_000
    model: str = ""
    temperature: float | None = None
    max_tokens: int | None = None
    stream: bool = True
    llm_timeout: float | None = 300.0
    queue_capacity: int = 256
    preempt_cooldown: float = 2.0
    dedup_window: float = 10.0
    max_children: int = 8
    child_max_depth: int = 1
    child_max_per_turn: int = 16
    consolidation_max_turns: int = 5
    residents: ResidentLimits = field(default_factory=ResidentLimits)
    offload_after: float = 300.0
    offload_max_inputs: int = 8
    offload_max_turns: int = 3

    def __post_init__(self) -> None:
        positive = (
            "max_tool_turns",
            "tool_timeout",
            "stage_timeout",
            "max_context_size",
            "context_window",
            "queue_capacity",
            "max_children",
            "child_max_depth",
            "child_max_per_turn",
        )
        for f in fields(self):
            if f.name in positive and not getattr(self, f.name) > 0:
                raise ConfigValueError(
                    f"KernelSettings.{f.name} must be > 0, got {getattr(self, f.name)!r}", key=f.name
                )
