"""What a rights check costs: ``ToolPolicy.decide`` per tool call, on a real ``people.db``.

The registry is a real SQLite file with 10 persons (an owner, adults, children, a person with
their own policy); each call of ``decide`` reads the person and the role from it, as the kernel
does for every tool call. ``offered`` (the tools offered to one turn, 60 names) is shown too.

``--json`` keys: ``policy_check_us`` (median µs of one ``decide`` for an adult: their own
policy, then the role's deny / ask / allow lists), ``policy_offered_60_us`` (one ``offered``
over 60 tool names). Other scripts import :func:`measure_policy_check_us`.
"""

from __future__ import annotations

import itertools
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import Row, arg_parser, emit, time_calls

from homeagent_core.agent.people import PeopleRegistry
from homeagent_core.agent.policy import ToolPolicy
from homeagent_sdk.types import Principal

__all__ = ["measure_policy_check_us", "registry_of_ten"]

#: Tool names a turn sees: admin tools (ask / deny), everyday ones (allow), unknown ones.
TOOLS = [
    "cmd_run", "config_set", "plugin_install", "term_start", "memory_purge", "persona_set", "llm_set_source",
    "timer_set", "timer_list", "reminder_add", "web_fetch", "web_search", "memory_recall", "memory_commit",
    "doc_query", "knowledge_search", "output_send__qq", "files_read", "files_write", "home_light_on",
]
OFFERED = [f"{name}_{i}" if i else name for i in range(3) for name in TOOLS]  # 60 names


def registry_of_ten(data_dir: Path) -> PeopleRegistry:
    """10 persons in ``data_dir``: the owner, 4 adults (one with their own policy), 4 children, a teen."""
    people = PeopleRegistry.open(data_dir)
    people.ensure_owner("root")
    people.set_role_policy("teen", allow="*", deny="cmd_run,term_*", ask="files_*")
    for i in range(4):
        people.add(f"adult{i}", "adult")
        people.add(f"child{i}", "child")
    people.add("teen", "teen")
    people.set_policy("adult0", deny="home_*", ask="web_fetch")
    return people


def _per_call_us(fn: object, calls: int) -> list[float]:
    """Per-call µs of ``calls`` calls, in batches of 100 so the clock's resolution does not count."""
    batch = 100
    samples = []
    for _ in range(max(1, calls // batch)):
        t0 = time.perf_counter()
        for _ in range(batch):
            fn()  # type: ignore[operator]
        samples.append((time.perf_counter() - t0) / batch * 1e6)
    return samples


def measure_policy_check_us(n: int = 20000) -> float:
    """The median µs of one ``ToolPolicy.decide`` for an adult with their own policy, over ``n`` calls."""
    with tempfile.TemporaryDirectory() as tmp:
        people = registry_of_ten(Path(tmp))
        try:
            policy = ToolPolicy(people)
            adult = Principal(person="adult0", role="adult", door="webui")
            tools = itertools.cycle(TOOLS)
            for _ in range(200):
                policy.decide(adult, next(tools))
            return float(statistics.median(_per_call_us(lambda: policy.decide(adult, next(tools)), n)))
        finally:
            people.close()


def main() -> None:
    parser = arg_parser(__doc__ or "")
    parser.add_argument("--calls", type=int, default=20000, help="decide() calls per principal")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        people = registry_of_ten(Path(tmp))
        policy = ToolPolicy(people)
        tools = itertools.cycle(TOOLS)
        for label, principal in (
            ("owner", Principal(person="root", role="owner", door="cli")),
            ("adult with own policy", Principal(person="adult0", role="adult", door="webui")),
            ("child", Principal(person="child1", role="child", door="qq", account="1")),
            ("teen (added role)", Principal(person="teen", role="teen", door="webui")),
            ("guest", Principal(person="", role="guest", door="qq", account="9")),
        ):
            samples = _per_call_us(lambda p=principal: policy.decide(p, next(tools)), args.calls)
            rows.append(Row.of(f"decide: {label}", [s / 1e6 for s in samples], scale=1e6, unit="µs"))
        adult = Principal(person="adult1", role="adult", door="webui")
        offered = time_calls(lambda: policy.offered(adult, OFFERED), repeat=2000)
        rows.append(Row.of("offered: adult, 60 tools", offered, scale=1e6, unit="µs"))
        people.close()
    figures = {
        "policy_check_us": measure_policy_check_us(args.calls),
        "policy_offered_60_us": rows[-1]["p50 (µs)"],
    }
    emit(args, "Tool policy (people.db, 10 persons)", rows, figures)


if __name__ == "__main__":
    main()
