"""The search API and ``lexray search`` against a real ``lexray evaluate`` output: splade-tiny over the first 200
SciFact documents (``data.max_docs``, in-process encoding: no Ray), all 300 test queries.

What could fail: the API's top-10 differing from evaluate's run file (another query encoding, another index, a
lost tie rule), fields of the wrong document, explanations that do not add up to the score, concurrent readers
seeing different results, `import lexray` pulling in torch, the CLI's formats."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

import lexray
from lexray import cli
from lexray.data.beir import iter_corpus, load_queries
from lexray.eval.runs import read_trec_run
from lexray.paths import REPO_ROOT

N_DOCS = 200


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    """One intra-op thread for the module: on a shared 2-core machine, two torch threads waiting on each other
    encoded 2.9 queries/s against 131 with one (docs/search.md); the results do not depend on it."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory, scifact_dir, splade_tiny_dir):
    """One evaluate run (exact backend) into a folder shared by the module's tests."""
    out = tmp_path_factory.mktemp("search") / "eval"
    rc = cli.main(["evaluate", "--model", str(splade_tiny_dir), "--dataset", str(scifact_dir), "--out", str(out),
                   "--set", f"data.max_docs={N_DOCS}", "--set", "encode.backend=local",
                   "--set", "encode.torch_threads=1"])
    assert rc == 0
    return out


@pytest.fixture(scope="module")
def evaluated_train(evaluated, scifact_dir):
    """The same evaluation on the 809 train queries: a copy of the module's shards (reused: no second encode)
    evaluated with ``--split train``, so the API can be checked on 1,109 queries against evaluate's run files."""
    import shutil

    out = evaluated.parent / "eval-train"
    shutil.copytree(evaluated / "shards", out / "shards")
    rc = cli.main(["evaluate", "--model", str(splade_tiny_of(evaluated)), "--dataset", str(scifact_dir), "--out",
                   str(out), "--split", "train", "--set", f"data.max_docs={N_DOCS}", "--set", "encode.backend=local",
                   "--set", "encode.torch_threads=1"])
    assert rc == 0
    return out


def splade_tiny_of(folder: Path) -> str:
    """The model the evaluated folder recorded."""
    import yaml

    return yaml.safe_load((folder / "config.resolved.yaml").read_text())["model"]["name_or_path"]


@pytest.fixture(scope="module")
def index(evaluated):
    with lexray.open_index(evaluated) as ix:
        yield ix


@pytest.fixture(scope="module")
def test_queries(scifact_dir):
    q = load_queries(scifact_dir, "test")
    assert len(q) == 300
    return q


def _top10(docs: dict[str, float]) -> list[tuple[str, float]]:
    """Best 10 as the run file orders them: score descending, then doc id."""
    return sorted(docs.items(), key=lambda kv: (-kv[1], kv[0]))[:10]


@pytest.mark.timeout(600)  # includes the module's evaluate runs (~30 s on a quiet 2-core machine)
def test_api_top10_equals_the_run_file_of_evaluate(index, evaluated, evaluated_train, test_queries, scifact_dir):
    """1,109 queries: the 300 test queries against evaluate's test run, the 809 train queries against the train
    run of the same index."""
    run = read_trec_run(evaluated / "run.test.trec")
    train_queries = load_queries(scifact_dir, "train")
    assert len(train_queries) == 809
    assert not set(train_queries) & set(test_queries)
    train_run = read_trec_run(evaluated_train / "run.train.trec")
    assert set(run) == set(test_queries) and set(train_run) == set(train_queries)
    run.update(train_run)
    qids = list(test_queries) + list(train_queries)
    # one batch per split, as evaluate encoded them
    hits = index.search(list(test_queries.values()), k=10) + index.search(list(train_queries.values()), k=10)
    assert len(hits) == len(qids) == 1109
    for qid, h in zip(qids, hits, strict=True):
        want = _top10(run[qid])
        got = _top10({x.doc_id: x.score for x in h})
        assert [d for d, _ in got] == [d for d, _ in want], qid  # same documents in the same order
        assert [s for _, s in got] == [s for _, s in want], qid  # bit-identical float32 scores
        assert [x.rank for x in h] == list(range(1, len(h) + 1))


@pytest.mark.timeout(120)
def test_hits_carry_the_documents_fields_and_explanations_add_up(index, scifact_dir):
    corpus = {d.doc_id: d for d in iter_corpus(scifact_dir, max_docs=N_DOCS)}
    hits = index.search("vitamin D deficiency and bone fractures", k=5, explain=True)
    assert len(hits) == 5
    for h in hits:
        assert h.title == corpus[h.doc_id].title and h.text == corpus[h.doc_id].text
        assert h.terms, h
        assert sum(t.contribution for t in h.terms) == pytest.approx(h.score, rel=1e-5)
        assert all(isinstance(t.token, str) and not t.token.startswith("#") for t in h.terms)
        assert all(t.text == t.token for t in h.terms)  # splade-tiny's WordPiece entries read as themselves
    # a precomputed vector gives the same hits as the text it came from
    ids, ws = index.encoder.encode_sparse(["vitamin D deficiency and bone fractures"], "query",
                                          batch_size=index.query_batch_size)
    again = index.search_vectors(ids[0], ws[0], k=5)
    assert [(h.doc_id, h.score) for h in again] == [(h.doc_id, h.score) for h in hits]
    with pytest.raises(ValueError, match="term id out of range"):
        index.search_vectors(np.array([index.vocab_size]), np.array([1.0]), k=5)


@pytest.mark.timeout(120)
def test_concurrent_readers_get_identical_results(index, test_queries):
    texts = list(test_queries.values())[:40]
    ids, ws = index.encode(texts)
    expected = [[(h.doc_id, h.score) for h in hs] for hs in index.search_vectors(ids, ws, k=10)]
    results: dict[int, list] = {}
    errors: list[BaseException] = []

    def reader(n: int) -> None:
        try:
            got = []
            for i in range(n % 3, len(texts), 3):  # different batches in different threads
                got.append((i, [(h.doc_id, h.score) for h in index.search_vectors(ids[i], ws[i], k=10)]))
            results[n] = got
        except BaseException as e:  # noqa: BLE001 - re-raised below
            errors.append(e)

    threads = [threading.Thread(target=reader, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(results) == 6
    for got in results.values():
        for i, hits in got:
            assert hits == expected[i]


def test_postings_stay_memory_mapped(index):
    s = index.searcher
    assert isinstance(s.postings_doc, np.memmap) and isinstance(s.postings_value, np.memmap)
    assert not s.postings_doc.flags.writeable


@pytest.mark.timeout(120)
def test_a_flipped_index_byte_is_refused_on_open_naming_the_file(evaluated, tmp_path, test_queries):
    """Issue 24: one flipped exponent bit in postings_weight.npy silently changed results; open_index verifies
    the files against stats.json's sha256 first, and ``verify=False`` skips the check."""
    import shutil

    from lexray.index.verify import IndexIntegrityError

    copy = tmp_path / "eval"
    shutil.copytree(evaluated, copy, ignore=shutil.ignore_patterns("shards"))
    weights = copy / "index" / "postings_weight.npy"
    raw = bytearray(weights.read_bytes())
    start = len(raw) - 4 * int(np.load(weights, mmap_mode="r").shape[0])  # after the .npy header
    raw[start + 4 * 100 + 3] ^= 0x40  # an exponent bit of the 101st float32 weight (little-endian: byte 3 of 4)
    weights.write_bytes(bytes(raw))
    with pytest.raises(IndexIntegrityError, match="postings_weight.npy"):
        lexray.open_index(copy)
    with lexray.open_index(copy, verify=False) as ix:  # opened as asked; the damage is the caller's risk
        assert ix.n_docs == N_DOCS


@pytest.mark.timeout(180)
def test_cli_formats_and_training_layout(capsys, evaluated, tmp_path):
    rc = cli.main(["search", "--index", str(evaluated), "--query", "vitamin D and bone fractures",
                   "--query", "smoking and lung cancer", "-k", "3", "--explain", "--explain-terms", "2"])
    out = capsys.readouterr()
    assert rc == 0
    assert sum(ln.startswith("query ") for ln in out.out.splitlines()) == 2
    explained = [ln.strip() for ln in out.out.splitlines() if "terms (query × document weight):" in ln]
    assert len(explained) == 6  # -k 3, two queries
    # at most two terms shown, the rest summed up (a 3-term hit would have said "+1 more term"); the hits of
    # these queries share more than two terms with them, so the summary is there
    assert all(ln.count("×") <= 3 for ln in explained) and any("more term" in ln for ln in explained), explained
    assert all(ln.count("×") == 3 for ln in explained if "more term" in ln), explained
    assert "queries/s" in out.err
    assert cli.main(["search", "--index", str(evaluated), "--query", "x", "--explain", "--explain-terms", "-1"]) != 0
    assert "--explain-terms must be >= 0" in capsys.readouterr().err
    assert cli.main(["search", "--index", str(evaluated), "--query", "x", "--query", " "]) != 0
    assert "--query 2 is empty" in capsys.readouterr().err
    rc = cli.main(["search", "--index", str(evaluated / "index"), "--query", "vitamin D", "--format", "json"])
    rec = json.loads(capsys.readouterr().out.strip())
    assert rc == 0 and rec["qid"] == "1" and len(rec["hits"]) == 10 and rec["hits"][0]["title"]
    # a training job's output: outputs/<name>/eval/trained/ is what gets searched
    train_out = tmp_path / "job"
    (train_out / "eval").mkdir(parents=True)
    (train_out / "eval" / "trained").symlink_to(evaluated)
    queries = tmp_path / "q.txt"
    queries.write_text("vitamin D\n\nsmoking and lung cancer\n")
    rc = cli.main(["search", "--index", str(train_out), "--queries", str(queries), "--format", "trec", "--k", "2"])
    lines = capsys.readouterr().out.strip().splitlines()
    assert rc == 0 and [ln.split()[0] for ln in lines] == ["1", "1", "3", "3"]
    assert [ln.split()[3] for ln in lines] == ["1", "2", "1", "2"]


@pytest.mark.timeout(180)
def test_cli_seismic_backend_keeps_stdout_a_run_says_what_it_builds_and_caches_it(capfd, evaluated, tmp_path):
    """--backend seismic builds its index before the first query (2 minutes on the default LACONIC job's 5,183
    dense documents): the CLI says so on standard error, --seismic-cache DIR keeps it for the next run, and
    pyseismic's own build log (printed by its Rust code to descriptor 1) stays out of a TREC run on stdout."""
    pytest.importorskip("seismic")
    args = ["search", "--index", str(evaluated), "--query", "vitamin D and bone fractures", "-k", "3",
            "--format", "trec"]
    assert cli.main(args) == 0
    exact = [ln.split()[:4] for ln in capfd.readouterr().out.strip().splitlines()]
    cache = tmp_path / "seismic"
    for done in ("built, saved to", "loaded from"):
        assert cli.main([*args, "--backend", "seismic", "--seismic-cache", str(cache)]) == 0
        out = capfd.readouterr()
        assert f"Seismic index of {N_DOCS} documents: loading it from {cache}" in out.err
        assert f"Seismic index {done} {cache}" in out.err, out.err[-2000:]
        # only the run's lines (no "Building the index..."); 200 documents: no posting list reaches Seismic's
        # n_postings (3,500), and its top 3 are exact search's documents here (scores within float round-off)
        lines = out.out.strip().splitlines()
        assert [ln.split()[:4] for ln in lines] == exact and all(ln.endswith(" lexray-seismic") for ln in lines)
    assert len(list(cache.glob("*.index.seismic"))) == 1 and not list(cache.glob(".*"))


def test_explanation_shows_the_largest_terms_and_what_the_rest_add_up_to():
    from lexray.commands.search import _explanation
    from lexray.search.api import MatchedTerm

    terms = (MatchedTerm(1, "Ġbone", 2.0, 3.0, "bone"), MatchedTerm(2, "Ġvitamin", 1.0, 2.0, "vitamin"),
             MatchedTerm(3, "ĠD", 1.0, 1.0, "D"), MatchedTerm(4, "Ġx", 0.5, 2.0, ""))  # 6 + 2 + 1 + 1 = 10
    assert _explanation(terms, 2) == ("terms (query × document weight): bone 2.00×3.00, vitamin 1.00×2.00 "
                                      "(+2 more terms: 20 % of the score)")
    assert _explanation(terms, 3).endswith("D 1.00×1.00 (+1 more term: 10 % of the score)")
    assert _explanation(terms, 0) == _explanation(terms, 4)  # 0: every term, nothing summed up
    assert _explanation(terms, 0).endswith("Ġx 0.50×2.00")  # no text: the vocabulary entry
    assert _explanation((), 10) == "terms (query × document weight): none"


def test_readable_tokens_decode_byte_level_bpe_and_keep_wordpiece(bpe_tokenizer_dir, splade_tiny_dir):
    from transformers import AutoTokenizer

    from lexray.search.api import readable_tokens

    bpe = AutoTokenizer.from_pretrained(bpe_tokenizer_dir)
    toks = bpe.convert_ids_to_tokens(bpe("the bone — 骨折 x", add_special_tokens=False)["input_ids"])
    assert "Ġbone" in toks and "ĠâĢĶ" in toks
    texts = dict(zip(toks, readable_tokens(bpe, toks), strict=True))
    assert texts["Ġbone"] == "bone" and texts["ĠâĢĶ"] == "—" and "骨折" in texts.values()
    assert readable_tokens(bpe, ["Ġ"]) == ["Ġ"]  # a lone space reads as nothing: the entry is shown
    wp = AutoTokenizer.from_pretrained(splade_tiny_dir)
    assert readable_tokens(wp, ["bone", "##ing", "[CLS]"]) == ["bone", "##ing", "[CLS]"]


def test_bare_index_finds_its_model_through_the_shards_manifest(evaluated, tmp_path, splade_tiny_dir):
    """A bare `lexray index` folder (not inside an evaluation) records its shards; their manifest names the model,
    so `lexray search --index BARE` needs no --model (it read a key build_index never wrote, and found none)."""
    from lexray.search.locate import locate_index

    bare = tmp_path / "bare"
    assert cli.main(["index", "--shards", str(evaluated / "shards"), "--out", str(bare)]) == 0
    loc = locate_index(bare)
    assert loc.kind == "index" and loc.model is not None
    assert Path(str(loc.model.name_or_path)).resolve() == Path(splade_tiny_dir).resolve()


def test_import_lexray_stays_light():
    code = ("import sys, lexray; heavy = ('torch', 'transformers', 'numba', 'pyarrow'); "
            "print(sorted(m for m in heavy if m in sys.modules)); "
            "assert callable(lexray.open_index); print(sorted(m for m in heavy if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(Path(lexray.__file__).parent.parent), "PATH": "/usr/bin:/bin"},
                         cwd=REPO_ROOT)
    # nothing heavy at import, and the search API resolves without torch (the encoder loads on first query)
    assert out.stdout.split() == ["[]", "[]"]
