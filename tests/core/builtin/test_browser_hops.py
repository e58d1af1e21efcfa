"""The browser's SSRF guard holds on every hop: redirects, sub-resources, fetch, POST, WebSocket.

A page on an allowlisted address (``::1``) tries to reach a loopback address that is not
allowlisted (``127.0.0.1``) in every way a page can; the target counts each connection it gets.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route
from web_servers import Loopback

BROWSER = "homeagent_core.builtin.browser"
WEB = "homeagent_core.builtin.web"

pytestmark = pytest.mark.skipif(
    shutil.which("chromium") is None and shutil.which("chromium-browser") is None,
    reason="chromium is not installed (apt-get install chromium)",
)


class Target:
    """A plain HTTP server on 127.0.0.1 that answers a secret and counts connections."""

    def __init__(self) -> None:
        self.connections = 0
        self.port = 0

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        body = b"the target's secret text"
        try:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nAccess-Control-Allow-Origin: *\r\n"
                         b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body))
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Target]:
        server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        async with server:
            yield self


def hostile_app(target: str, ws_target: str) -> Starlette:
    async def hop(request: Request) -> Response:
        return RedirectResponse(f"{target}/secret", status_code=int(request.path_params["code"]))

    async def page(request: Request) -> Response:
        return HTMLResponse(f"""<!DOCTYPE html><html><head><title>tries</title></head><body>
<p id="state">pending</p>
<script>
const tried = new Set();
function mark(kind) {{
  tried.add(kind);
  if (tried.size >= 4) document.getElementById('state').textContent = 'all tried';
}}
fetch('/hop/307').then(() => mark('fetch'), () => mark('fetch'));
fetch('/hop/308', {{method: 'POST', body: 'x'}}).then(() => mark('post'), () => mark('post'));
const ws = new WebSocket('{ws_target}');
ws.onopen = () => mark('ws'); ws.onerror = () => mark('ws');
</script>
<img src="/hop/302" onerror="mark('img')" onload="mark('img')">
<iframe src="/hop/302"></iframe>
<script src="/hop/302"></script>
</body></html>""")

    return Starlette(routes=[Route("/hop/{code:int}", hop, methods=["GET", "POST"]), Route("/page", page)])


@pytest.mark.parametrize("code", [301, 302, 307, 308])
async def test_a_redirect_hop_to_a_refused_address_is_refused(harness, code):
    target = Target()
    async with target.running():
        app = hostile_app(f"http://127.0.0.1:{target.port}", f"ws://127.0.0.1:{target.port}/")
        async with Loopback(app, host="::1") as srv:
            h = await harness([WEB, BROWSER], {"plugin.web.allow_private": "[::1]:*"})
            refused = await h.fails("browser", action="open", url=f"{srv.url}/hop/{code}")
    assert "refused to connect to 127.0.0.1" in refused
    assert "secret" not in refused
    assert target.connections == 0


async def test_sub_resources_fetch_post_and_websockets_cannot_reach_a_refused_address(harness):
    target = Target()
    async with target.running():
        app = hostile_app(f"http://127.0.0.1:{target.port}", f"ws://127.0.0.1:{target.port}/")
        async with Loopback(app, host="::1") as srv:
            h = await harness([WEB, BROWSER], {"plugin.web.allow_private": "[::1]:*"})
            text = await h.ok("browser", action="open", url=f"{srv.url}/page")
            async with asyncio.timeout(30):
                while "all tried" not in text:
                    await asyncio.sleep(0.1)  # bounded by the timeout above: the page's own attempts settle
                    text = await h.ok("browser", action="read")
            await h.ok("browser", action="close")
    assert target.connections == 0
    assert "the target's secret text" not in text


async def test_the_allowlisted_address_is_still_reached_through_the_guard(harness):
    target = Target()
    async with target.running():
        h = await harness([WEB, BROWSER], {"plugin.web.allow_private": "127.0.0.1:*"})
        text = await h.ok("browser", action="open", url=f"http://127.0.0.1:{target.port}/")
        await h.ok("browser", action="close")
    assert "the target's secret text" in text
    assert target.connections >= 1
