"""Names shared by the SDK and the host."""

from __future__ import annotations

#: The pluggy project name: hook markers, the plugin manager and the entry-point group.
PROJECT_NAME = "homeagent"
