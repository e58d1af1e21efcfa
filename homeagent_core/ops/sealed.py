"""Passphrase encryption of a backup archive as a stream (ChaCha20-Poly1305, key from scrypt).

Layout: the magic ``HABKENC1``, a little-endian ``u32`` header length, a JSON header (KDF and
its parameters, a random salt, a key check value, the chunk size and a few public facts about
the archive: format, creation time, HomeAgent version), then chunks. Each chunk is a ``u32``
length and the sealed bytes of up to ``chunk`` plaintext bytes; its nonce is the chunk's
counter plus a flag marking the last chunk, and the header is its associated data. So a
reordered, dropped, truncated or altered chunk and an edited header all fail to open, and a
wrong passphrase is told apart from damage by the check value (a second scrypt output half).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import struct
from typing import IO, Any

from homeagent_core.ops.errors import BackupError, WrongPassphrase

__all__ = ["MAGIC", "SealedError", "SealedReader", "SealedWriter", "WrongPassphrase", "read_public_header"]

MAGIC = b"HABKENC1"
CHUNK = 1 << 20
_SCRYPT = {"n": 1 << 15, "r": 8, "p": 1}
_MAX_HEADER = 64 * 1024


class SealedError(BackupError):
    """An encrypted archive is damaged, truncated or was altered."""


def _derive(passphrase: str, salt: bytes, n: int, r: int, p: int) -> tuple[bytes, bytes]:
    from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

    out = Scrypt(salt=salt, length=64, n=n, r=r, p=p).derive(passphrase.encode("utf-8"))
    return out[:32], hashlib.sha256(out[32:]).digest()


def _nonce(counter: int, last: bool) -> bytes:
    return struct.pack(">QI", counter, 1 if last else 0)


class SealedWriter:
    """A write-only file object that seals what is written to ``raw`` chunk by chunk."""

    def __init__(self, raw: IO[bytes], passphrase: str, public: dict[str, Any]) -> None:
        from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

        salt = os.urandom(16)
        key, check = _derive(passphrase, salt, **_SCRYPT)
        header = {
            "kdf": "scrypt",
            **_SCRYPT,
            "salt": base64.b64encode(salt).decode(),
            "check": base64.b64encode(check).decode(),
            "cipher": "chacha20poly1305",
            "chunk": CHUNK,
            "public": public,
        }
        self._header = json.dumps(header, sort_keys=True).encode()
        self._raw = raw
        self._aead = ChaCha20Poly1305(key)
        self._buffer = bytearray()
        self._counter = 0
        raw.write(MAGIC + struct.pack("<I", len(self._header)) + self._header)

    def write(self, data: bytes) -> int:
        self._buffer += data
        while len(self._buffer) > CHUNK:
            self._seal(bytes(self._buffer[:CHUNK]), last=False)
            del self._buffer[:CHUNK]
        return len(data)

    def _seal(self, plain: bytes, *, last: bool) -> None:
        sealed = self._aead.encrypt(_nonce(self._counter, last), plain, self._header)
        self._raw.write(struct.pack("<I", len(sealed)) + sealed)
        self._counter += 1

    def finish(self) -> None:
        """Seal what is left as the last chunk (an archive without it reads as truncated)."""
        self._seal(bytes(self._buffer), last=True)
        self._buffer.clear()

    def flush(self) -> None:
        self._raw.flush()


def _read_header(raw: IO[bytes], what: str) -> tuple[bytes, dict[str, Any]]:
    magic = raw.read(len(MAGIC))
    if magic != MAGIC:
        raise SealedError(f"{what} is not an encrypted HomeAgent backup")
    size_bytes = raw.read(4)
    if len(size_bytes) < 4:
        raise SealedError(f"{what} is truncated (its header is incomplete)")
    (size,) = struct.unpack("<I", size_bytes)
    if size > _MAX_HEADER:
        raise SealedError(f"{what} is damaged (header length {size} is not plausible)")
    header = raw.read(size)
    try:
        parsed = json.loads(header)
        if not isinstance(parsed, dict):
            raise ValueError("not an object")
    except ValueError as exc:
        raise SealedError(f"{what} is damaged (its header is not valid JSON: {exc})") from None
    return header, parsed


def read_public_header(raw: IO[bytes], what: str) -> dict[str, Any]:
    """The public facts an encrypted archive carries (readable without the passphrase)."""
    _, header = _read_header(raw, what)
    public = header.get("public")
    return public if isinstance(public, dict) else {}


class SealedReader:
    """A read-only file object that opens and checks the chunks of a sealed archive in order."""

    def __init__(self, raw: IO[bytes], passphrase: str, what: str) -> None:
        from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

        self._what = what
        self._header, header = _read_header(raw, what)
        try:
            salt = base64.b64decode(header["salt"])
            check = base64.b64decode(header["check"])
            n, r, p = int(header["n"]), int(header["r"]), int(header["p"])
            self.public: dict[str, Any] = dict(header.get("public") or {})
        except (KeyError, TypeError, ValueError) as exc:
            raise SealedError(f"{what} is damaged (header field {exc} is missing or wrong)") from None
        if header.get("kdf") != "scrypt" or header.get("cipher") != "chacha20poly1305":
            raise SealedError(f"{what} uses {header.get('kdf')}/{header.get('cipher')}, which this version cannot open")
        if n > 1 << 22 or r > 32 or p > 16:
            raise SealedError(f"{what} asks for scrypt parameters n={n} r={r} p={p}, beyond what is plausible")
        key, expected = _derive(passphrase, salt, n, r, p)
        if not hmac.compare_digest(expected, check):
            raise WrongPassphrase(f"the passphrase does not open {what}; check the variable named by --passphrase-env")
        self._raw = raw
        self._aead = ChaCha20Poly1305(key)
        self._buffer = b""
        self._pos = 0
        self._counter = 0
        self._done = False

    def _next(self) -> None:
        from cryptography.exceptions import InvalidTag

        size_bytes = self._raw.read(4)
        if len(size_bytes) < 4:
            raise SealedError(f"{self._what} is truncated (it ends before its last chunk)")
        (size,) = struct.unpack("<I", size_bytes)
        if size > CHUNK + 16:
            raise SealedError(f"{self._what} is damaged (chunk {self._counter} claims {size} bytes)")
        sealed = self._raw.read(size)
        if len(sealed) < size:
            raise SealedError(f"{self._what} is truncated (chunk {self._counter} is cut short)")
        for last in (False, True):
            try:
                plain = self._aead.decrypt(_nonce(self._counter, last), sealed, self._header)
            except InvalidTag:
                continue
            self._counter += 1
            self._buffer += plain
            if last:
                if self._raw.read(1):
                    raise SealedError(f"{self._what} has data after its last chunk (it was altered)")
                self._done = True
            return
        raise SealedError(f"{self._what} is damaged or was altered (chunk {self._counter} fails its check)")

    def read(self, size: int = -1) -> bytes:
        while not self._done and (size < 0 or len(self._buffer) - self._pos < size):
            if self._pos:
                self._buffer, self._pos = self._buffer[self._pos :], 0
            self._next()
        end = len(self._buffer) if size < 0 else min(len(self._buffer), self._pos + size)
        out = self._buffer[self._pos : end]
        self._pos = end
        return out
