"""What a turn needs of the world around it: the kernel (:class:`TurnHost`) and memory (:class:`TurnMemory`).

Both are protocols, so a turn's dependencies are read in one place: the kernel satisfies
``TurnHost`` (residents and triage pass their own kernel-shaped hosts), and the app injects a
``TurnMemory`` (the kernel itself imports no memory code).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from homeagent_core.agent.approvals import Rights
    from homeagent_core.agent.channels import ChannelRegistry
    from homeagent_core.agent.prompt import PromptBuilder, Timeline
    from homeagent_core.agent.scheduler import InputItem
    from homeagent_core.agent.settings import KernelSettings
    from homeagent_core.agent.stages import StageRunner
    from homeagent_core.agent.tools import ToolRegistry
    from homeagent_core.events import EventBus
    from homeagent_sdk.api import ChatProvider
    from homeagent_sdk.types import StageContext

__all__ = ["TurnHost", "TurnMemory"]


@runtime_checkable
class TurnMemory(Protocol):
    """The memory layers a turn talks to (all optional: the kernel runs without any).

    ``record_input`` must make the input durable before it returns (the turn waits);
    ``recall`` returns system-prompt blocks (graph index, related documents, knowledge,
    skills index) in priority order. A memory object may also offer
    ``timeline(ctx, budget_tokens) -> list[message dict]`` (past messages, oldest first,
    without the current input) to replace the kernel's own timeline.
    """

    async def record_input(self, ctx: StageContext, item: InputItem) -> None: ...

    async def recall(self, ctx: StageContext) -> list[str]: ...

    async def record_output(self, ctx: StageContext) -> None: ...

    async def prune(self, ctx: StageContext) -> None: ...


class TurnHost(Protocol):
    """Everything a turn uses of the kernel that runs it: the turn's explicit dependencies.

    The kernel satisfies it; a turn reaches nothing else of the kernel (no scheduler, no plugin
    host, no sub-agents), so what a turn can touch is read here, not found by searching.
    """

    bus: EventBus
    provider: ChatProvider
    settings: KernelSettings
    memory: TurnMemory | None
    tools: ToolRegistry
    channels: ChannelRegistry
    stages: StageRunner
    prompt: PromptBuilder
    timeline: Timeline
    own_timeline: bool
    """Whether the kernel keeps the timeline itself (memory offers none)."""
    rights: Rights | None
    """People, tool policy and approvals (None: no person registry, every tool allowed)."""

    def modalities(self) -> frozenset[str] | None:
        """What the current model takes besides text (None: unknown)."""
        ...
