"""Vocabulary expansion of CAI's AdaLM step (Iida & Okazaki, AACL 2022, arXiv:2211.03988,
../shared/papers/cai-vocabulary-idf-domain-adaptation.txt §3.2.1, Algorithm 1; AdaLM: Yao et al. 2021).

Algorithm 1, as implemented by :func:`expand_vocabulary`: for i = 1, 2, …, train a tokenizer T_i of the base
tokenizer's own kind on the domain corpus C at size |V0| + i·ΔV (the ``tokenizers`` library's trainers, with the
base tokenizer's normalizer and pre-tokenizer, so T_i splits text exactly where the base does); tokenize C with
T_i and count its tokens; V_i = V0 plus T_i's most frequent *words* that are not in V0, until |V_i| = |V0| + i·ΔV
or the words run out. Stop when an iteration adds fewer than ΔV over the previous one (|V_i| − |V_{i−1}| < ΔV);
V_final = that last V_i (line 14). ``max_iterations`` caps the loop (not in the paper; the report says which
rule stopped it).

What a *word* is. Algorithm 1 line 12 adds "words" of T_i's vocabulary "except duplicate words and words
consisting of only number or mark"; the text calls them "new words obtained by the built tokenizer" and gives
"!, ?, ", [, ]" as marks. It does not say whether WordPiece continuation pieces ("##ase") count. Here a word is a
token of T_i that

* starts a word: a WordPiece token without the continuing-subword prefix ``##``; a byte-level BPE token with the
  word-start marker ``Ġ`` (a leading space), so every added token is a whole word or a word-initial piece, which
  tokenizes to itself and reads as one SPLADE output dimension;
* is not in the base vocabulary (for BPE: neither as ``Ġword`` nor as an added token);
* is not made only of digits and punctuation/symbols (Unicode categories N*, P*, S*, after removing the marker);
* is not longer than WordPiece's ``max_input_chars_per_word`` (such a word would become [UNK]) and, for BPE,
  decodes to valid UTF-8.

How tokens are added differs by tokenizer model (:func:`add_words`):

* WordPiece (BERT): the words are appended to the WordPiece *model's* vocabulary (ids |V0|, |V0|+1, …), as AdaLM
  extends vocab.txt. WordPiece's greedy longest-prefix match then uses them inside longer words too
  ("kinases" → "kinase", "##s"). The saved ``tokenizer.json`` is a plain BERT tokenizer with a longer vocabulary.
* Byte-level BPE (SmolLM2, DeepSeek-V3): a BPE model reaches a token only through its merge list, and appending a
  vocabulary entry without merges leaves it unreachable. The words are instead *added tokens*
  (``tokenizers.AddedToken``, ``normalized=False``) whose content is the raw text of ``Ġword``, i.e. the word with
  its leading space (" cytokinesis"). Added tokens are matched in the raw text before pre-tokenization and BPE, so
  " cytokinesis" also matches at the start of " cytokinesises" (then "es" is BPE'd on its own) and never at the
  very start of a text without a space — as BPE's own ``Ġ`` tokens. No merges are added; the BPE model is unchanged.

New rows (:func:`init_new_rows`): input embedding, output projection (when untied) and output bias of a new
token start as the mean of those of its sub-words under the *original* tokenizer (§3.2.1, last paragraph; for BPE
the word is tokenized with its leading space, as VT's SubToken-Init does, lexray.vocab.init).
"""

from __future__ import annotations

import copy
import logging
import time
import unicodedata
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from torch import nn

from lexray.models.head import output_bias, output_projection
from lexray.vocab.alignment import byte_decoder, byte_encoder

log = logging.getLogger(__name__)

WORD_START = "Ġ"
"""Byte-level BPE's word-start marker (the byte-level image of a space)."""


@dataclass
class Expansion:
    """The result of :func:`expand_vocabulary`.

    Attributes:
        tokenizer: the expanded tokenizer (a copy; the base tokenizer is unchanged).
        words: the added words in id order (for BPE the added token's content, with its leading space).
        ids: their token ids in ``tokenizer``.
        counts: each added word's count under the last domain tokenizer T_i (Algorithm 1 line 10, the sort key).
        v0: |V0|. iterations: one dict per iteration (target size, T_i's size, candidates, |V_i|, seconds).
        stopped_by: ``"criterion"`` (|V_i| − |V_{i−1}| < ΔV) or ``"max_iterations"``.
        convention: ``"wordpiece"`` or ``"byte_bpe"``.
    """

    tokenizer: object
    words: list[str]
    ids: list[int]
    counts: list[int]
    v0: int
    convention: str
    iterations: list[dict] = field(default_factory=list)
    stopped_by: str = "criterion"


def tokenizer_kind(tokenizer) -> str:
    """``"wordpiece"`` or ``"byte_bpe"`` for a fast (``tokenizers``-backed) tokenizer.

    Raises:
        ValueError: another model (Unigram / SentencePiece BPE) or a slow tokenizer.
    """
    backend = getattr(tokenizer, "backend_tokenizer", None)
    name = type(backend.model).__name__ if backend is not None else type(tokenizer).__name__
    if name == "WordPiece":
        return "wordpiece"
    if name == "BPE" and "ByteLevel" in str(backend.pre_tokenizer):
        return "byte_bpe"
    raise ValueError(f"vocabulary expansion supports WordPiece and byte-level BPE tokenizers; this one is "
                     f"{type(tokenizer).__name__} with a {name} model")


def is_noise(word: str) -> bool:
    """True when ``word`` (marker removed) is empty or only digits and punctuation/symbols (Algorithm 1 line 12:
    "words consisting of only number or mark")."""
    return all(unicodedata.category(c)[0] in "NPS" for c in word)


def train_domain_tokenizer(tokenizer, texts: Sequence[str], vocab_size: int, min_frequency: int = 2):
    """T_i: a ``tokenizers.Tokenizer`` of the base's model kind trained on ``texts`` at ``vocab_size`` (Algorithm
    1 line 8), with the base's normalizer and pre-tokenizer."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    backend = tokenizer.backend_tokenizer
    special = [t for t in tokenizer.all_special_tokens]
    if tokenizer_kind(tokenizer) == "wordpiece":
        base = backend.model
        tok = Tokenizer(models.WordPiece(unk_token=base.unk_token, continuing_subword_prefix=base.continuing_subword_prefix,
                                         max_input_chars_per_word=base.max_input_chars_per_word))
        trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, min_frequency=min_frequency, show_progress=False,
                                            special_tokens=special,
                                            continuing_subword_prefix=base.continuing_subword_prefix)
    else:
        tok = Tokenizer(models.BPE())
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=min_frequency, show_progress=False,
                                      special_tokens=special, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    if backend.normalizer is not None:
        tok.normalizer = backend.normalizer
    tok.pre_tokenizer = backend.pre_tokenizer
    tok.train_from_iterator(texts, trainer=trainer, length=len(texts))
    return tok


def _word_of(token: str, kind: str, max_chars: int) -> str | None:
    """The added-token text of a T_i token that is a *word* (module docstring), or None."""
    if kind == "wordpiece":
        return None if token.startswith("##") or len(token) > max_chars or is_noise(token) else token
    if not token.startswith(WORD_START) or is_noise(token[1:]):
        return None
    dec = byte_decoder()
    try:
        return bytes(dec[c] for c in token).decode("utf-8")
    except (KeyError, UnicodeDecodeError):
        return None


def word_counts(tokenizer, texts: Sequence[str]) -> Counter:
    """Pre-token counts of ``texts`` under the base tokenizer's normalizer and pre-tokenizer (what every T_i's
    model then splits); computed once, so counting C under T_i (Algorithm 1 line 10) tokenizes each distinct
    pre-token once instead of the whole corpus."""
    backend = tokenizer.backend_tokenizer
    norm, pre = backend.normalizer, backend.pre_tokenizer
    counts: Counter = Counter()
    for text in texts:
        counts.update(w for w, _ in pre.pre_tokenize_str(norm.normalize_str(text) if norm is not None else text))
    return counts


def candidate_words(tokenizer, domain, words: Counter) -> list[tuple[str, int]]:
    """T_i's words not in the base vocabulary, most frequent first (ties: the word), with their counts when the
    corpus (``words``: :func:`word_counts`) is tokenized by T_i (Algorithm 1 lines 9–12)."""
    kind = tokenizer_kind(tokenizer)
    base_vocab = tokenizer.backend_tokenizer.get_vocab(with_added_tokens=True)
    max_chars = getattr(tokenizer.backend_tokenizer.model, "max_input_chars_per_word", 100)
    counts: Counter = Counter()
    model = domain.model
    for w, n in words.items():
        for t in model.tokenize(w):
            counts[t.value] += n
    out = []
    for token in domain.get_vocab():
        word = _word_of(token, kind, max_chars)
        if word is None or token in base_vocab or word in base_vocab or counts[token] == 0:
            continue
        out.append((word, counts[token]))
    out.sort(key=lambda wc: (-wc[1], wc[0]))
    return out


def expand_vocabulary(tokenizer, texts: Sequence[str], delta_v: int, max_iterations: int | None = None,
                      min_frequency: int = 2, progress: Callable[[str], None] | None = None) -> Expansion:
    """Algorithm 1 of CAI §3.2.1 on ``texts`` (the module docstring); returns the expanded tokenizer (a copy).

    Args:
        tokenizer: the base (fast) tokenizer, V0. texts: the domain corpus C. delta_v: ΔV (> 0).
        max_iterations: a cap on i (None: only Algorithm 1's criterion). min_frequency: T_i's trainer minimum
            pair frequency. progress: called with one line per iteration.

    Raises:
        ValueError: ``delta_v`` ≤ 0, an empty corpus, or an unsupported tokenizer model.
    """
    if delta_v <= 0:
        raise ValueError(f"delta_v must be > 0, got {delta_v}")
    if not texts:
        raise ValueError("the domain corpus is empty")
    kind = tokenizer_kind(tokenizer)
    v0 = len(tokenizer)
    iterations: list[dict] = []
    chosen: list[tuple[str, int]] = []
    prev, i, stopped = v0, 0, "criterion"
    words_c = word_counts(tokenizer, texts)
    while True:
        i += 1
        t0 = time.perf_counter()
        target = v0 + i * delta_v
        domain = train_domain_tokenizer(tokenizer, texts, target, min_frequency)
        cands = candidate_words(tokenizer, domain, words_c)
        chosen = cands[:i * delta_v]
        size = v0 + len(chosen)
        iterations.append({"iteration": i, "target_size": target, "domain_vocab_size": domain.get_vocab_size(),
                           "candidates": len(cands), "size": size, "added_over_previous": size - prev,
                           "seconds": round(time.perf_counter() - t0, 3)})
        if progress:
            progress(f"[lexray] vocabulary expansion iteration {i}: target {target}, T_i has "
                     f"{domain.get_vocab_size()} tokens, {len(cands)} new words, |V_{i}| = {size} "
                     f"(+{size - prev})")
        if size - prev < delta_v:
            break
        if max_iterations is not None and i >= max_iterations:
            stopped = "max_iterations"
            break
        prev = size
    words = [w for w, _ in chosen]
    expanded, ids = add_words(tokenizer, words)
    return Expansion(expanded, words, ids, [c for _, c in chosen], v0, kind, iterations, stopped)


def add_words(tokenizer, words: Sequence[str]):
    """A copy of ``tokenizer`` with ``words`` added (WordPiece: appended to the model vocabulary; byte-level BPE:
    added tokens; module docstring); returns ``(tokenizer, ids)``.

    Raises:
        ValueError: a word already in the vocabulary (it would silently re-map an existing id).
    """
    from tokenizers import AddedToken
    from tokenizers.models import WordPiece

    kind = tokenizer_kind(tokenizer)
    vocab = tokenizer.backend_tokenizer.get_vocab(with_added_tokens=True)
    enc = byte_encoder()
    dup = [w for w in words if w in vocab or (kind == "byte_bpe" and "".join(enc[b] for b in w.encode()) in vocab)]
    if dup or len(set(words)) != len(words):
        raise ValueError(f"words already in the vocabulary or repeated: {dup[:5] or 'repeats'}")
    tok = copy.deepcopy(tokenizer)
    backend = tok.backend_tokenizer
    if kind == "wordpiece":
        base = backend.model
        model_vocab = backend.get_vocab(with_added_tokens=False)
        n = max(model_vocab.values()) + 1
        model_vocab.update({w: n + k for k, w in enumerate(words)})
        backend.model = WordPiece(vocab=model_vocab, unk_token=base.unk_token,
                                  continuing_subword_prefix=base.continuing_subword_prefix,
                                  max_input_chars_per_word=base.max_input_chars_per_word)
    else:
        tok.add_tokens([AddedToken(w, normalized=False, single_word=False, lstrip=False, rstrip=False)
                        for w in words])
    return tok, tok.convert_tokens_to_ids(list(words))


def self_tokenization_failures(tokenizer, words: Sequence[str], ids: Sequence[int]) -> list[tuple[str, list[int]]]:
    """The added words that do not tokenize to exactly their own id (``(word, ids)`` pairs; empty = all do)."""
    enc = tokenizer(list(words), add_special_tokens=False)["input_ids"]
    return [(w, e) for w, e, i in zip(words, enc, ids, strict=True) if e != [i]]


def subword_pieces(tokenizer, words: Sequence[str]) -> list[list[int]]:
    """Each word's ids under the original ``tokenizer`` (BPE words keep their leading space, so 'Ġ' pieces).

    Raises:
        ValueError: a word with no pieces.
    """
    pieces = tokenizer(list(words), add_special_tokens=False)["input_ids"]
    empty = [w for w, p in zip(words, pieces, strict=True) if not p]
    if empty:
        raise ValueError(f"words with no sub-words under the original tokenizer: {empty[:5]}")
    return pieces


@torch.no_grad()
def init_new_rows(backbone: nn.Module, ids: Sequence[int], pieces: Sequence[Sequence[int]]) -> dict:
    """Resize ``backbone``'s vocabulary (in place) to hold ``ids`` and set each new row of the input embeddings,
    of an untied output projection and of the output bias to the mean of its ``pieces``' rows (§3.2.1). Rows of
    V0 are unchanged. Returns ``{"rows", "tied", "bias", "pieces_mean"}`` for the report."""
    emb = backbone.get_input_embeddings()
    n0 = emb.weight.shape[0]
    proj = output_projection(backbone)
    tied = proj.weight.data_ptr() == emb.weight.data_ptr()
    olds = {"emb": emb.weight.detach().clone(), "proj": None if tied else proj.weight.detach().clone()}
    bias = output_bias(backbone)
    olds["bias"] = None if bias is None else bias.detach().clone()
    n = max(n0, max(ids) + 1) if len(ids) else n0
    backbone.resize_token_embeddings(n, mean_resizing=False)
    lens = torch.tensor([len(p) for p in pieces])
    rows = torch.arange(len(pieces)).repeat_interleave(lens)
    cols = torch.tensor([c for p in pieces for c in p], dtype=torch.long)
    mean = torch.sparse_coo_tensor(torch.stack([rows, cols]), (1.0 / lens.float()).repeat_interleave(lens),
                                   (len(pieces), n0), check_invariants=False).coalesce()
    idx = torch.tensor(list(ids), dtype=torch.long)
    targets = {"emb": backbone.get_input_embeddings().weight, "proj": output_projection(backbone).weight,
               "bias": output_bias(backbone)}
    for key, old in olds.items():
        if old is not None and len(idx):
            m = old.reshape(n0, -1).float()
            targets[key][idx] = torch.sparse.mm(mean, m).reshape(-1, *old.shape[1:]).to(old.dtype)
    backbone.config.vocab_size = n
    return {"rows": n, "tied": tied, "bias": bias is not None,
            "pieces_mean": float(lens.float().mean()) if len(lens) else 0.0}
