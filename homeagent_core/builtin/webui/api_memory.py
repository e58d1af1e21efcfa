"""Memory and knowledge routes: graph recall and picture, documents, context, knowledge CRUD.

They are the owner's (an API key or the owner's session): the documents list shows every
person's documents with whom each came from and who may see it, and ``POST
/api/v1/memory/visibility`` marks documents or knowledge entries ``household`` (or ``private``
again).
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from homeagent_core.builtin.webui import agent_port
from homeagent_core.builtin.webui.common import ApiError, UIState, json_body, ok, require_api
from homeagent_core.workers import run_blocking
from homeagent_sdk.errors import HomeAgentError
from homeagent_sdk.visibility import EVERYONE, HOUSEHOLD, PRIVATE, Audience

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
    system = _service(request, "memory_system")
    query = request.query_params.get("q", "")
    limit = _int(request, "limit", 20, 1, 200)
    store = system.documents  # type: ignore[attr-defined]
    if query:
        hits = await store.query(query, limit, audience=EVERYONE, touch=False)
        docs = [{**h.document.to_doc(h.score).to_dict(), "person": h.document.person,
                 "visibility": h.document.visibility} for h in hits]
    else:
        found = await run_blocking("memory", store.all)
        found.sort(key=lambda d: d.created_at, reverse=True)
        docs = [{**d.to_doc().to_dict(), "person": d.person, "visibility": d.visibility} for d in found[:limit]]
    return ok({"documents": docs})


@require_api
async def memory_visibility(request: Request) -> Response:
    system = _service(request, "memory_system")
    data = await json_body(request, required={"ids": list, "visibility": str})
    ids, visibility = data["ids"], data["visibility"]
    if not ids or not all(isinstance(i, str) and i for i in ids):
        raise ApiError(400, "ids must be a non-empty list of document ids or knowledge entry names")
    if visibility not in (HOUSEHOLD, PRIVATE):
        raise ApiError(
            400, f"visibility must be {HOUSEHOLD!r} (everyone in the home) or {PRIVATE!r}, not {visibility!r}"
        )
    found = await system.set_visibility(ids, visibility)  # type: ignore[attr-defined]
    if found["unknown"] and not (found["documents"] or found["knowledge"]):
        raise ApiError(404, "no document or knowledge entry named " + ", ".join(found["unknown"]))
    return ok(found)


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
    Route("/api/v1/memory/visibility", memory_visibility, methods=["POST"]),
    Route("/api/v1/memory/context", context, methods=["GET"]),
    Route("/api/v1/memory/tools", memory_tools, methods=["GET"]),
    Route("/api/v1/knowledge", knowledge_get, methods=["GET"]),
    Route("/api/v1/knowledge", knowledge_post, methods=["POST"]),
    Route("/api/v1/knowledge", knowledge_delete, methods=["DELETE"]),
]
