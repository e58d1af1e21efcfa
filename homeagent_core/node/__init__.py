"""The device side of remote devices (``homeagent node``): join a home daemon, serve capabilities.

It runs with only the base install on Linux, macOS and Termux: one outbound WebSocket to the
daemon (``client.py``), capabilities the device's owner enables in ``<node data>/node.json``
(``config.py``, ``caps.py``, ``caps_media.py``). It imports nothing but the SDK and the standard
library (plus ``websockets`` and ``httpx`` of the base install); the home side is
``homeagent_core/builtin/nodes*.py``.
"""
