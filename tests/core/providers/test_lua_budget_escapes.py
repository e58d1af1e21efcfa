"""Code a script controls never runs outside the instruction budget, and every call ends.

Each script below loops forever in a place the count hook used to miss (an error object's
``__tostring``, a finalizer, ``__pairs`` in the header copy, a backtracking pattern). The call
runs in a helper thread and the test only asserts that it *finished* within a generous bound.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from homeagent_core.providers.adapter import AdapterScript
from homeagent_core.providers.lua import LuaSandbox, LuaScriptError

SPIN = "function() while true do end end"


def finished(fn: Callable[..., Any], *args: Any, wait: float = 60.0) -> dict[str, Any]:
    """Run ``fn`` in a thread; fail unless it ends within ``wait`` seconds (its value or error)."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn(*args)
        except BaseException as exc:  # handed to the test
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(wait)
    assert not thread.is_alive(), "the Lua call never finished: script code ran outside its budget"
    return box


@pytest.fixture
def sandbox() -> LuaSandbox:
    return LuaSandbox("t", instruction_limit=2_000_000, memory_limit=16 * 1024 * 1024)


def run(sandbox: LuaSandbox, body: str) -> dict[str, Any]:
    fn = sandbox.load(f"return function() {body} end", "evil")
    return finished(sandbox.call, fn)


def test_error_object_tostring_runs_under_the_budget(sandbox: LuaSandbox) -> None:
    out = run(sandbox, f"error(setmetatable({{}}, {{__tostring = {SPIN}}}))")
    assert isinstance(out.get("error"), LuaScriptError)
    assert out["error"].kind == "instructions"


def test_error_object_tostring_is_reported(sandbox: LuaSandbox) -> None:
    out = run(sandbox, 'error(setmetatable({}, {__tostring = function() return "custom failure" end}))')
    assert out["error"].kind == "runtime" and "custom failure" in out["error"].reason


def test_gc_metamethods_are_refused(sandbox: LuaSandbox) -> None:
    out = run(sandbox, f"""
        setmetatable({{}}, {{__gc = {SPIN}}})
        local keep = {{}} for i = 1, 200000 do keep[i % 50] = {{i}} end
        return "ok" """)
    # the old sandbox accepted the finalizer; it then ran (unhooked) at the next collection
    finished(sandbox.load, "local t = {} for i = 1, 300000 do t[i % 50] = {i} end", "gc")
    assert isinstance(out.get("error"), LuaScriptError)
    assert "__gc" in out["error"].reason


def test_json_metatables_cannot_get_a_finalizer(sandbox: LuaSandbox) -> None:
    out = run(sandbox, f"""
        local mt = getmetatable(json.array())
        if type(mt) == "table" then mt.__gc = {SPIN} end
        local keep = {{}} for i = 1, 200000 do keep[i % 50] = json.array() end
        return tostring(mt) """)
    assert "error" in out or out["value"] == "json.array"
    assert run(sandbox, "return json.encode(json.array())")["value"] == "[]"
    assert run(sandbox, "return json.encode(json.decode('[]'))")["value"] == "[]"


def test_header_copy_ignores_pairs_metamethods(sandbox: LuaSandbox) -> None:
    table = sandbox.load(f'return setmetatable({{a = "1"}}, {{__pairs = {SPIN}}})', "headers")
    out = finished(sandbox.string_table, table)
    assert out.get("value") == {"a": "1"}


def test_adapter_headers_with_pairs_metamethod_load(tmp_path: Any) -> None:
    source = f"""
        return {{ name = "evil",
          headers = setmetatable({{["X-Ok"] = "yes"}}, {{__pairs = {SPIN}}}),
          build_headers = function(meta) return setmetatable({{}}, {{__pairs = {SPIN}}}) end,
          transform_request = function(raw) return raw end }}"""
    out = finished(lambda: AdapterScript(source, instruction_limit=2_000_000))
    script = out["value"]
    assert script.headers == {"X-Ok": "yes"}
    assert finished(script.build_headers, {"model": "m"})["value"] == {}


@pytest.mark.parametrize(
    "body",
    [
        'return (string.rep("a", 3000)):find(string.rep("a-", 3) .. "b")',
        'return string.match(string.rep("a", 3000), string.rep("a*", 3) .. "b")',
        'return (string.rep("a", 3000)):gsub(string.rep("a-", 3) .. "b", "")',
        'for m in string.gmatch(string.rep("a", 3000), "a-a-a-b") do end',
        'return string.rep("a", 3000000):find(string.rep("a", 100000) .. "b", 1, true)',
        'return string.rep("(", 200000):gsub("%b()", "")',
    ],
)
def test_backtracking_patterns_are_stopped(sandbox: LuaSandbox, body: str) -> None:
    out = run(sandbox, body)
    assert isinstance(out.get("error"), LuaScriptError)
    assert out["error"].kind == "instructions"


def test_patterns_still_work(sandbox: LuaSandbox) -> None:
    body = """
        local s = string.rep('{"model": "gpt-x", "n": 1} ', 3000)
        local words = {}
        for w in ("alpha beta  gamma"):gmatch("%a+") do words[#words + 1] = w end
        local big = s:match('"model":%s*"(.-)"')
        local fixed = ("a,b;c"):gsub("[,;]", " ")
        return table.concat(words, "/") .. "|" .. big .. "|" .. fixed .. "|" .. tostring(s:find("gpt-x", 1, true))"""
    assert run(sandbox, body)["value"] == "alpha/beta/gamma|gpt-x|a b c|12"


def test_wall_clock_limit_stops_a_call() -> None:
    sandbox = LuaSandbox("slow", instruction_limit=10**15, time_limit=0.2)
    out = run(sandbox, "while true do end")
    assert out["error"].kind == "time"
    assert run(sandbox, "return 1")["value"] == 1


def test_close_releases_a_waiting_caller() -> None:
    sandbox = LuaSandbox("stuck", instruction_limit=10**15, time_limit=3600)
    fn = sandbox.load(f"return {SPIN}", "spin")
    started = threading.Event()

    def call() -> Any:
        started.set()
        return sandbox.call(fn)

    box: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: box.update(finished(call)), daemon=True)
    thread.start()
    assert started.wait(10)
    sandbox.close()
    thread.join(70)
    assert box["error"].kind == "closed"
    with pytest.raises(LuaScriptError, match="closed"):
        sandbox.call(fn)


def test_interrupt_stops_the_running_call_only() -> None:
    sandbox = LuaSandbox("int", instruction_limit=10**15, time_limit=3600)
    fn = sandbox.load(f"return {SPIN}", "spin")
    box: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: box.update(finished(sandbox.call, fn)), daemon=True)
    thread.start()
    while not box and thread.is_alive():
        sandbox.interrupt()
        thread.join(0.05)
    thread.join(70)
    assert box["error"].kind == "closed"
    assert run(sandbox, "return 2")["value"] == 2


def test_a_dropped_sandbox_is_freed_with_its_worker_thread() -> None:
    import gc
    import weakref

    sandbox = LuaSandbox("dropped")
    assert sandbox.call(sandbox.load("return function() return 3 end", "x")) == 3
    worker = sandbox._worker.thread
    ref = weakref.ref(sandbox)
    del sandbox
    gc.collect()
    assert ref() is None, "the runtime kept its own sandbox alive"
    worker.join(60)
    assert not worker.is_alive()


def test_a_call_into_an_idle_runtime_runs_on_the_callers_thread() -> None:
    import logging

    threads: list[int] = []

    class Record(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            threads.append(record.thread or 0)

    logger = logging.getLogger("homeagent.test.lua-inline")
    logger.addHandler(Record())
    logger.setLevel(logging.INFO)
    sandbox = LuaSandbox("inline", logger=logger)
    fn = sandbox.load('return function() log("info", "here") return 7 end', "inline")
    assert sandbox.call(fn) == 7
    assert threads == [threading.get_ident()], "the call was handed to another thread"


def test_close_releases_a_caller_whose_script_waits_in_a_blocking_host_function() -> None:
    sandbox = LuaSandbox("host", instruction_limit=10**15, time_limit=3600)
    entered, release = threading.Event(), threading.Event()

    def wait_for_io() -> str:
        entered.set()
        release.wait(120)  # an HTTP request the server holds open, say
        return "late"

    fn = sandbox.load(f"return function(io) io() return ({SPIN})() end", "host")
    box: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: box.update(finished(sandbox.call, fn, sandbox.blocking(wait_for_io))),
                              daemon=True)
    thread.start()
    try:
        assert entered.wait(30)
        sandbox.close()
        thread.join(30)
        assert not thread.is_alive(), "close() did not release the caller"
        assert box["error"].kind == "closed"
    finally:
        release.set()


def test_calls_from_several_threads_take_turns_and_close_releases_the_waiting_one() -> None:
    sandbox = LuaSandbox("busy", instruction_limit=10**15, time_limit=3600)
    square = sandbox.load("return function(x) local s = 0 for i = 1, 200 do s = s + i end return x * x end", "sq")
    results: dict[int, list[int]] = {}

    def many(k: int) -> None:
        results[k] = [sandbox.call(square, k * 1000 + i) for i in range(300)]

    threads = [threading.Thread(target=many, args=(k,), daemon=True) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert results == {k: [(k * 1000 + i) ** 2 for i in range(300)] for k in range(4)}

    spin = sandbox.load(f"return {SPIN}", "spin")
    running: dict[str, Any] = {}
    first = threading.Thread(target=lambda: running.update(finished(sandbox.call, spin)), daemon=True)
    first.start()
    deadline = time.monotonic() + 30
    while sandbox._owner is None and time.monotonic() < deadline:  # until the spin holds the runtime
        first.join(0.01)
    assert sandbox._owner is not None
    queued: dict[str, Any] = {}
    second = threading.Thread(target=lambda: queued.update(finished(sandbox.call, square, 3)), daemon=True)
    second.start()
    while not sandbox._worker.pending and time.monotonic() < deadline:  # until it waits on the worker
        second.join(0.01)
    assert sandbox._worker.pending
    sandbox.close()
    second.join(30)
    first.join(30)
    assert not second.is_alive() and not first.is_alive()
    assert queued["error"].kind == "closed" and running["error"].kind == "closed"
