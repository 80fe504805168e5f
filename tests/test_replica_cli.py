"""`crcmerkle generate`, `scan` and `reconcile` end to end through the CLI."""

from __future__ import annotations

import json
import os

from merkle.cli import main
from merkle.replica.crcmerkle.layout import container_paths
from merkle.replica.lock import ReplicaLock


def run(capsys, *argv):
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


SMALL = [
    "--block-size",
    "48KiB",
    "--chunk-size",
    "16KiB",
    "--bytes-per-checksum",
    "4KiB",
    "--blocks",
    "3-5",
    "--layout",
    "crcmerkle",
]  # the layout crcmerkle reconcile repairs


def test_generate_scan_reconcile(tmp_path, capsys):
    root = tmp_path / "c"
    st, out, _ = run(capsys, "generate", root, "--seed", "3", *SMALL)
    assert st == 0 and "manifest" in out
    manifest = json.loads((root / "manifest.json").read_text())

    st, out, _ = run(capsys, "scan", root, "--json", "--no-write")
    assert st == 1
    doc = json.loads(out)
    for r in doc["replicas"]:
        rel = os.path.relpath(r["path"], root)
        got = sorted((e["error"], e["block_id"] or 0, e["offset"] or 0) for e in r["errors"])
        want = sorted(
            (e["error"], e["block_id"] or 0, e["offset"] or 0)
            for e in manifest["expected_errors"][rel]
        )
        assert got == want

    st, out, _ = run(capsys, "scan", root)  # text, stores trees
    assert st == 1 and "CORRUPT_CHUNK" in out and "scanned 12 replicas" in out

    st, out, _ = run(capsys, "reconcile", "--all", "--dry-run", root)
    assert "pull block" in out and "bytes" in out

    st, out, _ = run(capsys, "reconcile", "--all", root)
    assert st == 1  # the default mix holds an unrepairable chunk (bitflip-all)
    assert "unrepaired" in out and "no readable peer has a healthy copy" in out

    st, out, _ = run(capsys, "reconcile", "--all", "--json", root)
    doc = json.loads(out)
    assert all(not p["copied"] for r in doc["results"] for p in r["peers"])


def test_scan_clean_exit_zero_and_workers_rate(tmp_path, capsys):
    root = tmp_path / "c"
    run(capsys, "generate", root, "--faults", "none", "--containers", "2", *SMALL)
    st, out, _ = run(capsys, "scan", root / "dn0", root / "dn1", "--workers", "2", "--rate", "1GiB")
    assert st == 0 and "ERRORS" not in out


def test_reconcile_pair_and_errors(tmp_path, capsys):
    root = tmp_path / "c"
    run(capsys, "generate", root, "--faults", "bitflip", "--containers", "1", "--seed", "2", *SMALL)
    m = json.loads((root / "manifest.json").read_text())
    target = root / m["faults"][0]["replicas"][0]
    peers = [root / r for r in m["containers"]["1"]["replicas"] if root / r != target]
    st, out, _ = run(capsys, "reconcile", target, *peers, "--dry-run")
    assert st == 1 and "corrupt_chunk" in out  # repairs pending
    with ReplicaLock(container_paths(target)):
        st, _, err = run(capsys, "reconcile", target, *peers)
        assert st == 2 and err.count("\n") == 1 and "locked" in err
        st, _, err = run(capsys, "scan", target)
        assert st == 2 and "locked" in err
    st, out, _ = run(capsys, "reconcile", target, *peers)
    assert st == 0 and "copied 1 chunks" in out
    st, _, err = run(capsys, "reconcile", target)
    assert st == 2 and "PEER" in err
    st, _, err = run(capsys, "scan", tmp_path / "nowhere")
    assert st == 2 and err.startswith("crcmerkle: error:")
    (tmp_path / "empty").mkdir()
    st, _, err = run(capsys, "scan", tmp_path / "empty")
    assert st == 2 and "no container replica" in err


def test_generate_usage_errors(tmp_path, capsys):
    st, _, err = run(capsys, "generate", tmp_path / "x", "--faults", "gremlins")
    assert st == 2 and "unknown fault type" in err
    st, _, err = run(capsys, "generate", tmp_path / "y", "--replicas", "5")
    assert st == 2 and "datanodes" in err
    st, _, err = run(capsys, "generate", tmp_path / "z", "--blocks", "5-2")
    assert st == 2
