"""Loopback HTTP servers for the web and senses tests: pages, redirects, search APIs, media APIs.

``Loopback(app, host=...)`` runs an ASGI app with uvicorn on ``host:<ephemeral>`` inside the
running loop. :func:`pages_app` serves real pages (HTML article, GBK page without a charset,
Latin-1 text, a hand-written PDF, JSON, an endless stream, a slow trickle, redirect chains and
loops). :class:`FakeSearch` answers each search provider's documented response shape.
"""

from __future__ import annotations

import asyncio
import functools
import json
import socket
from collections.abc import AsyncIterator
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route


class Loopback:
    """Runs an ASGI app with uvicorn on ``host`` (a loopback address) and an ephemeral port."""

    def __init__(self, app: Any, host: str = "127.0.0.1") -> None:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, 0))
        self.port = self.sock.getsockname()[1]
        self.url = f"http://[{host}]:{self.port}" if ":" in host else f"http://{host}:{self.port}"
        self.server = uvicorn.Server(uvicorn.Config(app, lifespan="off", log_level="critical", access_log=False))
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Loopback:
        self._task = asyncio.create_task(self.server.serve(sockets=[self.sock]))
        async with asyncio.timeout(5):
            while not self.server.started:
                await asyncio.sleep(0.005)  # bounded by the timeout above
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.server.force_exit = True
        if self._task is not None:
            async with asyncio.timeout(10):
                await self._task
        self.sock.close()


ARTICLE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>杭州图书馆开放时间</title></head>
<body>
<nav><a href="/">首页</a> | <a href="/news">新闻</a></nav>
<article>
<h1>杭州图书馆开放时间</h1>
<p>杭州图书馆新馆周二至周日 9:00-21:00 开放，周一闭馆。节假日开放时间另行通知，
请关注<a href="https://www.hzlib.net/notice">官方公告</a>。</p>
<p>读者可凭身份证免费办理借书证，每证可借图书 10 册，借期 30 天，可续借一次。</p>
<p>少儿馆位于二楼，周末有亲子阅读活动，需要提前在公众号预约。</p>
</article>
<footer>© 杭州图书馆</footer>
</body></html>"""

GBK_PAGE = """<html><head><title>天气预报</title></head><body><article><h1>天气预报</h1>
<p>明天杭州小雨转多云，气温十二到十八度，东北风三级。出门记得带伞。</p>
<p>后天晴，气温回升到二十度，适合晾晒被子。</p></article></body></html>"""


JS_APP = """<!DOCTYPE html><html><head><meta charset="utf-8"><title>预约</title></head>
<body><div id="root">loading</div>
<script>
document.getElementById("root").innerHTML =
  '<h1>社区活动预约</h1><label for="city">城市</label> <input id="city"> ' +
  '<button id="go">提交</button><p id="out"></p>';
document.getElementById("go").addEventListener("click", function () {
  document.getElementById("out").textContent = "已预约：" + document.getElementById("city").value;
});
</script></body></html>"""


def _pdf(text: str) -> bytes:
    """A minimal valid one-page PDF showing ``text`` (ASCII) in Helvetica."""
    stream = f"BT /F1 18 Tf 72 720 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 5 0 R >> >> "
        b"/Contents 4 0 R >>",
        b"<< /Length " + str(len(stream)).encode() + b" >>\nstream\n" + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Title (Opening hours) >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += f"{i} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    for off in offsets:
        out += f"{off:010d} 00000 n \n".encode()
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R /Info 6 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


@functools.lru_cache(maxsize=4)
def big_article(size: int = 200 * 1024) -> str:
    """An HTML article of about ``size`` bytes (for the extraction benchmark; built once)."""
    para = "<p>" + "社区服务中心提供老年食堂、托育和法律咨询服务，开放时间为每天八点到二十点。" * 4 + "</p>\n"
    body = [para] * (size // len(para.encode()) + 1)
    head = "<html><head><title>社区服务</title></head><body><article><h1>社区服务</h1>"
    return f"{head}{''.join(body)}</article></body></html>"


def pages_app(redirect_target: str = "") -> Starlette:
    """Pages for ``web_fetch`` tests; ``/to-target`` redirects to ``redirect_target``."""
    hits: dict[str, int] = {}

    async def article(request: Request) -> Response:
        hits["article"] = hits.get("article", 0) + 1
        return Response(ARTICLE, media_type="text/html; charset=utf-8", headers={"X-Hits": str(hits["article"])})

    async def gbk(request: Request) -> Response:
        return Response(GBK_PAGE.encode("gbk"), headers={"content-type": "text/html"})

    async def latin(request: Request) -> Response:
        body = "Café crème, 3 €".encode("iso-8859-15")
        return Response(body, headers={"content-type": "text/plain; charset=iso-8859-15"})

    async def pdf(request: Request) -> Response:
        return Response(_pdf("Library opens 9:00 to 21:00"), media_type="application/pdf")

    async def data(request: Request) -> Response:
        return JSONResponse({"city": "杭州", "temp": 18})

    async def binary(request: Request) -> Response:
        return Response(b"\x00\x01\x02" * 100, media_type="application/octet-stream")

    async def endless(request: Request) -> Response:
        async def chunks() -> AsyncIterator[bytes]:
            yield b"<html><body><article><h1>Endless</h1>"
            while True:
                yield b"<p>" + b"more text that never stops " * 40 + b"</p>\n"
                await asyncio.sleep(0)

        return StreamingResponse(chunks(), media_type="text/html")

    async def trickle(request: Request) -> Response:
        async def chunks() -> AsyncIterator[bytes]:
            while True:
                yield b"."
                await asyncio.sleep(0.2)

        return StreamingResponse(chunks(), media_type="text/plain")

    async def redirect(request: Request) -> Response:
        n = int(request.path_params["n"])
        return RedirectResponse("/article" if n <= 0 else f"/redirect/{n - 1}", status_code=302)

    async def loop_a(request: Request) -> Response:
        return RedirectResponse("/loop-b", status_code=301)

    async def loop_b(request: Request) -> Response:
        return RedirectResponse("/loop-a", status_code=307)

    async def to_target(request: Request) -> Response:
        return RedirectResponse(redirect_target, status_code=302)

    async def missing(request: Request) -> Response:
        return Response("gone", status_code=404)

    async def big(request: Request) -> Response:
        return Response(big_article(), media_type="text/html; charset=utf-8")

    async def js_app(request: Request) -> Response:
        return Response(JS_APP, media_type="text/html; charset=utf-8")

    return Starlette(routes=[
        Route("/article", article), Route("/gbk", gbk), Route("/latin", latin), Route("/doc.pdf", pdf),
        Route("/data.json", data), Route("/blob", binary), Route("/endless", endless), Route("/trickle", trickle),
        Route("/redirect/{n:int}", redirect), Route("/loop-a", loop_a), Route("/loop-b", loop_b),
        Route("/to-target", to_target), Route("/missing", missing), Route("/big", big), Route("/app", js_app),
    ])


class FakeSearch:
    """Each provider's documented response shape; ``status`` forces an error answer."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.status = 200

    def app(self) -> Starlette:
        return Starlette(routes=[
            Route("/search", self.searxng_or_tavily, methods=["GET", "POST"]),
            Route("/res/v1/web/search", self.brave),
            Route("/v1/web-search", self.bocha, methods=["POST"]),
        ])

    async def _record(self, request: Request) -> dict[str, Any]:
        body = await request.body()
        entry = {"method": request.method, "path": request.url.path, "params": dict(request.query_params),
                 "headers": dict(request.headers), "json": json.loads(body) if body else None}
        self.requests.append(entry)
        return entry

    def _error(self) -> Response | None:
        if self.status == 429:
            return JSONResponse({"error": "rate limit"}, status_code=429, headers={"Retry-After": "30"})
        if self.status >= 400:
            return Response("internal error", status_code=self.status)
        return None

    async def searxng_or_tavily(self, request: Request) -> Response:
        entry = await self._record(request)
        if (err := self._error()) is not None:
            return err
        if request.method == "GET":  # SearXNG /search?format=json
            if entry["params"].get("format") != "json":
                return Response("<html>searx</html>", media_type="text/html")
            return JSONResponse({
                "query": entry["params"]["q"], "number_of_results": 0,
                "results": [
                    {"url": "https://www.hzlib.net/", "title": "杭州图书馆", "content": "周二至周日 9:00-21:00",
                     "engine": "bing", "engines": ["bing"], "positions": [1], "score": 1.0, "category": "general"},
                    {"url": "https://example.org/b", "title": "Second", "content": "b", "engine": "ddg"},
                ],
                "answers": [], "corrections": [], "infoboxes": [], "suggestions": [], "unresponsive_engines": [],
            })
        body = entry["json"] or {}
        return JSONResponse({  # Tavily POST /search
            "query": body.get("query"), "follow_up_questions": None, "answer": None, "images": [],
            "results": [
                {"title": "Tavily hit", "url": "https://example.com/t", "content": "tavily content",
                 "score": 0.81, "raw_content": None},
            ] * min(int(body.get("max_results", 5)), 3),
            "response_time": 1.2,
        })

    async def brave(self, request: Request) -> Response:
        entry = await self._record(request)
        if (err := self._error()) is not None:
            return err
        return JSONResponse({
            "type": "search",
            "query": {"original": entry["params"].get("q"), "more_results_available": True},
            "mixed": {"type": "mixed", "main": [{"type": "web", "index": 0, "all": False}]},
            "web": {"type": "search", "family_friendly": True, "results": [
                {"type": "search_result", "title": "Brave hit", "url": "https://example.com/brave",
                 "description": "<strong>brave</strong> description", "is_source_local": False, "language": "en",
                 "profile": {"name": "Example"}},
            ]},
        })

    async def bocha(self, request: Request) -> Response:
        entry = await self._record(request)
        if (err := self._error()) is not None:
            return err
        return JSONResponse({
            "code": 200, "log_id": "abc", "msg": None,
            "data": {
                "_type": "SearchResponse",
                "queryContext": {"originalQuery": (entry["json"] or {}).get("query")},
                "webPages": {"webSearchUrl": "https://bochaai.com/search?q=x", "totalEstimatedMatches": 1000,
                             "value": [{"id": "https://api.bochaai.com/v1/#WebPages.0", "name": "西湖天气",
                                        "url": "https://weather.example.cn/hz", "displayUrl": "weather.example.cn/hz",
                                        "snippet": "短摘要", "summary": "杭州明天小雨，12-18 度。",
                                        "siteName": "天气网", "dateLastCrawled": "2026-11-30T08:00:00Z"}],
                             "someResultsRemoved": False},
                "images": None, "videos": None,
            },
        })
