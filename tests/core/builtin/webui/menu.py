"""What the web UI's menu shows, read in one go.

The page hides the owner's entries once it has read the session, so a list of visible links
read one by one can change under the reader; these helpers read the whole menu at once and wait,
bounded, until it is what the test expects.
"""

from __future__ import annotations

from typing import Any

#: The pages of the visible menu links, as Playwright's ``:visible`` sees them (a box, not hidden).
_SHOWN = """() => [...document.querySelectorAll('nav a')]
    .filter(a => { const r = a.getBoundingClientRect();
                   return r.width > 0 && r.height > 0 && getComputedStyle(a).visibility !== 'hidden'; })
    .map(a => a.dataset.page)"""


async def menu_shown(page: Any) -> list[str]:
    """The pages the menu shows now."""
    shown: list[str] = await page.evaluate(_SHOWN)
    return shown


async def menu_settles_on(page: Any, expected: list[str], timeout_ms: float = 30_000) -> None:
    """Wait until the menu shows exactly ``expected`` (in order); fail saying what it shows."""
    from playwright.async_api import TimeoutError as PlaywrightTimeout

    try:
        await page.wait_for_function(f"(want) => JSON.stringify(({_SHOWN})()) === JSON.stringify(want)",
                                     arg=expected, timeout=timeout_ms)
    except PlaywrightTimeout:
        raise AssertionError(f"the menu shows {await menu_shown(page)}, not {expected}") from None
