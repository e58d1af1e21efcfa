"""Errors of the data-directory operations (backup, restore)."""

from __future__ import annotations

from homeagent_sdk.errors import HomeAgentError

__all__ = ["BackupError", "WrongPassphrase"]


class BackupError(HomeAgentError):
    """A backup could not be made, read, checked or restored; the message says why and what to do."""


class WrongPassphrase(BackupError):
    """The passphrase does not open this archive."""
