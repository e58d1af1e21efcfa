from __future__ import annotations

import base64
import hashlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import pytest

from homeagent_core.embeddings.http import HttpEmbeddingProvider
from homeagent_sdk.embeddings import EmbeddingUnavailable, EmbedInput, ModalityUnsupported
from homeagent_sdk.errors import ProviderError

DIM = 8


def fake_vector(item: Any) -> list[float]:
    key = json.dumps(item, sort_keys=True, ensure_ascii=False).encode()
    digest = hashlib.sha256(key).digest()
    return [b / 255.0 + 0.01 for b in digest[:DIM]]


class Service:
    """A loopback OpenAI-compatible /v1/embeddings server; the model name picks a behaviour."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.release = threading.Event()
        service = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                body["_auth"] = self.headers.get("Authorization")
                body["_path"] = self.path
                service.requests.append(body)
                model, items = body["model"], body["input"]
                if model == "slow":
                    service.release.wait(10)
                if model == "broken":
                    return self.reply(500, {"error": {"message": "model crashed"}})
                if model == "garbage":
                    return self.reply(200, {"unexpected": True})
                data = [{"index": i, "embedding": fake_vector(x)} for i, x in enumerate(items)]
                if model == "short":
                    data = data[:-1]
                if model == "wrong-dim":
                    data = [{"index": d["index"], "embedding": d["embedding"][:3]} for d in data]
                data.reverse()  # order must come from "index", not position
                return self.reply(200, {"object": "list", "data": data, "model": model})

            def reply(self, status: int, payload: dict[str, Any]) -> None:
                raw = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)


@pytest.fixture
def service() -> Iterator[Service]:
    svc = Service()
    svc.thread.start()
    yield svc
    svc.release.set()
    svc.server.shutdown()
    svc.server.server_close()
    svc.thread.join(timeout=5)


async def test_texts_are_embedded_in_order_normalised_and_authenticated(service: Service) -> None:
    provider = HttpEmbeddingProvider(service.base_url, "m1", dimension=DIM, api_key="sk-test")
    try:
        vecs = await provider.embed_texts(["你好", "world", "你好"])
    finally:
        await provider.aclose()
    assert vecs.shape == (3, DIM) and vecs.dtype == np.float32
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-6)
    expected = np.array(fake_vector("你好"), dtype=np.float32)
    assert np.allclose(vecs[0], expected / np.linalg.norm(expected), atol=1e-6)
    assert np.allclose(vecs[0], vecs[2]) and not np.allclose(vecs[0], vecs[1])
    req = service.requests[0]
    assert req["_path"] == "/v1/embeddings" and req["_auth"] == "Bearer sk-test"
    assert req["input"] == ["你好", "world", "你好"]


async def test_connect_asks_the_service_for_the_dimension(service: Service) -> None:
    provider = await HttpEmbeddingProvider.connect(service.base_url, "m1")
    await provider.aclose()
    assert provider.info.dimension == DIM
    other = await HttpEmbeddingProvider.connect(service.base_url.replace("/v1", "/v2"), "m1")
    await other.aclose()
    assert other.info.fingerprint != provider.info.fingerprint  # another service, another space


async def test_batches_split_large_inputs_and_empty_texts_skip_the_network(
    service: Service,
) -> None:
    provider = HttpEmbeddingProvider(service.base_url, "m1", dimension=DIM, batch_size=2)
    vecs = await provider.embed_texts(["a", "", "b", "c", "  "])
    await provider.aclose()
    assert [len(r["input"]) for r in service.requests] == [2, 1]
    assert not vecs[1].any() and not vecs[4].any() and vecs[3].any()


async def test_images_are_sent_only_in_the_configured_format(service: Service) -> None:
    text_only = HttpEmbeddingProvider(service.base_url, "m1", dimension=DIM)
    with pytest.raises(ModalityUnsupported):
        await text_only.embed([EmbedInput.of_image(b"\x89PNG")])
    await text_only.aclose()
    for fmt, expected in (
        ("data_url", "data:image/png;base64," + base64.b64encode(b"\x89PNG").decode()),
        ("object", {"image": base64.b64encode(b"\x89PNG").decode()}),
    ):
        provider = HttpEmbeddingProvider(service.base_url, "m1", dimension=DIM, image_format=fmt)
        assert provider.supports("image")
        vecs = await provider.embed([EmbedInput.of_text("猫"), EmbedInput.of_image(b"\x89PNG")])
        await provider.aclose()
        assert service.requests[-1]["input"][1] == expected
        assert vecs[1].any()


@pytest.mark.parametrize(
    ("model", "message"),
    [
        ("broken", "HTTP 500: .*model crashed"),
        ("garbage", "without data"),
        ("short", "returned 1 vectors for 2 inputs"),
        ("wrong-dim", "returned a 3-d vector"),
    ],
)
async def test_bad_service_answers_raise_clear_errors(service: Service, model: str, message: str) -> None:
    provider = HttpEmbeddingProvider(service.base_url, model, dimension=DIM)
    with pytest.raises(ProviderError, match=message):
        await provider.embed_texts(["a", "b"])
    await provider.aclose()


async def test_a_slow_service_times_out_with_advice(service: Service) -> None:
    provider = HttpEmbeddingProvider(service.base_url, "slow", dimension=DIM, timeout=0.2)
    with pytest.raises(ProviderError, match=r"did not answer within 0\.2 s"):
        await provider.embed_texts(["a"])
    await provider.aclose()


async def test_an_unreachable_service_is_unavailable_at_connect() -> None:
    with pytest.raises(EmbeddingUnavailable, match="unreachable"):
        await HttpEmbeddingProvider.connect("http://127.0.0.1:9/v1", "m1", timeout=2)


def test_bad_settings_are_rejected() -> None:
    with pytest.raises(EmbeddingUnavailable, match="must start with http"):
        HttpEmbeddingProvider("localhost:8000", "m", dimension=4)
    with pytest.raises(EmbeddingUnavailable, match="image_format"):
        HttpEmbeddingProvider("http://x/v1", "m", dimension=4, image_format="png")  # type: ignore[arg-type]


async def test_the_registry_builds_an_http_tier_and_probes_its_dimension(service: Service) -> None:
    from homeagent_core.embeddings.registry import ProviderRegistry

    sel = await ProviderRegistry().select("http", {"base_url": service.base_url, "model": "m1"})
    assert sel.tier == "dense" and sel.provider is not None
    assert sel.provider.info.dimension == DIM
    assert (await sel.provider.embed_texts(["hi"])).shape == (1, DIM)
    await sel.aclose()
