"""Memory and knowledge routes: graph recall and picture, documents, context, knowledge CRUD."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from homeagent_core.builtin.webui import agent_port
from homeagent_core.builtin.webui.common import ApiError, UIState, json_body, ok, require_api
from homeagent_sdk.errors import HomeAgentError
from homeagent_sdk.visibility import Audience

__all__ = ["routes"]


def _ui(request: Request) -> UIState:
    return request.app.state.ui  # type: ignore[no-any-return]


def _service(request: Request, name: str) -> object:
    service = getattr(_ui(request).services, name)
    if service is None:
        raise ApiError(503, f"{name} is not running in this agent")
    return service


def _reader(request: Request) -> Audience | None:
    """Whose graph memory the request reads: a person's login or key reads as that person; the
    owner's (None) as the owner, which the memory service knows."""
    person = getattr(request.state, "person", None)
    return Audience(person=person) if person else None


def _int(request: Request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    if not raw.isdigit() or not low <= int(raw) <= high:
        raise ApiError(400, f"{name} must be an integer between {low} and {high}")
    return int(raw)


@require_api
async def memory_recall(request: Request) -> Response:
    memory = _service(request, "memory")
    keywords = [k.strip() for k in request.query_params.get("q", "").split(",") if k.strip()]
    depth = _int(request, "depth", 2, 1, 4)
    if not keywords:
        raise ApiError(400, "q is required: comma-separated keywords")
    return ok(await memory.recall(keywords, depth, audience=_reader(request)))  # type: ignore[attr-defined]


@require_api
async def memory_graph(request: Request) -> Response:
    memory = _service(request, "memory")
    limit = _int(request, "limit", 200, 1, 5000)
    snapshot = await memory.graph_snapshot(limit, audience=_reader(request))  # type: ignore[attr-defined]
    return ok({"success": True, "data": snapshot})


@require_api
async def documents(request: Request) -> Response:
    doc = _service(request, "doc")
    query = request.query_params.get("q", "")
    limit = _int(request, "limit", 20, 1, 200)
    docs = await (doc.search(query, limit) if query else doc.recent(limit))  # type: ignore[attr-defined]
    return ok({"documents": docs})


@require_api
async def context(request: Request) -> Response:
    memory = _service(request, "memory")
    return ok({"events": await memory.context_timeline()})  # type: ignore[attr-defined]


@require_api
async def memory_tools(request: Request) -> Response:
    _service(request, "memory")
    return ok(agent_port.memory_tools(_ui(request).kernel))


@require_api
async def knowledge_get(request: Request) -> Response:
    kb = _service(request, "knowledge")
    query = request.query_params.get("q", "")
    if query:
        return ok({"results": await kb.search(query, 10)})  # type: ignore[attr-defined]
    return ok(await kb.overview())  # type: ignore[attr-defined]


@require_api
async def knowledge_post(request: Request) -> Response:
    kb = _service(request, "knowledge")
    data = await json_body(request, required={"name": str, "content": str})
    try:
        name = await kb.create(data["name"], data["content"])  # type: ignore[attr-defined]
    except HomeAgentError as exc:
        raise ApiError(400, str(exc)) from None
    return ok({"status": "created", "name": name}, status=201)


@require_api
async def knowledge_delete(request: Request) -> Response:
    kb = _service(request, "knowledge")
    name = request.query_params.get("name", "")
    if not name:
        raise ApiError(400, "name is required")
    try:
        await kb.delete(name)  # type: ignore[attr-defined]
    except HomeAgentError as exc:
        raise ApiError(404, str(exc)) from None
    return ok({"status": "deleted", "name": name})


routes = [
    Route("/api/v1/memory", memory_recall, methods=["GET"]),
    Route("/api/v1/memory/graph", memory_graph, methods=["GET"]),
    Route("/api/v1/memory/documents", documents, methods=["GET"]),
    Route("/api/v1/memory/context", context, methods=["GET"]),
    Route("/api/v1/memory/tools", memory_tools, methods=["GET"]),
    Route("/api/v1/knowledge", knowledge_get, methods=["GET"]),
    Route("/api/v1/knowledge", knowledge_post, methods=["POST"]),
    Route("/api/v1/knowledge", knowledge_delete, methods=["DELETE"]),
]
