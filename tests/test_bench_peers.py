"""The peer registry of `crcmerkle bench` and bench/ (merkle.cli.benchmarking): a peer that
computes another CRC is left out with its reason, never timed as if it were a peer."""

from __future__ import annotations

import zlib

import pytest

import merkle
from merkle.cli import benchmarking as bm


@pytest.fixture
def fresh_registry(monkeypatch):
    monkeypatch.setattr(bm, "_cache", {})
    yield
    bm._cache.clear()


def test_check_values():
    assert merkle.crc32c(b"123456789") == bm.CHECK_VALUES["crc32c"]
    assert zlib.crc32(b"123456789") == bm.CHECK_VALUES["crc32"]
    assert merkle.crc64nvme(b"123456789") == bm.CHECK_VALUES["crc64nvme"]


def test_wrong_crc_is_left_out(monkeypatch, fresh_registry):
    monkeypatch.setattr(
        bm,
        "_PEERS",
        (
            bm._PeerSpec("zlib-as-crc32c", "crc32c", "zlib", "crc32"),  # CRC-32, not CRC-32C
            bm._PeerSpec("zlib", "crc32", "zlib", "crc32"),
            bm._PeerSpec("nosuchpeer", "crc64nvme", "crcmerkle_no_such_module", "f"),
        ),
    )
    assert [i.name for i in bm.implementations("crc32c")] == ["crcmerkle"]
    assert [i.name for i in bm.implementations("crc32")] == ["crcmerkle", "zlib"]
    assert [i.name for i in bm.implementations("crc64nvme")] == ["crcmerkle"]
    missing = bm.missing_peers()
    assert "computes another CRC" in missing["zlib-as-crc32c (crc32c)"]
    assert "nosuchpeer" in missing
    note = bm.peer_note()
    assert "not installed (columns omitted): nosuchpeer" in note
    assert "left out: zlib-as-crc32c (crc32c): computes another CRC" in note


def test_hasher_peer_as_one_shot(monkeypatch, fresh_registry):
    """A hashlib-style peer (crc64fast has only that) is timed as new + update + digest."""
    import hashlib

    monkeypatch.setattr(
        bm, "_PEERS", (bm._PeerSpec("md5-as-crc64", "crc64nvme", "hashlib", "md5", hasher=True),)
    )
    assert bm.implementations("crc64nvme")[1:] == []  # md5 is not CRC-64/NVME
    assert "computes another CRC" in bm.missing_peers()["md5-as-crc64 (crc64nvme)"]
    one_shot = bm._one_shot(hashlib.md5)
    assert one_shot(b"abc") == int.from_bytes(hashlib.md5(b"abc").digest(), "big")
