"""Generate Python code from protos/ into gen/ and into the Python client (run by `make gen`).

Deterministic: gen/maka is wiped and rebuilt, every package directory gets an empty
``__init__.py``, and the output depends only on protos/ and the pinned grpcio-tools and
mypy-protobuf versions. The same output is copied into the client package
(``clients/python/src/maka_client/_gen/maka``) with its imports rewritten to that package, so the
client installs without the services; both register the same descriptors, so they coexist in one
process. ``--check`` regenerates into a temporary directory and exits 1 when gen/ or the client's
copy differs (the drift check run by `make test`).
"""

from __future__ import annotations

import filecmp
import re
import shutil
import sys
import tempfile
from pathlib import Path

import grpc_tools
from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent
PROTOS = ROOT / "protos"
GEN = ROOT / "gen"
BIN = Path(sys.executable).parent
CLIENT_GEN = ROOT / "clients" / "python" / "src" / "maka_client" / "_gen"
CLIENT_PACKAGE = "maka_client._gen.maka"
_PY_IMPORT = re.compile(r"^(from|import) maka\.", re.MULTILINE)
_PYI_NAME = re.compile(r"(?<![\w.\"'])maka\.(?=(?:form|interaction|broker)\.v1\b)")


def generate(out: Path) -> None:
    """Run protoc with the Python, gRPC and mypy-protobuf plugins for every .proto into ``out``."""
    target = out / "maka"
    if target.exists():
        shutil.rmtree(target)
    out.mkdir(parents=True, exist_ok=True)
    files = sorted(str(p.relative_to(PROTOS)) for p in PROTOS.rglob("*.proto"))
    include = Path(grpc_tools.__file__).parent / "_proto"
    args = [
        "grpc_tools.protoc",
        f"-I{PROTOS}",
        f"-I{include}",
        f"--plugin=protoc-gen-mypy={BIN / 'protoc-gen-mypy'}",
        f"--plugin=protoc-gen-mypy_grpc={BIN / 'protoc-gen-mypy_grpc'}",
        f"--python_out={out}",
        f"--grpc_python_out={out}",
        f"--mypy_out={out}",
        f"--mypy_grpc_out=async_only:{out}",
        *files,
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    for directory in [target, *sorted(p for p in target.rglob("*") if p.is_dir())]:
        (directory / "__init__.py").touch()
    (target / "py.typed").touch()


def client_copy(gen: Path, out: Path) -> None:
    """Copy ``gen/maka`` to ``out/maka`` with imports of ``maka.`` rewritten to :data:`CLIENT_PACKAGE`."""
    target = out / "maka"
    if target.exists():
        shutil.rmtree(target)
    out.mkdir(parents=True, exist_ok=True)
    (out / "__init__.py").touch()
    for source in sorted(p for p in (gen / "maka").rglob("*") if "__pycache__" not in p.parts):
        dest = target / source.relative_to(gen / "maka")
        if source.is_dir():
            dest.mkdir(parents=True, exist_ok=True)
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        text = source.read_text()
        if source.suffix == ".py":
            text = _PY_IMPORT.sub(lambda m: f"{m.group(1)} {CLIENT_PACKAGE}.", text)
        elif source.suffix == ".pyi":
            text = _PYI_NAME.sub(f"{CLIENT_PACKAGE}.", text)
        dest.write_text(text)


def _tree(path: Path) -> dict[str, Path]:
    return {str(p.relative_to(path)): p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts}


def check() -> int:
    """Return 0 when gen/ matches a fresh generation, else print the differing files and return 1."""
    with tempfile.TemporaryDirectory() as tmp:
        fresh = Path(tmp)
        generate(fresh)
        client_copy(fresh, fresh / "client")
        drift: list[str] = []
        for label, want_dir, have_dir in (
            ("gen", fresh / "maka", GEN / "maka"),
            ("client", fresh / "client" / "maka", CLIENT_GEN / "maka"),
        ):
            want, have = _tree(want_dir), _tree(have_dir) if have_dir.exists() else {}
            names = sorted(set(want) ^ set(have))
            names += sorted(k for k in set(want) & set(have) if not filecmp.cmp(want[k], have[k], shallow=False))
            drift += [f"{label}: {name}" for name in names]
        if drift:
            print("generated code drifted (run `make gen` and commit):", *drift, sep="\n  ", file=sys.stderr)
            return 1
    print("gen/ and the Python client's stubs match protos/")
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--check"]:
        raise SystemExit(check())
    generate(GEN)
    client_copy(GEN, CLIENT_GEN)
