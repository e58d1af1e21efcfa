"""Chat routes: conversation threads, send, history, interrupt, upload, SSE events, uploaded files.

Each person sees only their own conversation threads: the admin login and API key are the
owner's, a person's own API key (``homeagent people key``) is that person's. The threads,
chat, history and event routes accept both; a thread of someone else is answered 404.
"""

from __future__ import annotations

import asyncio
import logging
import mimetypes
import re
import secrets
import time
import unicodedata
import uuid
from collections import OrderedDict
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import FileResponse, Response, StreamingResponse
from starlette.routing import Route

from homeagent_core.builtin.webui import agent_port
from homeagent_core.builtin.webui.common import (
    ApiError,
    UIState,
    json_body,
    ok,
    require_api,
    require_chat_api,
    require_person_page,
)
from homeagent_core.builtin.webui.events import DELTAS
from homeagent_sdk._atomic import atomic_write
from homeagent_sdk.errors import InputQueueFull, UsageError
from homeagent_sdk.threads import thread_of
from homeagent_sdk.types import Principal

__all__ = ["routes", "upload_name"]

log = logging.getLogger("homeagent.webui")

DEDUP_CACHE = 256
ALLOWED_UPLOAD = re.compile(r"^(image/(png|jpeg|gif|webp)|audio/(wav|x-wav|mpeg|ogg|mp4)|text/plain|application/pdf)$")
#: Characters kept in a stored upload name: letters and digits of any script, '.', '_', '-'.
_UNSAFE_NAME = re.compile(r"[^\w.\-]+")
#: Longest stored name in UTF-8 bytes (file systems allow 255) and longest kept extension.
MAX_NAME_BYTES = 120
MAX_EXTENSION = 16
#: Longest file name a client may send at all; longer is refused rather than guessed at.
MAX_SENT_NAME = 1024
#: A person's upload (not the owner's) is stored as ``<16 hex>-<name>``: served to whoever has the
#: link, which only that person's own conversation shows; the owner's uploads are the owner's.
PERSON_UPLOAD = re.compile(r"^[0-9a-f]{16}-")
#: The extension a stored upload of each type gets when the sent one does not match it.
_EXTENSIONS = {"image/jpeg": ".jpg", "audio/mpeg": ".mp3", "text/plain": ".txt", "audio/wav": ".wav",
               "audio/x-wav": ".wav", "audio/ogg": ".ogg", "audio/mp4": ".m4a"}


def _ui(request: Request) -> UIState:
    return request.app.state.ui  # type: ignore[no-any-return]


#: The events of a turn, shown to the person whose turn it is (the rest are the owner's).
TURN_EVENTS = DELTAS | {"raw_input", "tool_call", "agent_output", "agent_error", "agent_llm_chain"}


def _source(data: dict[str, Any]) -> str:
    device = data.get("device_id")
    if device is not None and not (isinstance(device, str) and re.fullmatch(r"[A-Za-z0-9_-]{1,64}", device)):
        raise ApiError(400, "device_id must be 1-64 characters of letters, digits, '-' or '_'")
    return f"webui/{device}" if device else "webui"


class Viewer:
    """Who a request speaks for and their default thread."""

    def __init__(self, request: Request) -> None:
        ui = _ui(request)
        self.ui = ui
        key_person = getattr(request.state, "person", None)
        rights = ui.services.rights
        self.person, self.role = "", "owner"
        if key_person:
            person = rights.people.get(key_person) if rights is not None else None
            self.person, self.role = key_person, person.role if person is not None else "guest"
        elif rights is not None:
            owner = rights.people.owner()
            self.person = owner.name if owner is not None else ""
        self.default = thread_of(Principal(person=self.person, role=self.role))

    def principal(self, thread: str) -> Principal:
        """The principal of this person's input in ``thread`` (None person: the owner's login)."""
        return Principal(person=self.person, door="webui", thread=thread)

    def sees(self, frame: Any) -> bool:
        """Whether this person's event stream shows ``frame``: events of their own turns outside
        group chats; anything else (events of no turn, plugin status, the terminal, stage timings,
        and approval requests, which name who asked for what) to the owner only."""
        if frame.thread is None or frame.event not in TURN_EVENTS:
            return self.role == "owner"
        return bool(frame.person == self.person and ":group:" not in frame.thread)


def _threads_store(ui: UIState) -> Any:
    memory = ui.services.memory
    if memory is None or not callable(getattr(memory, "threads", None)):
        raise ApiError(503, "conversation threads need memory, which is not running in this agent")
    return memory


async def _own_thread(viewer: Viewer, thread: Any) -> str:
    """``thread`` when it is one of the viewer's; else a 400/404 naming what to do."""
    if thread is None or thread == "":
        return viewer.default
    if not isinstance(thread, str):
        raise ApiError(400, "thread must be a string: an id from GET /api/v1/threads")
    if thread == viewer.default:
        return thread
    info = await _threads_store(viewer.ui).thread(thread)
    if info is None or info.get("person") != viewer.person:
        raise ApiError(404, f"no conversation {thread!r} of yours: GET /api/v1/threads lists them, "
                            "POST /api/v1/threads starts a new one")
    return thread


@require_chat_api
async def list_threads(request: Request) -> Response:
    """The requester's own conversations, most recent first; the default one is always there."""
    viewer = Viewer(request)
    found = await _threads_store(viewer.ui).threads(viewer.person)
    if not any(t["id"] == viewer.default for t in found):
        found.append({"id": viewer.default, "person": viewer.person, "title": "", "created": 0.0, "updated": 0.0})
    return ok({"threads": found, "default": viewer.default, "person": viewer.person})


@require_chat_api
async def new_thread(request: Request) -> Response:
    """Start a new conversation of the requester; ``{"title"?}`` -> ``{"thread": {id, ...}}``."""
    data = await json_body(request)
    title = data.get("title") or ""
    if not isinstance(title, str) or len(title) > 200:
        raise ApiError(400, "title must be a string of at most 200 characters")
    viewer = Viewer(request)
    thread = f"web:{viewer.person or 'owner'}:{uuid.uuid4().hex[:12]}"
    try:
        info = await _threads_store(viewer.ui).new_thread(thread, viewer.person, title.strip())
    except UsageError as exc:
        raise ApiError(400, str(exc)) from None
    return ok({"thread": info})


@require_chat_api
async def chat(request: Request) -> Response:
    data = await json_body(request, required={"message": str})
    message = data["message"].strip()
    if not message:
        raise ApiError(400, "message is empty")
    msg_id = data.get("client_msg_id")
    if msg_id is not None and (not isinstance(msg_id, str) or len(msg_id) > 128):
        raise ApiError(400, "client_msg_id must be a string of at most 128 characters")
    ui = _ui(request)
    viewer = Viewer(request)
    thread = await _own_thread(viewer, data.get("thread"))
    cache: OrderedDict[str, asyncio.Future[dict[str, Any]]] = ui.dedup.setdefault("chat", OrderedDict())
    msg_id = f"{viewer.person}\0{msg_id}" if msg_id else msg_id
    if msg_id and msg_id in cache:
        result = await asyncio.shield(cache[msg_id])
        return ok({**result, "deduplicated": True})
    future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
    if msg_id:
        cache[msg_id] = future
        while len(cache) > DEDUP_CACHE:
            cache.popitem(last=False)
    try:
        result = await agent_port.ask(
            ui.kernel, message, channel="webui", source=_source(data), principal=viewer.principal(thread)
        )
    except BaseException as exc:
        if msg_id:
            cache.pop(msg_id, None)
        future.cancel()
        raise _turn_error(exc) from None
    future.set_result(result)
    return ok({**result, "thread": thread})


def _turn_error(exc: BaseException) -> BaseException:
    """What a failed turn becomes for the client: a JSON error with a useful status, never a 500.

    The kernel has already published ``agent_error`` (shown by open tabs); the response carries
    the same text so a script without SSE learns it too.
    """
    if isinstance(exc, ApiError | InputQueueFull) or not isinstance(exc, Exception):
        return exc  # the queue being full is answered 503 + Retry-After by the app's handler
    if isinstance(exc, TimeoutError):
        return ApiError(504, "the agent did not answer within 300 s")
    log.warning("chat turn failed: %s: %s", type(exc).__name__, exc)
    return ApiError(502, f"the agent could not answer: {type(exc).__name__}: {exc}")


@require_chat_api
async def history(request: Request) -> Response:
    """One of the requester's threads (``?thread=``; default: their default thread)."""
    viewer = Viewer(request)
    return await _history(request, viewer, await _own_thread(viewer, request.query_params.get("thread")))


@require_chat_api
async def thread_history(request: Request) -> Response:
    viewer = Viewer(request)
    return await _history(request, viewer, await _own_thread(viewer, request.path_params["thread"]))


async def _history(request: Request, viewer: Viewer, thread: str) -> Response:
    def number(name: str) -> int | None:
        raw = request.query_params.get(name)
        if raw is None:
            return None
        if not raw.isdigit():
            raise ApiError(400, f"{name} must be a non-negative integer")
        return int(raw)

    ui = _ui(request)
    # The id of the newest event already reflected in this history: the page's event stream
    # starts after it, so nothing is drawn twice (history, then the same events replayed).
    last_event_id = ui.hub.last_id
    page = await asyncio.to_thread(ui.history.page, number("limit"), number("before"), thread=thread)
    for message in page["messages"]:
        # Who spoke: the record's person (older records are the owner's); "" for the agent.
        if message["role"] == "user":
            message["speaker"] = message.get("person") or viewer.person
    return ok({**page, "thread": thread, "person": viewer.person, "last_event_id": last_event_id})


@require_api
async def interrupt(request: Request) -> Response:
    data = await json_body(request)
    text = data.get("message") or "stop"
    if not isinstance(text, str):
        raise ApiError(400, "message must be a string")
    await agent_port.interrupt(_ui(request).kernel, text, channel="webui", source=_source(data))
    return ok({"status": "interrupted"})


@require_chat_api
async def stop(request: Request) -> Response:
    """Stop the running turn (its model call is cancelled) and drop what was queued before now.

    The owner stops whatever runs; anyone else only a turn of their own (nothing queued is dropped).
    """
    viewer = Viewer(request)
    kernel = _ui(request).kernel
    if viewer.role == "owner":
        return ok({"status": "stopped", "dropped": kernel.stop()})
    running = kernel.turn
    if running is None or running.who["person"] != viewer.person:
        return ok({"status": "idle", "dropped": 0})
    running.stop()
    return ok({"status": "stopped", "dropped": 0})


def _cut(text: str, limit: int) -> str:
    """``text`` shortened to at most ``limit`` UTF-8 bytes without splitting a character."""
    return text.encode("utf-8")[:limit].decode("utf-8", "ignore")


def upload_name(sent: str, mime: str) -> str:
    """A safe file name for an upload: sanitized, unicode kept, capped, extension kept.

    The extension is the sent one when it belongs to ``mime`` (``photo.JPG`` for image/jpeg),
    otherwise the type's own (``evil.html`` sent as text/plain is stored as ``evil_html.txt``),
    so a stored file is never served back as a type other than the one it was checked as.

    Raises:
        ApiError: 400 when the sent name is longer than ``MAX_SENT_NAME`` characters.
    """
    if len(sent) > MAX_SENT_NAME:
        raise ApiError(400, f"the file name is {len(sent)} characters long; send at most {MAX_SENT_NAME} "
                            "(it is stored shortened to about 120 bytes anyway)")
    base = unicodedata.normalize("NFC", sent.replace("\\", "/").rsplit("/", 1)[-1])
    stem, dot, ext = base.rpartition(".")
    if not dot:
        stem, ext = base, ""
    known = mimetypes.guess_type(f"x.{ext}")[0] if ext else None
    if ext and known == mime and len(ext) <= MAX_EXTENSION and _UNSAFE_NAME.search(ext) is None:
        suffix = "." + ext
    else:
        stem = f"{stem}_{ext}" if ext else stem
        suffix = _EXTENSIONS.get(mime) or mimetypes.guess_extension(mime) or ""
    stem = _UNSAFE_NAME.sub("_", stem).strip("._") or "upload"
    return _cut(stem, MAX_NAME_BYTES - len(suffix.encode("utf-8"))).rstrip("._") + suffix


def _save_upload(folder: Path, clean: str, data: bytes) -> Path:
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    target = folder / clean
    if target.exists():
        target = folder / f"{target.stem}_{int(time.time() * 1000)}{target.suffix}"
    atomic_write(target, data)
    return target


@require_chat_api
async def upload(request: Request) -> Response:
    ui = _ui(request)
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > ui.max_upload:
        raise ApiError(413, f"upload too large (limit {ui.max_upload} bytes)")
    try:
        async with request.form(max_files=1, max_fields=8) as form:
            file = form.get("file")
            if file is None or isinstance(file, str):
                raise ApiError(400, "missing multipart field 'file'")
            data = await file.read(ui.max_upload + 1)
            filename, content_type = file.filename or "upload", file.content_type or ""
            message = str(form.get("message") or "").strip()
            thread = form.get("thread")
    except ApiError:
        raise
    except Exception as exc:  # multipart parser errors are user input errors
        raise ApiError(400, f"could not read the upload: {exc}") from None
    if len(data) > ui.max_upload:
        raise ApiError(413, f"upload too large (limit {ui.max_upload} bytes)")
    mime = content_type.split(";")[0].strip() or mimetypes.guess_type(filename)[0] or ""
    if not ALLOWED_UPLOAD.match(mime):
        raise ApiError(415, f"file type {mime or 'unknown'!r} is not accepted (images, audio, text, PDF)")
    if mime.startswith("image/") and not _looks_like_image(data):
        raise ApiError(415, "the file says it is an image but its content is not")
    viewer = Viewer(request)
    thread = await _own_thread(viewer, thread if isinstance(thread, str) else None)
    clean = upload_name(filename, mime)
    if viewer.role != "owner":
        clean = f"{secrets.token_hex(8)}-{clean}"
    path = await asyncio.to_thread(_save_upload, ui.services.data_dir / "uploads", clean, data)
    info = {"url": f"/uploads/{path.name}", "name": path.name, "size": len(data), "type": mime}
    try:
        result = await agent_port.ask_with_media(
            ui.kernel,
            message or f"[上传了文件 {path.name}]",
            data,
            mime,
            path.name,
            channel="webui",
            source="webui",
            principal=viewer.principal(thread),
        )
    except BaseException as exc:
        raise _turn_error(exc) from None
    return ok({**result, "file": info, "thread": thread})


def _looks_like_image(data: bytes) -> bool:
    signatures = (b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"GIF87a", b"GIF89a")
    return data.startswith(signatures) or (data[:4] == b"RIFF" and data[8:12] == b"WEBP")


@require_chat_api
async def events(request: Request) -> Response:
    ui = _ui(request)
    viewer = Viewer(request)
    last_id = request.headers.get("last-event-id") or request.query_params.get("last_event_id")
    return StreamingResponse(
        ui.hub.stream(last_id, accept=viewer.sees),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "Connection": "keep-alive", "X-Accel-Buffering": "no"},
    )


@require_person_page
async def uploaded_file(request: Request) -> Response:
    """A file sent through the web UI: the owner's to the owner, a person's to whoever has its link."""
    if request.state.role != "owner" and PERSON_UPLOAD.match(request.path_params["name"]) is None:
        raise ApiError(404, "not found")
    return _serve_file(request, "uploads")


@require_person_page
async def sent_file(request: Request) -> Response:
    """A file the agent sent with ``output_send__webui`` (see ``channel``): its random name is shown
    only in the conversation it was sent to."""
    return _serve_file(request, "webui_files")


def _serve_file(request: Request, folder: str) -> Response:
    name = request.path_params["name"]
    if "/" in name or name.startswith(".") or not name:
        raise ApiError(404, "not found")
    path = _ui(request).services.data_dir / folder / name
    if not path.is_file():
        raise ApiError(404, "not found")
    mime = mimetypes.guess_type(name)[0] or "application/octet-stream"
    if not ALLOWED_UPLOAD.match(mime):  # a name from an older version: never let it pick e.g. text/html
        mime = "application/octet-stream"
    inline = mime.split("/")[0] in ("image", "audio") or mime == "text/plain"
    return FileResponse(
        path,
        media_type=mime,
        filename=name,
        # sandbox: even a file a browser would render as a page runs no script with the UI's origin
        headers={"X-Content-Type-Options": "nosniff", "Cache-Control": "private, max-age=3600",
                 "Content-Security-Policy": "default-src 'none'; img-src 'self'; media-src 'self'; sandbox"},
        content_disposition_type="inline" if inline else "attachment",
    )


routes = [
    Route("/api/v1/threads", list_threads, methods=["GET"]),
    Route("/api/v1/threads", new_thread, methods=["POST"]),
    Route("/api/v1/threads/{thread:path}/history", thread_history, methods=["GET"]),
    Route("/api/v1/chat", chat, methods=["POST"]),
    Route("/api/v1/chat/history", history, methods=["GET"]),
    Route("/api/v1/chat/interrupt", interrupt, methods=["POST"]),
    Route("/api/v1/chat/stop", stop, methods=["POST"]),
    Route("/api/v1/chat/file", upload, methods=["POST"]),
    Route("/api/v1/events", events, methods=["GET"]),
    Route("/api/v1/chat/events", events, methods=["GET"]),
    Route("/uploads/{name}", uploaded_file, methods=["GET"]),
    Route("/files/{name}", sent_file, methods=["GET"]),
]
