"""Tiny models written by tests, so real loading code runs without downloads.

Shared by the embedding and memory tests (imported by path: the tests are not a package).
"""

from __future__ import annotations

from pathlib import Path


def write_cjk_vocab(directory: Path) -> int:
    """A BERT vocab.txt: special tokens, printable ASCII and the CJK characters of jieba's dict."""
    import jieba

    dict_txt = Path(jieba.__file__).parent / "dict.txt"
    chars: set[str] = set()
    with dict_txt.open(encoding="utf-8") as fh:
        for line in fh:
            chars.update(c for c in line.split(" ", 1)[0] if "\u4e00" <= c <= "\u9fff")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab += [chr(i) for i in range(33, 127)] + sorted(chars)
    (directory / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    return len(vocab)


def build_tiny_chinese_clip(directory: Path, seed: int = 0) -> Path:
    """Save a 16-d Chinese-CLIP (32 px images) with its processor into ``directory``."""
    import torch
    from transformers import (
        BertTokenizer,
        ChineseCLIPConfig,
        ChineseCLIPImageProcessorPil,
        ChineseCLIPModel,
        ChineseCLIPProcessor,
    )

    directory.mkdir(parents=True, exist_ok=True)
    size = write_cjk_vocab(directory)
    tokenizer = BertTokenizer.from_pretrained(str(directory))
    layers = {"num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64}
    config = ChineseCLIPConfig(
        text_config={
            "vocab_size": size,
            "hidden_size": 32,
            "max_position_embeddings": 64,
            **layers,
        },
        vision_config={"hidden_size": 32, "image_size": 32, "patch_size": 8, **layers},
        projection_dim=16,
    )
    torch.manual_seed(seed)
    ChineseCLIPModel(config).save_pretrained(directory)
    image_processor = ChineseCLIPImageProcessorPil(
        size={"height": 32, "width": 32}, crop_size={"height": 32, "width": 32}
    )
    ChineseCLIPProcessor(image_processor=image_processor, tokenizer=tokenizer).save_pretrained(directory)
    return directory


def png_bytes(color: tuple[int, int, int], size: tuple[int, int] = (40, 30)) -> bytes:
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", size, color).save(buf, "PNG")
    return buf.getvalue()
