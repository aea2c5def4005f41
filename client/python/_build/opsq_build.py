"""A PEP 517 build backend for the opsq client, in the standard library only.

The package is pure Python with no dependencies, so a wheel is a zip of opsq/ and its
metadata. Having the backend in the tree (pyproject.toml: backend-path) means that
``pip install ./client/python`` needs no package index, not even for setuptools.
Hooks: build_wheel, build_sdist, build_editable (PEP 660), and their metadata hooks.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import re
import tarfile
import time
import zipfile
from typing import Any, Dict, List, Optional, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "opsq"


def _project() -> Dict[str, str]:
    """Reads name, version, description and requires-python from pyproject.toml's
    [project] table (tomllib is Python 3.11+; these lines are simple)."""
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"^\[project\]\s*$(.*?)(?=^\[|\Z)", text, re.M | re.S)
    if not m:
        raise RuntimeError("pyproject.toml has no [project] table")
    out = {}
    for key in ("name", "version", "description", "requires-python"):
        km = re.search(r'^%s\s*=\s*"([^"]*)"' % re.escape(key), m.group(1), re.M)
        if not km:
            raise RuntimeError(f"pyproject.toml: [project] lacks {key}")
        out[key] = km.group(1)
    return out


def _metadata(p: Dict[str, str]) -> str:
    readme = ""
    path = os.path.join(ROOT, "README.md")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            readme = f.read()
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {p['name']}",
        f"Version: {p['version']}",
        f"Summary: {p['description']}",
        f"Requires-Python: {p['requires-python']}",
        "Classifier: Programming Language :: Python :: 3",
        "Classifier: Typing :: Typed",
    ]
    if readme:
        lines.append("Description-Content-Type: text/markdown")
        return "\n".join(lines) + "\n\n" + readme
    return "\n".join(lines) + "\n"


def _dist_info(p: Dict[str, str]) -> str:
    return f"{p['name']}-{p['version']}.dist-info"


def _package_files() -> List[Tuple[str, str]]:
    """(path in the archive, path on disk) of the package's files, sorted."""
    out = []
    base = os.path.join(ROOT, PACKAGE)
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if name.endswith((".py", ".typed")):
                disk = os.path.join(dirpath, name)
                out.append((os.path.relpath(disk, ROOT).replace(os.sep, "/"), disk))
    return out


def _wheel_meta_files(p: Dict[str, str]) -> List[Tuple[str, bytes]]:
    info = _dist_info(p)
    wheel = "Wheel-Version: 1.0\nGenerator: opsq_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    return [(f"{info}/METADATA", _metadata(p).encode("utf-8")), (f"{info}/WHEEL", wheel.encode("utf-8"))]


def _write_wheel(directory: str, files: List[Tuple[str, bytes]], p: Dict[str, str]) -> str:
    name = f"{p['name']}-{p['version']}-py3-none-any.whl"
    record = []
    stamp = (1980, 1, 1, 0, 0, 0)  # reproducible
    with zipfile.ZipFile(os.path.join(directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for arc, data in files:
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{arc},sha256={digest},{len(data)}")
            z.writestr(_zinfo(arc, stamp), data)
        rec_name = f"{_dist_info(p)}/RECORD"
        record.append(f"{rec_name},,")
        z.writestr(_zinfo(rec_name, stamp), ("\n".join(record) + "\n").encode("utf-8"))
    return name


def _zinfo(arc: str, stamp: Tuple[int, int, int, int, int, int]) -> zipfile.ZipInfo:
    zi = zipfile.ZipInfo(arc, stamp)
    zi.compress_type = zipfile.ZIP_DEFLATED
    zi.external_attr = 0o644 << 16
    return zi


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


# PEP 517 hooks.


def get_requires_for_build_wheel(config_settings: Optional[Dict[str, Any]] = None) -> List[str]:
    return []


def get_requires_for_build_sdist(config_settings: Optional[Dict[str, Any]] = None) -> List[str]:
    return []


def get_requires_for_build_editable(config_settings: Optional[Dict[str, Any]] = None) -> List[str]:
    return []


def prepare_metadata_for_build_wheel(metadata_directory: str, config_settings: Optional[Dict[str, Any]] = None) -> str:
    p = _project()
    info = os.path.join(metadata_directory, _dist_info(p))
    os.makedirs(info, exist_ok=True)
    for arc, data in _wheel_meta_files(p):
        with open(os.path.join(metadata_directory, arc), "wb") as f:
            f.write(data)
    return _dist_info(p)


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory: str, config_settings: Optional[Dict[str, Any]] = None, metadata_directory: Optional[str] = None) -> str:
    p = _project()
    files = [(arc, _read(disk)) for arc, disk in _package_files()]
    return _write_wheel(wheel_directory, files + _wheel_meta_files(p), p)


def build_editable(wheel_directory: str, config_settings: Optional[Dict[str, Any]] = None, metadata_directory: Optional[str] = None) -> str:
    p = _project()
    pth = (ROOT + "\n").encode("utf-8")
    return _write_wheel(wheel_directory, [(f"_{PACKAGE}_editable.pth", pth)] + _wheel_meta_files(p), p)


def build_sdist(sdist_directory: str, config_settings: Optional[Dict[str, Any]] = None) -> str:
    p = _project()
    base = f"{p['name']}-{p['version']}"
    name = base + ".tar.gz"
    files = [(arc, _read(disk)) for arc, disk in _package_files()]
    files.append(("pyproject.toml", _read(os.path.join(ROOT, "pyproject.toml"))))
    files.append(("_build/opsq_build.py", _read(os.path.abspath(__file__))))
    for extra in ("README.md",):
        if os.path.exists(os.path.join(ROOT, extra)):
            files.append((extra, _read(os.path.join(ROOT, extra))))
    files.append(("PKG-INFO", _metadata(p).encode("utf-8")))
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as t:
        for arc, data in files:
            ti = tarfile.TarInfo(f"{base}/{arc}")
            ti.size = len(data)
            ti.mtime = int(time.time())
            ti.mode = 0o644
            t.addfile(ti, io.BytesIO(data))
    return name
