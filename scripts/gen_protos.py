"""Generate Python code from protos/ into gen/ (run by `make gen`).

Deterministic: gen/maka is wiped and rebuilt, every package directory gets an empty
``__init__.py``, and the output depends only on protos/ and the pinned grpcio-tools and
mypy-protobuf versions. ``--check`` regenerates into a temporary directory and exits 1 when
gen/ differs (the drift check run by `make test`).
"""

from __future__ import annotations

import filecmp
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


def _tree(path: Path) -> dict[str, Path]:
    return {str(p.relative_to(path)): p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts}


def check() -> int:
    """Return 0 when gen/ matches a fresh generation, else print the differing files and return 1."""
    with tempfile.TemporaryDirectory() as tmp:
        fresh = Path(tmp)
        generate(fresh)
        want, have = _tree(fresh / "maka"), _tree(GEN / "maka")
        drift = sorted(set(want) ^ set(have))
        drift += sorted(k for k in set(want) & set(have) if not filecmp.cmp(want[k], have[k], shallow=False))
        if drift:
            print("gen/ drifted from protos/ (run `make gen` and commit):", *drift, sep="\n  ", file=sys.stderr)
            return 1
    print("gen/ matches protos/")
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--check"]:
        raise SystemExit(check())
    generate(GEN)
