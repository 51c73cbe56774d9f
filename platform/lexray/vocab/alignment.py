"""Target-vocabulary alignment (Vocabulary Transfer, arXiv:2607.00004, ../shared/papers/vocabulary-transfer-vt.txt
§4.2.1, §4.2.2): O = V ∩ V′, N′ = V′ \\ O.

Tokenizers write the same surface form differently, so tokens are compared through a *canonical form*
``(word_start, text)``:

* byte-level BPE (GPT-2, Llama-3, SmolLM2, ModernBERT): every character of a token string stands for one byte
  (GPT-2's byte↦unicode table); a leading space byte ('Ġ') marks a word start. ``'Ġthe'`` → ``(True, 'the')``,
  ``'ing'`` → ``(False, 'ing')``. A token whose bytes are not valid UTF-8 on their own (a piece of a multi-byte
  character) is a *byte token*, canonical form ``(word_start, None)`` with its raw bytes kept.
* SentencePiece (``'▁'`` marks a word start) and its byte fallback ``'<0xE2>'`` (single-byte tokens);
* WordPiece (BERT): ``'##'`` marks a continuation, every other token starts a word. ``'##ing'`` → ``(False,
  'ing')``, ``'the'`` → ``(True, 'the')``.

Matching a target token t (in priority order; the first rule that finds a source token wins):

1. ``special``: target special tokens map by role (CLS ↔ BOS, SEP ↔ EOS, PAD, UNK, MASK; a role the source lacks
   makes the token new);
2. ``exact``: same word-start flag and same text;
3. ``case_folded``: same flag, the source text lower-cased (and NFC-normalized) equals the target text — for an
   uncased target such as bert-base-uncased the source may only have ``'ĠParis'``; among several cased source
   forms the one with the lowest id (BPE merges rank frequent forms first) wins;
4. ``flipped``: the other word-start flag, exact or case-folded. A WordPiece word-start token occurs mid-text after
   a space, while a BPE token without 'Ġ' is what starts a text; the paper counts such pairs as overlap;
5. ``byte``: a target byte token (invalid UTF-8 on its own), or a one-byte target token with no match above, equal
   to one source byte token (byte-level BPE's 256 base tokens, SentencePiece byte fallback ``<0x41>``).

Everything else is new (N′). Several target tokens may map to the same source token (e.g. ``'the'`` and a rule-5
match); each target row is initialized from its source row independently.
"""

from __future__ import annotations

import json
import unicodedata
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

KINDS = ("special", "exact", "case_folded", "flipped", "byte")
"""Match kinds, in priority order (see the module docstring)."""


@lru_cache(maxsize=1)
def byte_decoder() -> dict[str, int]:
    """GPT-2's unicode↦byte table of byte-level BPE (the inverse of ``bytes_to_unicode``): each of the 256
    characters a byte-level token string is made of ↦ the byte it stands for."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs, strict=True)}


def byte_encoder() -> dict[int, str]:
    """GPT-2's byte↦unicode table (``bytes_to_unicode``): how byte-level BPE writes each byte as a character."""
    return {b: c for c, b in byte_decoder().items()}


def tokenizer_convention(tokenizer) -> str:
    """``"byte_bpe"``, ``"sentencepiece"`` or ``"wordpiece"``, read from the fast tokenizer's JSON.

    Raises:
        ValueError: a slow tokenizer, or a model type none of these conventions describes.
    """
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        raise ValueError(f"{type(tokenizer).__name__}: vocabulary alignment needs a fast (tokenizers) tokenizer")
    spec = json.loads(backend.to_str())
    model = spec["model"]["type"]
    text = json.dumps({k: spec.get(k) for k in ("pre_tokenizer", "decoder", "normalizer")})
    if model == "WordPiece":
        return "wordpiece"
    if "ByteLevel" in text:
        return "byte_bpe"
    if "Metaspace" in text or "▁" in text or model == "Unigram":
        return "sentencepiece"
    raise ValueError(f"tokenizer model {model!r} with {text[:200]}: unknown token convention")


@dataclass(frozen=True)
class Canon:
    """Canonical form of one token: ``text`` is None for a byte token (then ``raw`` holds its bytes)."""

    word_start: bool
    text: str | None
    raw: bytes = b""


def canonical(token: str, convention: str) -> Canon:
    """Canonical form of a vocabulary string under a convention (see the module docstring)."""
    if convention == "wordpiece":
        if token.startswith("##") and len(token) > 2:
            return Canon(False, token[2:], token[2:].encode())
        return Canon(True, token, token.encode())
    if convention == "sentencepiece":
        if len(token) == 6 and token.startswith("<0x") and token.endswith(">"):
            try:
                b = bytes([int(token[3:5], 16)])
            except ValueError:
                b = None
            if b is not None:
                return Canon(False, None, b)
        ws = token.startswith("▁")
        text = token[1:] if ws else token
        return Canon(ws, text.replace("▁", " "), text.encode())
    dec = byte_decoder()
    try:
        raw = bytes(dec[c] for c in token)
    except KeyError:  # an added token written in plain text (e.g. '<|im_start|>')
        return Canon(False, token, token.encode())
    ws = raw.startswith(b" ") and len(raw) > 1
    body = raw[1:] if ws else raw
    try:
        return Canon(ws, body.decode("utf-8"), body)
    except UnicodeDecodeError:
        return Canon(ws, None, body)


def _fold(text: str) -> str:
    return unicodedata.normalize("NFC", text).lower()


@dataclass
class Alignment:
    """Result of :func:`align_vocabularies`.

    Attributes:
        source_of: (|V′|,) int64, the source id aligned with each target id, -1 for new tokens (N′).
        kind: (|V′|,) int8, index into :data:`KINDS` of the rule that matched, -1 for new tokens.
        target_tokens / source_tokens: the vocabulary strings by id.
        target_convention / source_convention: see :func:`tokenizer_convention`.
    """

    source_of: np.ndarray
    kind: np.ndarray
    target_tokens: list[str]
    source_tokens: list[str]
    target_convention: str
    source_convention: str
    extra: dict = field(default_factory=dict)

    @property
    def overlap_ids(self) -> np.ndarray:
        """Target ids in O (the anchors), ascending."""
        return np.flatnonzero(self.source_of >= 0)

    @property
    def new_ids(self) -> np.ndarray:
        """Target ids in N′, ascending."""
        return np.flatnonzero(self.source_of < 0)

    def report(self, n_examples: int = 10, seed: int = 0) -> dict:
        """The ``vt_report.json`` alignment part: sizes, fraction and examples of each match kind."""
        rng = np.random.default_rng(seed)
        n_t = len(self.source_of)
        ov = self.overlap_ids
        counts = {k: int((self.kind == i).sum()) for i, k in enumerate(KINDS)}
        examples: dict[str, list] = {}
        for i, k in enumerate(KINDS):
            ids = np.flatnonzero(self.kind == i)
            pick = np.sort(rng.choice(ids, size=min(n_examples, len(ids)), replace=False)) if len(ids) else []
            examples[k] = [[self.target_tokens[t], self.source_tokens[int(self.source_of[t])]] for t in pick]
        new = self.new_ids
        pick = np.sort(rng.choice(new, size=min(n_examples, len(new)), replace=False)) if len(new) else []
        examples["new"] = [self.target_tokens[t] for t in pick]
        return {"target_size": n_t, "source_size": len(self.source_tokens), "overlap": len(ov), "new": len(new),
                "overlap_fraction": len(ov) / max(n_t, 1), "by_kind": counts,
                "target_convention": self.target_convention, "source_convention": self.source_convention,
                "examples": examples, **self.extra}


_ROLES = (("cls_token", ("bos_token", "cls_token")), ("sep_token", ("eos_token", "sep_token")),
          ("bos_token", ("bos_token", "cls_token")), ("eos_token", ("eos_token", "sep_token")),
          ("pad_token", ("pad_token",)), ("unk_token", ("unk_token",)), ("mask_token", ("mask_token",)))


def _vocab_list(tokenizer) -> list[str]:
    vocab = tokenizer.get_vocab()
    out = [""] * (max(vocab.values()) + 1)
    for tok, i in vocab.items():
        out[i] = tok
    return out


def align_vocabularies(source_tokenizer, target_tokenizer) -> Alignment:
    """Align a target vocabulary V′ with a source vocabulary V (rules in the module docstring).

    Args:
        source_tokenizer / target_tokenizer: fast Hugging Face tokenizers (any of the conventions above).

    Returns:
        :class:`Alignment` over the target ids ``0..|V′|-1``.

    Raises:
        ValueError: a tokenizer is slow or of an unknown convention.
    """
    sc, tc = tokenizer_convention(source_tokenizer), tokenizer_convention(target_tokenizer)
    src, tgt = _vocab_list(source_tokenizer), _vocab_list(target_tokenizer)
    src_special = set(source_tokenizer.all_special_tokens)
    tgt_special = set(target_tokenizer.all_special_tokens)
    exact: dict[tuple[bool, str], int] = {}
    folded: dict[tuple[bool, str], int] = {}
    byte_tok: dict[bytes, int] = {}
    for i, tok in enumerate(src):
        if not tok or tok in src_special:
            continue
        c = canonical(tok, sc)
        full = (b" " if c.word_start else b"") + c.raw
        if len(full) == 1 or c.text is None:
            byte_tok.setdefault(full, i)
        if c.text is None:
            continue
        exact.setdefault((c.word_start, c.text), i)
        folded.setdefault((c.word_start, _fold(c.text)), i)  # ids ascend: the lowest id wins
    source_of = np.full(len(tgt), -1, dtype=np.int64)
    kind = np.full(len(tgt), -1, dtype=np.int8)
    # 1. special tokens by role
    for role, src_roles in _ROLES:
        t_tok = getattr(target_tokenizer, role, None)
        if t_tok is None or t_tok not in tgt_special:
            continue
        t_id = target_tokenizer.convert_tokens_to_ids(t_tok)
        if source_of[t_id] >= 0:
            continue
        for sr in src_roles:
            s_tok = getattr(source_tokenizer, sr, None)
            if s_tok is not None:
                source_of[t_id] = source_tokenizer.convert_tokens_to_ids(s_tok)
                kind[t_id] = KINDS.index("special")
                break
    for t_id, tok in enumerate(tgt):
        if source_of[t_id] >= 0 or not tok or tok in tgt_special:
            continue
        c = canonical(tok, tc)
        if c.text is None:
            s = byte_tok.get((b" " if c.word_start else b"") + c.raw)
            if s is not None:
                source_of[t_id], kind[t_id] = s, KINDS.index("byte")
            continue
        key, fkey = (c.word_start, c.text), (c.word_start, _fold(c.text))
        flip, fflip = (not c.word_start, c.text), (not c.word_start, _fold(c.text))
        for k, table, probe in (("exact", exact, key), ("case_folded", folded, fkey)):
            if probe in table:
                source_of[t_id], kind[t_id] = table[probe], KINDS.index(k)
                break
        if source_of[t_id] >= 0:
            continue
        for table, probe in ((exact, flip), (folded, fflip)):
            if probe in table:
                source_of[t_id], kind[t_id] = table[probe], KINDS.index("flipped")
                break
        raw = c.text.encode("utf-8")
        if source_of[t_id] < 0 and len(raw) == 1 and raw in byte_tok:
            source_of[t_id], kind[t_id] = byte_tok[raw], KINDS.index("byte")
    return Alignment(source_of, kind, tgt, src, tc, sc)
