"""One line for what went wrong in a Spark command, instead of a Java or Python stack trace.

Spark reports a failure as a Py4JJavaError whose text is the whole Java stack (hundreds of
lines), an AnalysisException with an error class, a PythonException carrying a worker's
traceback, or a PySparkRuntimeError when the JVM never started; pyarrow.fs reports S3/HDFS
failures as multi-line OSErrors. `describe(exc)` finds the line that names the fault and adds
what to do; the command line prints it as `crcmerkle: error: ...` (`--debug` shows everything).
This module imports neither pyspark nor pyarrow: it recognises them by class name.
"""

from __future__ import annotations

import re
import socket
from typing import List, Optional
from urllib.parse import urlsplit

from spark_udfs.uri import redact

__all__ = ["describe", "check_master", "MasterError", "TableError"]

_JAVA_EXC = re.compile(
    r"^(?:Caused by: )?((?:[a-z][\w$]*\.)+[A-Z][\w$]*(?:Exception|Error))"
    r"(?::\s*(.*))?$"
)
_PY_EXC = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Interrupt)):\s*(.*)$")
_LIMIT = 400


class MasterError(ValueError):
    """--master names no Spark master this machine can reach or Spark can parse."""


class TableError(ValueError):
    """A table read as a scan's that no scan writes (its message is the one line)."""


def _short(text: str) -> str:
    """One line of at most _LIMIT characters, any URI's credentials removed (a pyarrow or
    Spark message quotes the URI it was given, e.g. "Cannot parse URI: 's3://KEY:SECRET@...'")."""
    text = " ".join(redact(text).split())
    return text if len(text) <= _LIMIT else text[: _LIMIT - 3] + "..."


def _lines(text: str) -> List[str]:
    return [ln.strip() for ln in str(text).splitlines() if ln.strip()]


#: top-level module -> the extra that installs it
_EXTRA_OF = {
    "pyarrow": "spark",
    "pyspark": "spark",
    "pandas": "spark",
    "py4j": "spark",
    "numpy": "spark",
    "google": "ozone",
    "rocksdict": "ozone",
    "yaml": "ozone",
}
#: crcmerkle is on no package index: it installs from its clone (README.md, docs/getting-started.md)
_INSTALL_FROM_CLONE = 'pip install ".[{extra}]" in the crcmerkle clone'
_NO_MODULE = re.compile(r"No module named '([\w.]+)'")


def _module_hint(message: str) -> str:
    """For a Spark task that failed on a missing module: which extra the executors' Python
    needs (the Ozone layout's rocksdict/protobuf/PyYAML are the `ozone` extra)."""
    m = _NO_MODULE.search(message)
    extra = _EXTRA_OF.get(m.group(1).split(".")[0]) if m else None
    if extra is None:
        return ""
    return (
        f"; the executors' Python lacks the {extra!r} extra: install crcmerkle there as "
        f'pip install ".[{extra}]" from the clone, or a wheel: pip install '
        f'"$(ls dist/crcmerkle-*.whl)[{extra}]" (docs/operations/cluster.md)'
    )


def _hint(message: str) -> str:
    """What to do, for the faults a user can fix."""
    hint = _module_hint(message)
    if hint:
        return hint
    m = message.lower()
    if "nosuchbucket" in m or "bucket does not exist" in m or "no_such_bucket" in m:
        return "; the S3 bucket does not exist (check the URI)"
    if (
        "invalidaccesskeyid" in m
        or "signaturedoesnotmatch" in m
        or "access denied" in m
        or "accessdenied" in m
        or "access_denied" in m
        or "forbidden" in m
        or "expiredtoken" in m
        or "credentials" in m
    ):
        return (
            "; check the credentials (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or "
            "the profile) and the bucket's permissions"
        )
    if "aws error" in m and (
        "network_connection" in m or "could not connect" in m or "couldn't connect" in m
    ):
        return "; the S3 endpoint cannot be reached (check endpoint_override and the network)"
    if "path does not exist" in m or "path_not_found" in m:
        return "; check the path"
    if "unable_to_infer_schema" in m or "unable to infer schema" in m:
        return (
            "; this is not a scan's output: give the -o directory of 'crcmerkle spark "
            "scan' (it holds chunks/, blocks/, containers/, errors/)"
        )
    return ""


def _java_line(text: str) -> Optional[str]:
    """The deepest `Caused by:` Java exception line of a Java stack, else the first one."""
    found: List[str] = []
    for ln in _lines(text):
        m = _JAVA_EXC.match(ln)
        if m:
            cls, msg = m.group(1), (m.group(2) or "").strip()
            if cls == "py4j.protocol.Py4JJavaError":
                continue
            found.append(f"{cls.rsplit('.', 1)[-1]}: {msg}" if msg else cls.rsplit(".", 1)[-1])
    if not found:
        return None
    # A SparkException "Job aborted due to stage failure" wraps the real cause, listed later.
    for line in reversed(found):
        if "Job aborted" not in line and "Task failed" not in line:
            return line
    return found[-1]


def _python_worker_line(text: str) -> Optional[str]:
    """The last `SomeError: message` line of a Python worker's traceback."""
    last = None
    for ln in _lines(text):
        m = _PY_EXC.match(ln)
        if m and not m.group(1).startswith(("org.", "java.", "scala.")):
            last = f"{m.group(1).rsplit('.', 1)[-1]}: {m.group(2)}"
    return last


def describe(exc: BaseException) -> Optional[str]:
    """One line for an exception from Spark, py4j, pyarrow or a missing dependency; None
    when the exception is none of those (the caller decides)."""
    names = {c.__name__ for c in type(exc).__mro__}
    module = type(exc).__module__ or ""
    text = str(exc)
    if isinstance(exc, TableError):
        return _short(text)
    if isinstance(exc, ImportError):
        missing = (getattr(exc, "name", None) or "").split(".")[0]
        extra = _EXTRA_OF.get(missing)
        if extra == "spark":
            return (
                f"the Spark commands need {missing}, which is not installed: "
                f"{_INSTALL_FROM_CLONE.format(extra='spark')}"
            )
        if extra == "ozone":
            return (
                f"Ozone datanode volumes need {exc.name or missing}, which is not "
                f"installed: {_INSTALL_FROM_CLONE.format(extra='ozone')}"
            )
        return None
    if "PythonException" in names:
        line = _python_worker_line(text)
        return _short(f"a Spark task failed: {line or _lines(text)[0]}" + _module_hint(text))
    if "Py4JJavaError" in names:
        java = getattr(exc, "java_exception", None)
        line = None
        try:  # the JVM's own string of the exception, when the gateway is still up
            line = _java_line(str(java.toString())) if java is not None else None
        except Exception:  # noqa: BLE001 - the JVM may be gone; parse the text instead
            line = None
        line = line or _java_line(text) or (_lines(text) or ["Spark failed"])[0]
        if "PythonException" in line or "Traceback" in text and "Python worker" in text:
            py = _python_worker_line(text)
            if py:
                line = f"a Spark task failed: {py}"
        return _short(line + _hint(text))
    if module.startswith("pyspark") or "PySparkException" in names:
        lines = _lines(text)
        line = lines[0] if lines else type(exc).__name__
        if "JAVA_GATEWAY_EXITED" in line:
            line += " (the JVM did not start: check --master, --conf and the Java runtime)"
        return _short(line + _hint(text))
    if module.startswith("py4j"):
        return _short(
            "lost the connection to Spark's JVM (it stopped or was killed): "
            + ((_lines(text) or [type(exc).__name__])[0])
        )
    if (
        module.startswith("pyarrow")
        or isinstance(exc, OSError)
        and ("aws error" in text.lower() or "hdfs" in text.lower())
    ):
        lines = _lines(text)
        return _short((lines[0] if lines else type(exc).__name__) + _hint(text))
    return None


_MASTER_FORMS = re.compile(
    r"^(local(\[(\*|\d+)(,\s*\d+)?\])?|local-cluster\[\d+,\s*\d+,\s*\d+\]"
    r"|yarn|spark://.+|k8s://.+|mesos://.+)$"
)


def check_master(master: Optional[str], timeout: float = 5.0) -> None:
    """Refuse at once a --master Spark would reject or could not reach: a malformed URL
    (Spark's JVM exits with JAVA_GATEWAY_EXITED), or a standalone / Kubernetes master that
    refuses connections (Spark retries for over a minute before giving up). Raises
    MasterError with one line; None means nothing to check (spark-submit's master)."""
    if master is None:
        return
    if not _MASTER_FORMS.match(master.strip()):
        raise MasterError(
            f"--master {master!r}: not a Spark master URL (local[*], local[N], "
            "spark://HOST:PORT, yarn, k8s://https://HOST:PORT)"
        )
    targets: List[tuple] = []
    if master.startswith("spark://"):
        for hostport in master[len("spark://") :].split(","):  # standalone HA: h1:p1,h2:p2
            host, _, port = hostport.strip().rpartition(":")
            if not host or not port.isdigit():
                raise MasterError(f"--master {master!r}: a standalone master is spark://HOST:PORT")
            targets.append((host.strip("[]"), int(port)))
    elif master.startswith("k8s://"):
        url = urlsplit(
            master[len("k8s://") :]
            if "://" in master[len("k8s://") :]
            else "https://" + master[len("k8s://") :]
        )
        if url.hostname:
            targets.append((url.hostname, url.port or (443 if url.scheme == "https" else 80)))
    if not targets:
        return
    errors = []
    for host, port in targets:
        try:
            socket.create_connection((host, port), timeout=timeout).close()
            return
        except OSError as exc:
            errors.append(f"{host}:{port}: {exc.strerror or exc}")
    raise MasterError(
        f"cannot reach the Spark master {master} ({'; '.join(errors)}): is it "
        "running, and is --master right?"
    )
