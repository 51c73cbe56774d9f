"""benchmarks/laconic_grid.py: the committed grid files stay runnable against the recipe they name, and the grid's
exact retrieval scores what the library's metrics score. No training here (a cell costs minutes on CPU)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import laconic_grid  # noqa: E402

GRIDS = sorted((REPO / "benchmarks" / "grids").glob("*.yaml"))


@pytest.mark.parametrize("grid", GRIDS, ids=[g.name for g in GRIDS])
def test_every_cell_of_a_committed_grid_validates_against_the_recipe(grid: Path) -> None:
    """A renamed or removed config key would make a published grid row unreproducible: every cell's overrides,
    on top of the grid's base, must still build a config; cell names are unique (results are keyed by name)."""
    from lexray.config import load_config

    base, cells = laconic_grid._load_cells(grid)
    names = [c["name"] for c in cells]
    assert len(names) == len(set(names))
    for c in cells:
        cfg = load_config(str(REPO / "jobs/configs/laconic-smollm2-cpu.yaml"), overrides=[*base, *c.get("set", [])])
        assert cfg.train.phases[1].max_steps >= 1


def test_grid_base_restores_the_recipe_the_grid_ran_on() -> None:
    """The 2026-11-26 grid's ``base`` pins the recipe of that day, whatever the recipe file says now."""
    from lexray.config import load_config

    base, _ = laconic_grid._load_cells(REPO / "benchmarks/grids/laconic-2026-11-26.yaml")
    cfg = load_config(str(REPO / "jobs/configs/laconic-smollm2-cpu.yaml"), overrides=base)
    p1, p2 = cfg.train.phases
    assert cfg.model.doc_max_length == 128
    assert (p1.max_steps, p1.doc_max_length, p2.max_steps, p2.doc_max_length) == (40, 128, 320, 64)
    assert (p1.lr, p2.lr, p1.temperature, p2.temperature, p2.lora.r, p2.lora.alpha) == (1e-3, 1e-3, 5.0, 5.0, 16, 32)


def test_bad_grid_files_are_refused_naming_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "g.yaml"
    bad.write_text("- name: a\n  sett: []\n")
    with pytest.raises(SystemExit, match=r"g\.yaml: cell a: unknown keys \['sett'\]"):
        laconic_grid._load_cells(bad)
    bad.write_text("base: []\ncell: []\n")
    with pytest.raises(SystemExit, match="unknown top-level keys"):
        laconic_grid._load_cells(bad)


class _BagOfWords:
    """A stand-in encoder: the representation is the count of each word (so scores are hand-checkable)."""

    vocab = {"fever": 0, "virus": 1, "heart": 2, "lung": 3}

    def encode(self, texts, kind, batch_size, device=None):
        reps = torch.zeros(len(texts), 4)
        for i, t in enumerate(texts):
            for w in t.lower().split():
                if w in self.vocab:
                    reps[i, self.vocab[w]] += 1
        return reps


def test_exact_retrieval_ranks_by_dot_product_and_scores_with_pytrec_eval(tmp_path: Path) -> None:
    """Three documents, two queries: the run is the dot-product order, nDCG@10 and R@100 are pytrec_eval's."""
    import json

    d = tmp_path / "mini"
    (d / "qrels").mkdir(parents=True)
    docs = [("d1", "fever virus virus"), ("d2", "heart lung"), ("d3", "fever")]
    (d / "corpus.jsonl").write_text("".join(json.dumps({"_id": i, "title": "", "text": t}) + "\n" for i, t in docs))
    (d / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "virus"}) + "\n"
                                     + json.dumps({"_id": "q2", "text": "lung heart"}) + "\n")
    (d / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td3\t1\nq2\td2\t1\n")
    m = laconic_grid.evaluate_encoder(_BagOfWords(), str(d), "test", torch.device("cpu"))
    # q1 ("virus") matches d1 only, so its relevant d3 (score 0) is never retrieved; q2 finds d2 first.
    assert m["nDCG@10"] == pytest.approx(0.5)
    assert m["R@100"] == pytest.approx(0.5)
    assert m["MRR@10"] == pytest.approx(0.5)
    assert (m["n_docs"], m["n_queries"]) == (3, 2)
    assert m["d_terms"] == pytest.approx(5 / 3)   # 2 + 2 + 1 distinct words


def test_the_long_recipe_is_the_grid_cell_it_publishes() -> None:
    """jobs/configs/laconic-smollm2-cpu-long.yaml cites the D-S1440 cell's score (docs/recipes.md): it must stay
    that cell's config, key for key (only the run's name differs)."""
    from lexray.config import load_config

    base, cells = laconic_grid._load_cells(REPO / "benchmarks/grids/laconic-long-2026-11-26.yaml")
    cell = next(c for c in cells if c["name"] == "D-S1440")
    grid = load_config(str(REPO / "jobs/configs/laconic-smollm2-cpu.yaml"), overrides=[*base, *cell["set"]])
    long = load_config(str(REPO / "jobs/configs/laconic-smollm2-cpu-long.yaml"))
    assert long.model_dump(exclude={"name"}) == grid.model_dump(exclude={"name"})
