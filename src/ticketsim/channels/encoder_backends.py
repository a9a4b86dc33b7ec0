"""Faster inference for a sentence encoder: its transformer exported to ONNX (optionally int8), cached once, loaded
through sentence-transformers' own backend support (SentenceTransformer(folder, backend="onnx")) on `threads` threads.

Why we export the graph ourselves: sentence-transformers exports through Optimum's exporter, and the Optimum releases
that install beside transformers 5 fail on its new attention masks; the loading and the int8 quantization are
sentence-transformers' own. The graph is the Hugging Face transformer (inputs input_ids, attention_mask, token_type_ids,
output last_hidden_state, the layout Optimum's ORTModelForFeatureExtraction reads); pooling and normalisation stay
sentence-transformers' modules, so the vectors are the same computation as torch's.

An exported model is a complete sentence-transformers folder under <encoder_cache>/exported/, named by the source's name, a
hash of its files (a fine-tuned encoder saved again under the same path is exported again) and the backend: made once
in a scratch folder and renamed into place, so a folder that exists is complete and a second load exports nothing.
"""
from __future__ import annotations

import hashlib
import os
import platform
import tempfile
from pathlib import Path
from typing import Any, Literal

Backend = Literal["torch", "onnx", "openvino"]
Quantize = Literal["none", "int8"]
ONNX_FILE = "onnx/model.onnx"


class BackendError(ValueError):
    """A backend that cannot run here: names what is missing and how to install it."""


def int8_config() -> str:
    """sentence-transformers' dynamic int8 preset for this CPU: avx2 runs on every x86-64 CPU of the last decade."""
    return "arm64" if platform.machine().lower() in ("arm64", "aarch64") else "avx2"


def int8_file() -> str:
    # sentence-transformers names the file after the weights' dtype (quint8 for avx2, qint8 for arm64) and the preset
    dtype = "qint8" if int8_config() == "arm64" else "quint8"
    return f"onnx/model_{dtype}_{int8_config()}.onnx"


def source_digest(source: str) -> str:
    """12 hex digits of the source folder's files (relative paths and bytes), skipping exports kept inside it; a hub
    name (no folder) by its name."""
    digest = hashlib.sha256()
    folder = Path(source)
    if not folder.is_dir():
        digest.update(source.encode())
        return digest.hexdigest()[:12]
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        relative = path.relative_to(folder).as_posix()
        if relative.split("/", 1)[0] in ("onnx", "openvino"):
            continue
        digest.update(relative.encode() + b"\0")
        with open(path, "rb") as stream:
            for block in iter(lambda: stream.read(1 << 24), b""):
                digest.update(block)
    return digest.hexdigest()[:12]


def backend_label(backend: Backend, quantize: Quantize) -> str:
    """What runs an encoder, as recorded with it: torch, onnx, onnx-int8."""
    return backend if quantize == "none" else f"{backend}-{quantize}"


def exports_in(encoder_cache: str | Path) -> Path:
    """The folder of `encoder_cache` (sentence.cache) that keeps exports: the backends' (exported_folder) and the bundles' query
    exports (channels.onnx_encoder.kept_export)."""
    return Path(encoder_cache).expanduser() / "exported"


def exported_folder(source: str, backend: Backend, quantize: Quantize, encoder_cache: str | Path) -> Path:
    """Where the export of `source` for this backend and quantization lives (made or not)."""
    # the folder and its parent: a package ships its model in a folder named just 'model'
    stem = "-".join(Path(source).parts[-2:]) if Path(source).is_dir() else source.replace("/", "--")
    return exports_in(encoder_cache) / f"{stem}-{source_digest(source)}-{backend_label(backend, quantize)}"


def require_onnx() -> None:
    try:
        import onnxruntime  # noqa: F401
        import optimum.onnxruntime  # noqa: F401
    except ImportError as error:
        raise BackendError(f"sentence.backend: onnx needs onnxruntime and Optimum's ONNX Runtime models ({error.name} is "
                           f"missing, a core dependency): reinstall with pip install -e .") from None


def export_onnx(model: Any, target: Path) -> None:
    """Write the transformer of a loaded SentenceTransformer as an ONNX graph with dynamic batch and length axes."""
    import torch

    transformer = model[0].auto_model
    # The traced graph must not depend on transformers' SDPA mask helpers: eager attention exports to plain ops.
    transformer.config._attn_implementation = "eager"
    sample = model.tokenizer(["an example", "a somewhat longer example text"], padding=True, return_tensors="pt")
    names = [name for name in ("input_ids", "attention_mask", "token_type_ids") if name in sample]

    class Graph(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.transformer = transformer

        def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
            return self.transformer(**dict(zip(names, inputs))).last_hidden_state

    axes = {"batch_size": 0, "sequence_length": 1}
    dynamic = {name: {i: axis for axis, i in axes.items()} for name in [*names, "last_hidden_state"]}
    target.parent.mkdir(parents=True, exist_ok=True)
    with torch.no_grad():
        torch.onnx.export(Graph().eval(), tuple(sample[name] for name in names), str(target), input_names=names,
                          output_names=["last_hidden_state"], dynamic_axes=dynamic, opset_version=17, dynamo=False)


def export(source: str, backend: Backend, quantize: Quantize, encoder_cache: str | Path, local_files_only: bool) -> Path:
    """The exported folder of `source`, made once (see the module docstring)."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.backend import export_dynamic_quantized_onnx_model

    folder = exported_folder(source, backend, quantize, encoder_cache)
    if folder.is_dir():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder.parent, prefix=".export-") as scratch:
        made = Path(scratch) / "model"
        model = SentenceTransformer(source, device="cpu", local_files_only=local_files_only)   # traced for the CPU runtime
        model.save(str(made))
        export_onnx(model, made / ONNX_FILE)
        if quantize == "int8":
            onnx_model = SentenceTransformer(str(made), device="cpu", backend="onnx", local_files_only=True)
            export_dynamic_quantized_onnx_model(onnx_model, int8_config(), str(made))
        os.replace(made, folder)
    return folder


def load_backend(source: str, backend: Backend, quantize: Quantize, threads: int, encoder_cache: str | Path,
                 local_files_only: bool, device: str = "cpu") -> tuple[Any, str]:
    """(a SentenceTransformer running `backend` with `threads` intra-op threads, the folder or hub name it was loaded
    from). Torch runs on `device` (resolved: ticketsim.device) and takes its threads from the caller's torch_threads at
    encoding time; an export runs on the CPU whatever `device` says: ONNX Runtime's CPU build is the one installed."""
    from sentence_transformers import SentenceTransformer

    if quantize not in ("none", "int8"):
        raise BackendError(f"sentence.quantize: {quantize!r} is not one of none, int8")
    if backend == "torch":
        if quantize != "none":
            raise BackendError("sentence.quantize: int8 needs sentence.backend: onnx (torch runs float32 here)")
        return SentenceTransformer(source, device=device, local_files_only=local_files_only), source
    if backend == "onnx":
        require_onnx()
        import onnxruntime

        options = onnxruntime.SessionOptions()
        # One op at a time, each on `threads` threads: the same budget as torch's, and no oversubscribed shared cores.
        options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
        folder = export(source, backend, quantize, encoder_cache, local_files_only)
        kwargs = {"session_options": options, "file_name": int8_file() if quantize == "int8" else ONNX_FILE}
        return SentenceTransformer(str(folder), device="cpu", backend="onnx", local_files_only=True, model_kwargs=kwargs), str(folder)
    if backend == "openvino":
        raise BackendError("sentence.backend: openvino: sentence-transformers runs it through optimum-intel, whose releases "
                           "require transformers<5.6 (ticketsim runs transformers 5): use sentence.backend: onnx")
    raise BackendError(f"sentence.backend: {backend!r} is not one of torch, onnx, openvino")
