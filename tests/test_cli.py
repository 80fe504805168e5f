"""The `crcmerkle` command line: checksum output against the library, errors, bench."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

import merkle
from merkle.cli import main

ROOT = Path(__file__).resolve().parents[1]
BUF = 4096  # small read buffer (hidden --buffer-size) so multi-read files stay tiny


def run_cli(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run(
        [sys.executable, "-m", "merkle", *args],
        input=stdin,
        capture_output=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )


def data_of(size: int, seed: int = 0) -> bytes:
    return np.random.default_rng(seed).bytes(size) if size else b""


@pytest.fixture
def files(tmp_path: Path) -> dict:
    sizes = {"empty": 0, "one": 1, "small": 1000, "exact": 2 * BUF, "big": 3 * BUF + 17}
    out = {}
    for name, size in sizes.items():
        path = tmp_path / f"{name}.bin"
        path.write_bytes(data_of(size, seed=size))
        out[name] = path
    return out


def one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("crcmerkle: error: "), err
    assert "Traceback" not in err
    return lines[0]


# --- checksum ---------------------------------------------------------------------------------


@pytest.mark.parametrize("algorithm", ["crc32c", "crc32"])
def test_checksum_text_matches_library(files, capsys, algorithm):
    paths = [str(p) for p in files.values()]
    assert main(["checksum", "--algorithm", algorithm, "--buffer-size", str(BUF), *paths]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    lines = out.splitlines()
    assert len(lines) == len(paths)
    for line, path in zip(lines, paths):
        data = Path(path).read_bytes()
        expected = merkle.crc32c(data) if algorithm == "crc32c" else zlib.crc32(data)
        assert line == f"{expected:08x}  {len(data)}  {path}"


def test_checksum_default_buffer_and_known_value(tmp_path, capsys):
    path = tmp_path / "check.txt"
    path.write_bytes(b"123456789")
    assert main(["checksum", str(path)]) == 0
    assert capsys.readouterr().out == f"e3069283  9  {path}\n"  # the CRC-32C check value
    assert main(["checksum", "-a", "crc32", str(path)]) == 0
    assert capsys.readouterr().out == f"cbf43926  9  {path}\n"  # the CRC-32 check value


@pytest.mark.parametrize("bpc", [1, 512, 1000, BUF, 3 * BUF])
def test_checksum_windows_match_checksum_windows(files, capsys, bpc):
    paths = [str(p) for p in files.values()]
    assert main(["checksum", "-b", str(bpc), "--buffer-size", str(BUF), *paths]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(paths)
    for line, path in zip(lines, paths):
        data = Path(path).read_bytes()
        expected = [f"{v:08x}" for v in merkle.checksum_windows(data, bpc).tolist()]
        name, _, values = line.partition("  ")
        assert name == path
        assert values.split() == expected


def test_checksum_windows_crc32(files, capsys):
    path = str(files["big"])
    assert main(["checksum", "-a", "crc32", "-b", "1KiB", "--buffer-size", "3000", path]) == 0
    data = files["big"].read_bytes()
    expected = [f"{zlib.crc32(data[i : i + 1024]):08x}" for i in range(0, len(data), 1024)]
    assert capsys.readouterr().out.split()[1:] == expected


def test_checksum_json(files, capsys):
    paths = [str(files["big"]), str(files["empty"])]
    assert main(["checksum", "--format", "json", "--buffer-size", str(BUF), *paths]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [d["name"] for d in doc] == paths
    for d, path in zip(doc, paths):
        data = Path(path).read_bytes()
        assert d["value"] == merkle.crc32c(data)
        assert d["checksum"] == f"{merkle.crc32c(data):08x}"
        assert d["size"] == len(data)
        assert d["algorithm"] == "crc32c"


def test_checksum_windows_json(files, capsys):
    path = str(files["big"])
    assert main(["checksum", "--format", "json", "-b", "512", "--buffer-size", str(BUF), path]) == 0
    (doc,) = json.loads(capsys.readouterr().out)
    data = files["big"].read_bytes()
    assert doc["bytes_per_checksum"] == 512
    assert doc["size"] == len(data)
    assert doc["checksums"] == [f"{v:08x}" for v in merkle.checksum_windows(data, 512).tolist()]


def test_checksum_stdin_subprocess():
    data = data_of(3 * BUF + 5, seed=9)
    proc = run_cli("checksum", "--buffer-size", str(BUF), "-", stdin=data)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.decode() == f"{merkle.crc32c(data):08x}  {len(data)}  -\n"
    proc = run_cli("checksum", "-b", "1000", "--buffer-size", str(BUF), stdin=data)  # no FILE
    assert proc.returncode == 0, proc.stderr
    expected = " ".join(f"{v:08x}" for v in merkle.checksum_windows(data, 1000).tolist())
    assert proc.stdout.decode() == f"-  {expected}\n"


def test_checksum_subprocess_file(files):
    proc = run_cli("checksum", str(files["small"]))
    assert proc.returncode == 0
    data = files["small"].read_bytes()
    assert proc.stdout.decode() == f"{merkle.crc32c(data):08x}  1000  {files['small']}\n"
    assert proc.stderr == b""


def test_missing_file_exit_2_others_processed(files, tmp_path, capsys):
    missing = tmp_path / "nope.bin"
    good = files["small"]
    assert main(["checksum", str(missing), str(good)]) == 2
    out, err = capsys.readouterr()
    line = one_error_line(err)
    assert str(missing) in line and "No such file" in line
    assert out == f"{merkle.crc32c(good.read_bytes()):08x}  1000  {good}\n"


def test_missing_file_subprocess(tmp_path):
    proc = run_cli("checksum", str(tmp_path / "nope.bin"))
    assert proc.returncode == 2
    assert proc.stdout == b""
    one_error_line(proc.stderr.decode())


def test_directory_is_an_error(tmp_path, capsys):
    assert main(["checksum", str(tmp_path)]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "directory" in line.lower()


@pytest.mark.skipif(
    hasattr(os, "geteuid") and os.geteuid() == 0, reason="root reads files whatever their mode"
)
def test_permission_denied(tmp_path, capsys):
    path = tmp_path / "secret"
    path.write_bytes(b"x")
    path.chmod(0)
    assert main(["checksum", str(path)]) == 2
    assert "Permission denied" in one_error_line(capsys.readouterr().err)


@pytest.mark.parametrize("bad", ["0", "-1", "-4096", "abc", "1.5", ""])
def test_bad_bytes_per_checksum(files, capsys, bad):
    assert main(["checksum", "--bytes-per-checksum", bad, str(files["small"])]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert "--bytes-per-checksum" in one_error_line(err)


def test_bad_bytes_per_checksum_subprocess(files):
    proc = run_cli("checksum", "--bytes-per-checksum", "0", str(files["small"]))
    assert proc.returncode == 2
    assert proc.stdout == b""
    one_error_line(proc.stderr.decode())


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["nosuchcommand"],
        ["checksum", "--bogus"],
        ["checksum", "--algorithm", "md5", "x"],
        ["checksum", "--format", "xml", "x"],
        ["bench", "--seconds", "0"],
        ["bench", "--sizes", "huge"],
    ],
)
def test_usage_errors(capsys, argv):
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    one_error_line(err)


def test_help_documents_format(capsys):
    assert main(["checksum", "--help"]) == 0
    out = capsys.readouterr().out
    assert "<crc>  <size>  <name>" in out
    assert "--bytes-per-checksum" in out
    assert "--buffer-size" not in out  # hidden test knob
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "checksum" in out and "bench" in out


def test_version(capsys):
    assert main(["--version"]) == 0
    assert merkle.__version__ in capsys.readouterr().out


def test_subcommand_registry():
    """Other modules add subcommands with an add_parser(subparsers) function."""
    import merkle.cli as cli

    assert "merkle.cli.checksum" in cli.COMMAND_MODULES
    assert "merkle.cli.bench" in cli.COMMAND_MODULES
    parser = cli.build_parser()
    args = parser.parse_args(["checksum", "x"])
    assert callable(args.func)


# --- bench -------------------------------------------------------------------------------------

QUICK = [
    "bench",
    "--seconds",
    "0.002",
    "--runs",
    "1",
    "--sizes",
    "64",
    "4KiB",
    "--windows-bytes",
    "256KiB",
    "--window",
    "16KiB",
]


def test_bench_table(capsys):
    assert main(QUICK) == 0
    out = capsys.readouterr().out
    assert "CRC-32C" in out and "CRC-32 (IEEE)" in out and "windows" in out
    assert "crcmerkle" in out and "ours/best peer" in out and "zlib" in out
    assert "4 KiB" in out and "64 B" in out


def test_bench_json(capsys):
    assert main(QUICK + ["--json", "--no-windows"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["backend"] == merkle.backend()
    cases = {(r["case"], r["implementation"], r["size"]) for r in doc["results"]}
    assert ("crc32c", "crcmerkle", 64) in cases
    assert ("crc32", "zlib", 4096) in cases
    assert all(r["gbps"] > 0 for r in doc["results"])


def test_bench_subprocess():
    proc = run_cli(*QUICK, "--no-windows")
    assert proc.returncode == 0, proc.stderr
    assert b"crcmerkle" in proc.stdout


def test_bench_plot(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    png = tmp_path / "bench.png"
    assert main(QUICK + ["--no-windows", "--plot", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert str(png) in capsys.readouterr().out


def test_bench_plot_without_matplotlib(tmp_path, capsys, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "matplotlib" else real(name, *a),
    )
    assert main(QUICK + ["--plot", str(tmp_path / "x.png")]) == 2
    assert "matplotlib" in one_error_line(capsys.readouterr().err)


def test_benchmarking_helpers():
    from merkle.cli import benchmarking as bm

    assert bm.parse_size("64") == 64
    assert bm.parse_size("4KiB") == bm.parse_size("4k") == 4096
    assert bm.parse_size("4MiB") == 4 << 20
    with pytest.raises(ValueError):
        bm.parse_size("lots")
    assert bm.format_size(16384) == "16 KiB"
    names = [i.name for i in bm.implementations("crc32c")]
    assert names[0] == "crcmerkle"
    assert [i.name for i in bm.implementations("crc32")][:2] == ["crcmerkle", "zlib"]
