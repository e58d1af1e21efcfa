"""web_fetch and web_search against real loopback servers, through the real SSRF guard."""

from __future__ import annotations

import ipaddress

import httpx
import pytest
from web_servers import FakeSearch, Loopback, pages_app

from homeagent_sdk import ToolError
from homeagent_sdk.ssrf import AddressPolicy, GuardedTransport

WEB = "homeagent_core.builtin.web"
ALLOW = {"plugin.web.allow_private": "127.0.0.1:*"}


async def test_fetch_extracts_readable_markdown_with_title_and_links(harness):
    async with Loopback(pages_app()) as srv:
        h = await harness([WEB], ALLOW)
        out = await h.ok("web_fetch", url=f"{srv.url}/article")
    assert out.startswith("# 杭州图书馆开放时间")
    assert f"URL: {srv.url}/article" in out
    assert "周一闭馆" in out and "借期 30 天" in out
    assert "https://www.hzlib.net/notice" in out  # links kept
    assert "© 杭州图书馆" not in out  # boilerplate dropped


async def test_fetch_is_cached_by_url(harness):
    async with Loopback(pages_app()) as srv:
        h = await harness([WEB], ALLOW)
        first = await h.plugin("web").fetcher().fetch(f"{srv.url}/article")
        again = await h.plugin("web").fetcher().fetch(f"{srv.url}/article")
    assert first is again


async def test_pdf_json_plain_text_and_non_utf8_pages(harness):
    async with Loopback(pages_app()) as srv:
        h = await harness([WEB], ALLOW)
        pdf = await h.ok("web_fetch", url=f"{srv.url}/doc.pdf")
        data = await h.ok("web_fetch", url=f"{srv.url}/data.json")
        gbk = await h.ok("web_fetch", url=f"{srv.url}/gbk")
        latin = await h.ok("web_fetch", url=f"{srv.url}/latin")
        binary = await h.fails("web_fetch", url=f"{srv.url}/blob")
        missing = await h.fails("web_fetch", url=f"{srv.url}/missing")
    assert "# Opening hours" in pdf and "Library opens 9:00 to 21:00" in pdf
    assert '"city": "杭州"' in data
    assert "小雨转多云" in gbk  # GBK without a declared charset
    assert "Café crème, 3 €" in latin
    assert "application/octet-stream" in binary and "cannot read" in binary
    assert "HTTP 404" in missing


async def test_endless_page_is_cut_at_the_size_cap_and_a_trickle_times_out(harness):
    async with Loopback(pages_app()) as srv:
        h = await harness([WEB], {**ALLOW, "plugin.web.max_bytes": 50_000, "plugin.web.timeout": "1s"})
        out = await h.ok("web_fetch", url=f"{srv.url}/endless")
        slow = await h.fails("web_fetch", url=f"{srv.url}/trickle")
    assert "the page was cut at 50000 bytes" in out and "more text that never stops" in out
    assert "took longer than 1 s" in slow and "plugin.web.timeout" in slow


async def test_redirects_are_followed_capped_and_loops_refused(harness):
    async with Loopback(pages_app()) as srv:
        h = await harness([WEB], {**ALLOW, "plugin.web.max_redirects": 3})
        ok = await h.ok("web_fetch", url=f"{srv.url}/redirect/2")
        too_many = await h.fails("web_fetch", url=f"{srv.url}/redirect/5")
        loop = await h.fails("web_fetch", url=f"{srv.url}/loop-a")
    assert "周一闭馆" in ok and f"URL: {srv.url}/article" in ok
    assert "more than 3 redirects" in too_many
    assert "redirect loop" in loop and "/loop-b" in loop


async def test_without_the_allowlist_loopback_is_refused(harness):
    async with Loopback(pages_app()) as srv:
        h = await harness([WEB])
        out = await h.fails("web_fetch", url=f"{srv.url}/article")
        named = await h.fails("web_fetch", url=f"http://localhost:{srv.port}/article")
        meta = await h.fails("web_fetch", url="http://169.254.169.254/latest/meta-data/")
        private = await h.fails("web_fetch", url="http://192.168.1.1/")
        mapped = await h.fails("web_fetch", url=f"http://[::ffff:127.0.0.1]:{srv.port}/article")
        scheme = await h.fails("web_fetch", url="file:///etc/passwd")
    assert "refused to connect to 127.0.0.1" in out and "loopback" in out and "plugin.web.allow_private" in out
    assert "localhost" in named and "loopback" in named
    assert "link-local" in meta
    assert "private" in private
    assert "loopback" in mapped
    assert "only http:// and https://" in scheme


async def test_a_redirect_to_loopback_is_refused_on_the_hop(harness):
    target = Loopback(pages_app(), host="127.0.0.1")
    front = Loopback(pages_app(redirect_target=f"{target.url}/article"), host="127.0.0.2")
    async with target, front:
        h = await harness([WEB], {"plugin.web.allow_private": "127.0.0.2:*"})
        ok = await h.ok("web_fetch", url=f"{front.url}/article")
        out = await h.fails("web_fetch", url=f"{front.url}/to-target")
    assert "周一闭馆" in ok  # the allowlisted address itself is reachable
    assert "refused to connect to 127.0.0.1" in out


async def test_the_transport_checks_addresses_at_connect_time():
    """Even a request that skipped the URL check cannot reach a refused address."""
    async with Loopback(pages_app()) as srv:
        async with httpx.AsyncClient(transport=GuardedTransport(AddressPolicy())) as client:
            with pytest.raises(ToolError, match="loopback"):
                await client.get(f"http://localhost:{srv.port}/article")
        allowed = AddressPolicy.parse("127.0.0.0/8:*")
        async with httpx.AsyncClient(transport=GuardedTransport(allowed)) as client:
            assert (await client.get(f"http://localhost:{srv.port}/article")).status_code == 200


async def test_an_allowlisted_address_opens_only_the_ports_it_names(harness):
    """Allowing 127.0.0.1 must not open every service on the machine: a bare entry is the web
    ports 80/443, host:port that port, host:* every port."""
    async with Loopback(pages_app()) as srv, Loopback(pages_app()) as other:
        bare = await harness([WEB], {"plugin.web.allow_private": "127.0.0.1"})
        refused = await bare.fails("web_fetch", url=f"{srv.url}/article")
        named = await harness([WEB], {"plugin.web.allow_private": f"127.0.0.1:{srv.port}"})
        ok = await named.ok("web_fetch", url=f"{srv.url}/article")
        other_port = await named.fails("web_fetch", url=f"{other.url}/article")
    assert f"refused to connect to 127.0.0.1 port {srv.port}" in refused
    assert f"allowlisted for other ports only: add 127.0.0.1:{srv.port}" in refused
    assert "周一闭馆" in ok
    assert f"port {other.port}" in other_port and f"127.0.0.1:{other.port}" in other_port
    policy = AddressPolicy.parse("nas.local, [::1]:8080, 192.168.1.0/24:*, 10.0.0.1:8123")
    assert policy.allowed_host("nas.local", 443) and not policy.allowed_host("nas.local", 22)
    loop6 = ipaddress.ip_address("::1")
    policy.check_address("::1", loop6, 8080)
    with pytest.raises(ToolError, match=r"add \[::1\]:22 to"):
        policy.check_address("::1", loop6, 22)
    policy.check_address("192.168.1.9", ipaddress.ip_address("192.168.1.9"), 22)
    with pytest.raises(ToolError, match="port 80"):
        policy.check_address("10.0.0.1", ipaddress.ip_address("10.0.0.1"), 80)
    for bad in ("127.0.0.1:0", "127.0.0.1:http", "[::1]x", "nas.local:"):
        with pytest.raises(ToolError, match="bad port"):
            AddressPolicy.parse(bad)


def test_a_bad_allowlist_entry_is_named():
    with pytest.raises(ToolError, match="'not a host!' is not a host"):
        AddressPolicy.parse("127.0.0.1, not a host!")


# --------------------------------------------------------------------------- search


@pytest.mark.parametrize(
    ("backend", "needs_key", "title", "url"),
    [
        ("searxng", False, "杭州图书馆", "https://www.hzlib.net/"),
        ("brave", True, "Brave hit", "https://example.com/brave"),
        ("tavily", True, "Tavily hit", "https://example.com/t"),
        ("bocha", True, "西湖天气", "https://weather.example.cn/hz"),
    ],
)
async def test_each_search_backend_speaks_its_provider_api(harness, backend, needs_key, title, url):
    fake = FakeSearch()
    async with Loopback(fake.app()) as srv:
        settings = {"plugin.web.search_backend": backend, "plugin.web.search_url": srv.url}
        if needs_key:
            settings["plugin.web.search_api_key"] = "k-123"
        h = await harness([WEB], settings)
        out = await h.ok("web_search", query="杭州 图书馆", n=2)
        fake.status = 429
        limited = await h.fails("web_search", query="x")
        fake.status = 500
        broken = await h.fails("web_search", query="x")
    assert title in out and url in out and "web_fetch" in out
    req = fake.requests[0]
    if backend == "searxng":
        assert req["params"] == {"q": "杭州 图书馆", "format": "json"}
    elif backend == "brave":
        assert req["headers"]["x-subscription-token"] == "k-123" and req["params"]["count"] == "2"
    elif backend == "tavily":
        assert req["headers"]["authorization"] == "Bearer k-123" and req["json"]["max_results"] == 2
    else:
        assert req["headers"]["authorization"] == "Bearer k-123" and req["json"]["count"] == 2
        assert "杭州明天小雨" in out  # the summary is preferred over the short snippet
    assert "rate-limiting (HTTP 429)" in limited and "retry after 30 s" in limited
    assert "HTTP 500" in broken


async def test_search_without_a_backend_or_key_says_what_to_set(harness):
    h = await harness([WEB])
    assert "plugin.web.search_backend" in await h.fails("web_search", query="x")
    h2 = await harness([WEB], {"plugin.web.search_backend": "brave"}, data=h.app.data_dir.parent / "d2")
    assert "plugin.web.search_api_key" in await h2.fails("web_search", query="x")
