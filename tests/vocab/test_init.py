"""Initialization of E′ (VT §4.2.2): overlap rows bit-identical, Semantic-Init = sparsemax barycentres of
anchors (eq. 7–9), and the ablation baselines."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import AutoTokenizer

from lexray.vocab.alignment import align_vocabularies
from lexray.vocab.init import METHODS, init_embeddings
from lexray.vocab.sparsemax import sparsemax


@pytest.fixture(scope="module")
def setup(bpe_tokenizer_dir, splade_tiny_dir):
    from safetensors.torch import load_file

    src = AutoTokenizer.from_pretrained(str(bpe_tokenizer_dir))
    tgt = AutoTokenizer.from_pretrained(str(splade_tiny_dir))
    al = align_vocabularies(src, tgt)
    sd = load_file(str(splade_tiny_dir / "model.safetensors"))
    table = next(v for k, v in sd.items() if k.endswith("word_embeddings.weight"))
    E = torch.randn(len(src), 24, generator=torch.Generator().manual_seed(0))
    return src, al, table, E


@pytest.fixture(scope="module")
def semantic(setup):
    src, al, table, E = setup
    return init_embeddings(E, al, "semantic", target_table=table)


@pytest.mark.parametrize("method", METHODS)
def test_overlap_rows_bit_identical(setup, semantic, method):
    src, al, table, E = setup
    res = semantic if method == "semantic" else init_embeddings(E, al, method, target_table=table,
                                                                 source_tokenizer=src)
    ov = torch.from_numpy(al.overlap_ids)
    assert res.weights.shape == (len(al.source_of), 24)
    assert torch.isfinite(res.weights).all()
    if method == "rand_all":
        assert not torch.equal(res.weights[ov], E[torch.from_numpy(al.source_of[al.overlap_ids])])
    else:
        assert torch.equal(res.weights[ov], E[torch.from_numpy(al.source_of[al.overlap_ids])])


def test_semantic_rows_are_sparsemax_barycentres(setup, semantic):
    src, al, table, E = setup
    res = semantic
    new, ov = al.new_ids[:20], al.overlap_ids
    tn = torch.nn.functional.normalize(table.float(), dim=1)
    alpha = sparsemax(tn[torch.from_numpy(new)] @ tn[torch.from_numpy(ov)].T)        # eq. 7-8, dense reference
    expect = alpha @ E[torch.from_numpy(al.source_of[ov])]                            # eq. 9
    assert torch.allclose(res.weights[torch.from_numpy(new)], expect, atol=1e-5)
    assert res.stats["support_mean"] < 0.01 * len(ov)                                # sparse neighbourhoods
    a = res.new_interp                                                                # convex weights
    assert torch.allclose(torch.sparse.sum(a, 1).to_dense(), torch.ones(len(al.new_ids)), atol=1e-5)
    assert float(a.values().min()) > 0


def test_baselines(setup):
    src, al, table, E = setup
    new = torch.from_numpy(al.new_ids)
    anchors = E[torch.from_numpy(al.source_of[al.overlap_ids])]
    mean = init_embeddings(E, al, "mean").weights
    assert torch.allclose(mean[new], anchors.mean(0).expand(len(new), -1), atol=1e-5)
    rn = init_embeddings(E, al, "rand_new", seed=3).weights[new]
    assert abs(float(rn.std()) - float(E.std())) < 0.05 * float(E.std())
    sub = init_embeddings(E, al, "subtoken", source_tokenizer=src).weights
    # '##nium' (a continuation) -> the mean of the source pieces of 'nium' without a leading space
    t = int(np.flatnonzero(np.array(al.target_tokens) == "##nium")[0])
    pieces = src.backend_tokenizer.model.tokenize("nium")
    assert torch.allclose(sub[t], E[[p.id for p in pieces]].mean(0), atol=1e-6)
