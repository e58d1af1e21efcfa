"""The agent kernel: scheduler, event loop, stages, tools, channels, prompt, sub-agents."""

from __future__ import annotations

from homeagent_core.agent.channels import ChannelRegistry, ChannelSendError
from homeagent_core.agent.kernel import KERNEL_PLUGIN, Kernel, KernelSettings, SourceSwitcher
from homeagent_core.agent.loop import AgentClosed, KernelIO
from homeagent_core.agent.prompt import PromptBuilder, Timeline, estimate_tokens
from homeagent_core.agent.reply import Reply
from homeagent_core.agent.scheduler import InputItem, InputQueueFull, Scheduler
from homeagent_core.agent.stages import StageRunner
from homeagent_core.agent.tools import ToolRegistry, tool_from_function, validate_arguments
from homeagent_core.agent.turn import interrupt_text
from homeagent_core.agent.turn_host import TurnMemory

__all__ = [
    "KERNEL_PLUGIN",
    "AgentClosed",
    "ChannelRegistry",
    "ChannelSendError",
    "InputItem",
    "InputQueueFull",
    "Kernel",
    "KernelIO",
    "KernelSettings",
    "PromptBuilder",
    "Reply",
    "Scheduler",
    "SourceSwitcher",
    "StageRunner",
    "Timeline",
    "ToolRegistry",
    "TurnMemory",
    "estimate_tokens",
    "interrupt_text",
    "tool_from_function",
    "validate_arguments",
]
