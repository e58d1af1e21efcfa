"""Python side of the unified shapes: request preparation, the standard OpenAI parsers the
kernel falls back to (REFERENCE §4.3/§4.4), and validation of what adapters return.

Kept in Python (not Lua) because these run only when an adapter is missing a function, fails,
or returns something off-contract, and because the kernel must not depend on an editable
script to make sense of a plain OpenAI answer.
"""

from __future__ import annotations

from typing import Any

import orjson

__all__ = [
    "STANDARD_FINISH_REASONS",
    "normalize_args",
    "normalize_chunk",
    "normalize_fragment",
    "normalize_response",
    "normalize_usage",
    "parse_openai_chunk",
    "parse_openai_response",
    "parse_sse_body",
    "prepare_request",
]

STANDARD_FINISH_REASONS = frozenset({"stop", "length", "tool_calls", "function_call",
                                     "content_filter", ""})
_AUDIO_FORMATS = {"audio/wav": "wav", "audio/x-wav": "wav", "audio/wave": "wav",
                  "audio/mpeg": "mp3", "audio/mp3": "mp3", "audio/mp4": "mp4",
                  "audio/m4a": "mp4", "audio/ogg": "ogg", "audio/flac": "flac",
                  "audio/x-flac": "flac"}


def _num(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, float):
        return int(v)
    return None


def normalize_usage(u: Any) -> dict[str, Any] | None:
    """Usage of any supported vendor -> OpenAI semantics (prompt includes cached tokens)."""
    if not isinstance(u, dict):
        return None
    if "prompt" in u or "completion" in u:  # already unified
        out = {k: u[k] for k in ("prompt", "completion", "total", "cache_read", "cache_miss",
                                 "cache_reported", "reasoning_tokens") if k in u}
        out.setdefault("prompt", 0)
        out.setdefault("completion", 0)
        if not _num(out.get("total")):
            out["total"] = (_num(out["prompt"]) or 0) + (_num(out["completion"]) or 0)
        return out
    prompt = _num(u.get("prompt_tokens"))
    if prompt is None:
        prompt = _num(u.get("input_tokens")) or 0
    completion = _num(u.get("completion_tokens"))
    if completion is None:
        completion = _num(u.get("output_tokens")) or 0
    out = {"prompt": prompt, "completion": completion}
    ptd = u.get("prompt_tokens_details")
    cached = _num(ptd.get("cached_tokens")) if isinstance(ptd, dict) else None
    if cached is None:
        cached = _num(u.get("prompt_cache_hit_tokens"))
    if cached is None:
        cached = _num(u.get("cached_tokens"))
    miss = _num(u.get("prompt_cache_miss_tokens"))
    if cached is not None:
        out["cache_read"] = cached
        out["cache_reported"] = True
    if miss is not None:
        out["cache_miss"] = miss
        out["cache_reported"] = True
    elif cached is not None:
        out["cache_miss"] = max(prompt - cached, 0)
    ctd = u.get("completion_tokens_details")
    if isinstance(ctd, dict) and _num(ctd.get("reasoning_tokens")) is not None:
        out["reasoning_tokens"] = ctd["reasoning_tokens"]
    out["total"] = _num(u.get("total_tokens")) or prompt + completion
    return out


def normalize_args(a: Any) -> dict[str, Any]:
    """Tool-call arguments -> object (JSON string decoded; scalars -> {value}; junk -> {raw})."""
    if isinstance(a, dict):
        return a
    if a is None or a == "" or a == []:
        return {}
    if not isinstance(a, str):
        return {"value": a}
    try:
        v = orjson.loads(a)
    except orjson.JSONDecodeError:
        return {"raw": a}
    return v if isinstance(v, dict) else {"value": v}


def _dict(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an empty one (wire fields the peer may omit)."""
    return value if isinstance(value, dict) else {}


def _tool_calls(raw: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if not isinstance(raw, list):
        return out
    for tc in raw:
        if not isinstance(tc, dict):
            continue
        fn = _dict(tc.get("function"))
        name = tc.get("name") or fn.get("name")
        if not isinstance(name, str) or not name:
            continue
        args = tc["arguments"] if "arguments" in tc else fn.get("arguments")
        out.append({"id": str(tc.get("id") or ""), "type": "function", "name": name,
                    "arguments": normalize_args(args)})
    return out


def normalize_response(resp: Any) -> dict[str, Any]:
    """Validate and complete an adapter's unified response (raises ValueError if unusable)."""
    if not isinstance(resp, dict):
        raise ValueError(f"unified response must be an object, got {type(resp).__name__}")
    if "choices" in resp and "content" not in resp:
        raise ValueError("looks like a raw OpenAI body, not a unified response")
    content = resp.get("content")
    out: dict[str, Any] = {
        "content": content if isinstance(content, str) else "",
        "finish_reason": str(resp.get("finish_reason") or ""),
        "token_usage": normalize_usage(resp.get("token_usage") or resp.get("usage"))
        or {"prompt": 0, "completion": 0, "total": 0},
    }
    rc = resp.get("reasoning_content")
    if isinstance(rc, str) and rc:
        out["reasoning_content"] = rc
    calls = _tool_calls(resp.get("tool_calls"))
    if calls:
        out["tool_calls"] = calls
    return out


def normalize_chunk(chunk: Any) -> dict[str, Any]:
    """Validate an adapter's unified stream chunk; keep only contract keys in tool calls."""
    if not isinstance(chunk, dict):
        raise ValueError(f"stream chunk must be an object, got {type(chunk).__name__}")
    content = chunk.get("content")
    out: dict[str, Any] = {"content": content if isinstance(content, str) else "",
                           "done": bool(chunk.get("done"))}
    rc = chunk.get("reasoning_content")
    if isinstance(rc, str) and rc:
        out["reasoning_content"] = rc
    if chunk.get("finish_reason"):
        out["finish_reason"] = str(chunk["finish_reason"])
    usage = normalize_usage(chunk.get("usage"))
    if usage is not None:
        out["usage"] = usage
    tcs = chunk.get("tool_calls")
    if isinstance(tcs, list) and tcs:
        out["tool_calls"] = [normalize_fragment(tc, i) for i, tc in enumerate(tcs) if isinstance(tc, dict)]
    return out


def normalize_fragment(tc: dict[str, Any], position: int = 0) -> dict[str, Any]:
    """One streamed tool-call fragment -> the flat contract shape.

    Accepts the flat shape ``{id, type, name, raw_arguments, stream_index}``, OpenAI's nested
    ``{index, id, type, function: {name, arguments}}`` (adapters that pass deltas through, the
    Anthropic one of the original runtime) and argument objects instead of JSON text (Ollama,
    Gemini), which become JSON text so fragments of one call still concatenate. Empty ``id``
    and ``name`` (continuation fragments) are left out; the index falls back to the position.
    """
    fn: dict[str, Any] = tc["function"] if isinstance(tc.get("function"), dict) else {}
    index = next((v for v in (tc.get("stream_index"), tc.get("index")) if _num(v) is not None), position)
    out: dict[str, Any] = {"stream_index": _num(index)}
    for key, value in (("id", tc.get("id")), ("type", tc.get("type")), ("name", tc.get("name") or fn.get("name"))):
        if isinstance(value, str) and value:
            out[key] = value
    raw = tc.get("raw_arguments")
    if raw is None and "arguments" in fn:
        raw = fn["arguments"]
    if raw is None and isinstance(tc.get("arguments"), str):
        raw = tc["arguments"]
    if isinstance(raw, str):
        out["raw_arguments"] = raw
    elif raw is not None:
        out["raw_arguments"] = orjson.dumps(raw).decode()
    if isinstance(tc.get("arguments"), dict):
        out["arguments"] = tc["arguments"]
    return out


def parse_openai_response(body: Any) -> dict[str, Any]:
    """Standard parser for an OpenAI ``chat.completion`` body (raises ValueError)."""
    if not isinstance(body, dict) or not isinstance(body.get("choices"), list) \
            or not body["choices"]:
        raise ValueError("not an OpenAI chat.completion body (no choices)")
    choice = body["choices"][0]
    msg = choice.get("message") if isinstance(choice.get("message"), dict) else {}
    out = {"content": msg.get("content") or "", "finish_reason": choice.get("finish_reason") or "",
           "token_usage": body.get("usage") or {}}
    rc = msg.get("reasoning_content") or msg.get("reasoning")
    if rc:
        out["reasoning_content"] = rc
    if msg.get("tool_calls"):
        out["tool_calls"] = msg["tool_calls"]
    return normalize_response(out)


def parse_openai_chunk(body: Any) -> dict[str, Any] | None:
    """Standard parser for one OpenAI ``chat.completion.chunk``; None when it carries nothing."""
    if not isinstance(body, dict):
        return None
    out: dict[str, Any] = {"content": "", "done": False}
    useful = False
    choices = body.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        ch = choices[0]
        d = _dict(ch.get("delta"))
        if isinstance(d.get("content"), str):
            out["content"] = d["content"]
            useful = True
        rc = d.get("reasoning_content") or d.get("reasoning")
        if isinstance(rc, str) and rc:
            out["reasoning_content"] = rc
            useful = True
        if isinstance(d.get("tool_calls"), list):
            frags = []
            for i, tc in enumerate(d["tool_calls"]):
                if not isinstance(tc, dict):
                    continue  # a peer's malformed fragment: skipped, the stream goes on
                fn = _dict(tc.get("function"))
                frag: dict[str, Any] = {"stream_index": tc.get("index", i)}
                if tc.get("id"):
                    frag["id"] = tc["id"]
                if tc.get("type"):
                    frag["type"] = tc["type"]
                if fn.get("name"):
                    frag["name"] = fn["name"]
                if isinstance(fn.get("arguments"), str):
                    frag["raw_arguments"] = fn["arguments"]
                frags.append(frag)
            if frags:
                out["tool_calls"] = frags
                useful = True
        if ch.get("finish_reason"):
            out["done"] = True
            out["finish_reason"] = ch["finish_reason"]
            useful = True
    usage = normalize_usage(body.get("usage"))
    if usage is not None:
        out["usage"] = usage
        useful = True
    return out if useful else None


def parse_sse_body(text: str) -> dict[str, Any]:
    """A whole SSE body (a gateway answering a non-stream request with a stream) -> response."""
    content: list[str] = []
    reasoning: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    finish = ""
    usage: dict[str, Any] | None = None
    seen = False
    for line in text.splitlines():
        if not line.startswith("data:"):
            continue
        payload = line[5:].strip()
        if not payload or payload == "[DONE]":
            continue
        try:
            chunk = parse_openai_chunk(orjson.loads(payload))
        except orjson.JSONDecodeError:
            continue
        if chunk is None:
            continue
        seen = True
        content.append(chunk["content"])
        reasoning.append(chunk.get("reasoning_content", ""))
        finish = chunk.get("finish_reason", finish)
        usage = chunk.get("usage", usage)
        for frag in chunk.get("tool_calls", []):
            slot = calls.setdefault(int(frag.get("stream_index", 0)),
                                    {"id": "", "name": "", "arguments": ""})
            slot["id"] = frag.get("id") or slot["id"]
            slot["name"] = frag.get("name") or slot["name"]
            slot["arguments"] += frag.get("raw_arguments", "")
    if not seen:
        raise ValueError("no OpenAI stream frames in the body")
    resp: dict[str, Any] = {"content": "".join(content), "finish_reason": finish,
                            "token_usage": usage or {},
                            "reasoning_content": "".join(reasoning),
                            "tool_calls": [calls[i] for i in sorted(calls)]}
    return normalize_response(resp)


def _audio_block(block: dict[str, Any]) -> dict[str, Any]:
    url = block.get("audio_url") or block.get("url") or ""
    if isinstance(url, dict):
        url = url.get("url", "")
    if not isinstance(url, str) or not url.startswith("data:"):
        return block
    head, _, data = url.partition(",")
    mime = head[5:].split(";")[0].lower()
    return {"type": "input_audio", "input_audio": {"data": data,
                                                   "format": _AUDIO_FORMATS.get(mime, "wav")}}


def _prepare_message(m: dict[str, Any]) -> dict[str, Any]:
    changed: dict[str, Any] | None = None
    tcs = m.get("tool_calls")
    if tcs:
        if not m.get("content"):
            changed = dict(m)
            changed["content"] = None
        fixed = []
        dirty = False
        for tc in tcs:
            fn = tc.get("function") if isinstance(tc, dict) else None
            if isinstance(fn, dict) and not isinstance(fn.get("arguments"), str):
                tc = {**tc, "function": {**fn, "arguments":
                                         orjson.dumps(fn.get("arguments") or {}).decode()}}
                dirty = True
            elif isinstance(tc, dict) and "function" not in tc and "name" in tc:
                args = tc.get("arguments")
                tc = {"id": tc.get("id", ""), "type": "function", "function": {
                    "name": tc["name"],
                    "arguments": args if isinstance(args, str)
                    else orjson.dumps(args or {}).decode()}}
                dirty = True
            fixed.append(tc)
        if dirty:
            changed = changed or dict(m)
            changed["tool_calls"] = fixed
    content = m.get("content")
    if isinstance(content, list) and any(
            isinstance(b, dict) and b.get("type") in ("audio", "audio_url") for b in content):
        changed = changed or dict(m)
        changed["content"] = [_audio_block(b) if isinstance(b, dict)
                              and b.get("type") in ("audio", "audio_url") else b
                              for b in content]
    return changed if changed is not None else m


def prepare_request(request: dict[str, Any], model: str = "") -> dict[str, Any]:
    """Apply §4.2 on a shallow copy: source model for empty/AUTO, defaults, message shapes."""
    req = dict(request)
    if model and (not req.get("model") or req.get("model") == "AUTO"):
        req["model"] = model
    if req.get("temperature") is None:
        req["temperature"] = 0.7
    if not req.get("max_tokens"):
        req["max_tokens"] = 4096
    req.setdefault("disable_thinking", False)
    extra = req.pop("extra_body", None)
    if isinstance(extra, dict):
        for k, v in extra.items():
            req.setdefault(k, v)
    msgs = req.get("messages")
    if isinstance(msgs, list):
        req["messages"] = [_prepare_message(m) if isinstance(m, dict) else m for m in msgs]
    return req
