"""pluggy's call semantics for one plugin's impl of a sequential hook, with ``await`` inside.

The host calls the lifecycle and registration hooks once per plugin (each call gets that
plugin's own scoped SDK or registry, and a failing plugin must not stop the others), so a
hook "call" here is: every wrapper of the hook around one plugin's plain impl. Wrappers keep
pluggy's meaning exactly:

* ``@hookimpl(wrapper=True)`` — a generator: code before ``yield`` runs first, ``yield``
  returns the call's result (the list of non-None results, as pluggy gives it) or raises the
  impl's exception; the generator's return value replaces the result, an exception it raises
  replaces the outcome.
* ``@hookimpl(hookwrapper=True)`` (old style) — ``outcome = yield`` receives a
  :class:`pluggy.Result`; ``outcome.force_result(...)`` / ``force_exception(...)`` change it.
* ``tryfirst`` / ``trylast`` wrappers are outermost / innermost, as in pluggy.

pluggy's own ``_multicall`` cannot await between a wrapper's setup and its teardown, so for
``async def`` impls (``startup``, ``shutdown``, ``on_event``) the teardown would see a bare
coroutine; :func:`acall_wrapped` awaits the impl first, so wrappers see the real result or
exception. Sync registration hooks go through pluggy itself (``PluginManager.subset_hook_caller``).
"""

from __future__ import annotations

import inspect
from collections.abc import Generator, Mapping, Sequence
from typing import Any, cast

import pluggy

__all__ = ["acall_wrapped", "is_wrapper"]

_Teardown = Generator[None, Any, Any]


def is_wrapper(impl: pluggy.HookImpl) -> bool:
    """True for new-style (``wrapper=True``) and old-style (``hookwrapper=True``) wrappers."""
    return bool(impl.wrapper or impl.hookwrapper)


def _args(impl: pluggy.HookImpl, kwargs: Mapping[str, Any]) -> list[Any]:
    try:
        return [kwargs[name] for name in impl.argnames]
    except KeyError as exc:
        raise pluggy.HookCallError(f"hook call must provide argument {exc.args[0]!r}") from exc


def _wrapfail(gen: Generator[Any, Any, Any], impl: pluggy.HookImpl, message: str) -> RuntimeError:
    return RuntimeError(f"wrapper {impl.function.__qualname__} of plugin {impl.plugin_name!r} {message}")


def _old_style(impl: pluggy.HookImpl, gen: _Teardown) -> _Teardown:
    """Present an old-style hookwrapper as a new-style one (what pluggy itself does)."""
    try:
        value = yield
        outcome: pluggy.Result[Any] = pluggy.Result(value, None)
    except BaseException as exc:  # handed to the wrapper, re-raised by get_result
        outcome = pluggy.Result(None, exc)
    try:
        gen.send(outcome)
    except StopIteration:
        pass
    else:
        raise _wrapfail(gen, impl, "has a second yield")
    finally:
        gen.close()
    return outcome.get_result()


def _setup(impl: pluggy.HookImpl, kwargs: Mapping[str, Any]) -> _Teardown:
    gen = cast(_Teardown, impl.function(*_args(impl, kwargs)))  # pluggy checked it is a generator
    try:
        next(gen)
    except StopIteration:
        raise _wrapfail(gen, impl, "did not yield") from None
    if impl.hookwrapper:
        adapter = _old_style(impl, gen)
        next(adapter)  # runs up to the adapter's own ``yield``
        return adapter
    return gen


async def acall_wrapped(
    wrappers: Sequence[pluggy.HookImpl], impl: pluggy.HookImpl, kwargs: Mapping[str, Any]
) -> Any:
    """Call ``impl`` (sync or ``async def``) inside ``wrappers`` (in pluggy's list order).

    Returns the list of non-None results (``[]`` or ``[value]``) unless a wrapper replaced
    it; raises the impl's or a wrapper's exception.
    """
    teardowns: list[tuple[pluggy.HookImpl, _Teardown]] = []
    result: Any = []
    exception: BaseException | None = None
    try:
        for wrapper in reversed(wrappers):  # pluggy calls its list from the end: tryfirst outermost
            teardowns.append((wrapper, _setup(wrapper, kwargs)))
        value = impl.function(*_args(impl, kwargs))
        if inspect.isawaitable(value):
            value = await value
        result = [] if value is None else [value]
    except BaseException as exc:  # given to the wrappers, re-raised below
        exception = exc
    for wrapper, gen in reversed(teardowns):
        try:
            if exception is not None:
                gen.throw(exception)
            else:
                gen.send(result)
            gen.close()
        except StopIteration as stop:
            result, exception = stop.value, None
            continue
        except BaseException as exc:  # the wrapper replaced the outcome
            exception = exc
            continue
        exception = _wrapfail(gen, wrapper, "has a second yield")
    if exception is not None:
        raise exception
    return result
