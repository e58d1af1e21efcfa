"""What a turn hands back: the reply text, and how it came about.

A :class:`Reply` is a ``str`` (so callers that only want the text use it as one) carrying the
usage, the channel, whether the turn was stopped, dropped or interrupted, the errors its stages
recorded and its tool results. It lives apart from the turn so that the scheduler, the library
and the doors can name it without importing the turn machinery.
"""

from __future__ import annotations

from typing import Any

from homeagent_sdk.types import ToolResult

__all__ = ["Reply"]


class Reply(str):
    """A turn's reply: ``str(reply)`` is the text; the attributes say how it came about."""

    usage: dict[str, Any]
    reasoning_content: str
    channel: str
    skipped: bool
    stopped: bool
    dropped: bool
    interrupted: bool
    errors: list[str]
    tool_results: list[ToolResult]
    answered_by: str

    def __new__(
        cls,
        text: str = "",
        *,
        usage: dict[str, Any] | None = None,
        reasoning_content: str = "",
        channel: str = "",
        skipped: bool = False,
        stopped: bool = False,
        dropped: bool = False,
        interrupted: bool = False,
        errors: list[str] | None = None,
        tool_results: list[ToolResult] | None = None,
        answered_by: str = "",
    ) -> Reply:
        self = super().__new__(cls, text)
        self.usage = dict(usage or {})
        self.reasoning_content = reasoning_content
        self.channel = channel
        self.skipped = skipped
        self.stopped = stopped
        self.dropped = dropped
        self.interrupted = interrupted
        self.errors = list(errors or [])
        self.tool_results = list(tool_results or [])
        #: "" for the main agent; "triage" or "status" when answered while the agent was busy.
        self.answered_by = answered_by
        return self

    @property
    def text(self) -> str:
        return str.__str__(self)

    def as_skipped(self) -> Reply:
        """The same reply, everything it carries included, marked as the answer to a de-duplicated input."""
        return Reply(
            self.text,
            usage=self.usage,
            reasoning_content=self.reasoning_content,
            channel=self.channel,
            skipped=True,
            stopped=self.stopped,
            dropped=self.dropped,
            interrupted=self.interrupted,
            errors=self.errors,
            tool_results=self.tool_results,
            answered_by=self.answered_by,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "content": self.text,
            "usage": self.usage,
            "reasoning_content": self.reasoning_content,
            "channel": self.channel,
            "skipped": self.skipped,
            "stopped": self.stopped,
        }
