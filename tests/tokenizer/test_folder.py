"""Reading model folders: bad input gets a clear error naming the file and field; no code runs."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from hexamer.synthetic import build_carbon_folder
from hexamer.testing.hangs import error_within
from hexamer.tokenizer import CarbonTokenizer, ModelFolderError, resolve_model_dir


@pytest.fixture
def folder(tiny_folder: Path, tmp_path: Path) -> Path:
    out = tmp_path / "copy"
    shutil.copytree(tiny_folder, out, ignore=shutil.ignore_patterns("*.safetensors"))
    return out


def edit(path: Path, **changes: object) -> None:
    data = json.loads(path.read_text())
    for key, value in changes.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    path.write_text(json.dumps(data))


def test_missing_tokenizer_json(folder: Path) -> None:
    (folder / "tokenizer.json").unlink()
    with pytest.raises(
        ModelFolderError, match=r"has no tokenizer.json.*files present: \['README.md', 'added_tokens.json'"
    ):
        CarbonTokenizer.from_pretrained(folder)


def test_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(ModelFolderError, match="does not exist"):
        CarbonTokenizer.from_pretrained(tmp_path / "nope")


def test_hub_failure_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub

    def refuse(**kwargs: object) -> str:
        assert "*.py" not in kwargs["allow_patterns"]  # type: ignore[operator]
        raise OSError("offline")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", refuse)
    with pytest.raises(ModelFolderError, match=r"'org/Carbon-3B' is not a local folder.*offline"):
        resolve_model_dir("org/Carbon-3B")


def test_hub_download_uses_the_snapshot(monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
    import huggingface_hub

    seen: dict[str, object] = {}

    def fake(**kwargs: object) -> str:
        seen.update(kwargs)
        return str(folder)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake)
    tok = CarbonTokenizer.from_pretrained("org/Carbon-3B", revision="fns")
    assert seen["repo_id"] == "org/Carbon-3B" and seen["revision"] == "fns"
    assert seen["allow_patterns"] == ["*.json"]
    assert tok.encode("<dna>ACGTAC</dna>")[0] == tok.dna_begin_id


def test_dna_start_inconsistent_with_vocab(folder: Path) -> None:
    edit(folder / "dna_config.json", dna_start_id=500)
    with pytest.raises(ModelFolderError, match=r"dna_start_id=500.*426 distinct ids below it"):
        CarbonTokenizer.from_pretrained(folder)


def test_dna_vocab_size_inconsistent(folder: Path) -> None:
    edit(folder / "dna_config.json", dna_vocab_size=4000)
    with pytest.raises(ModelFolderError, match=r"dna_vocab_size=4000.*give 4182"):
        CarbonTokenizer.from_pretrained(folder)


def test_config_vocab_size_mismatch(folder: Path) -> None:
    edit(folder / "config.json", vocab_size=4096)
    with pytest.raises(ModelFolderError, match=r"config.json says vocab_size=4096.*gives 4608"):
        CarbonTokenizer.from_pretrained(folder)


def test_added_tokens_json_disagrees(folder: Path) -> None:
    (folder / "added_tokens.json").write_text(json.dumps({"<dna>": 7}))
    with pytest.raises(ModelFolderError, match=r"added_tokens.json gives <dna> the id 7.*426"):
        CarbonTokenizer.from_pretrained(folder)


def test_bad_json_and_bad_types(folder: Path) -> None:
    (folder / "dna_config.json").write_text("{not json")
    with pytest.raises(ModelFolderError, match=r"dna_config.json is not valid JSON"):
        CarbonTokenizer.from_pretrained(folder)
    (folder / "dna_config.json").write_text(json.dumps({"k": "six"}))
    with pytest.raises(ModelFolderError, match=r"'k' must be an integer"):
        CarbonTokenizer.from_pretrained(folder)
    (folder / "dna_config.json").write_text("[1, 2]")
    with pytest.raises(ModelFolderError, match="must hold a JSON object"):
        CarbonTokenizer.from_pretrained(folder)


def test_bad_special_tokens(folder: Path) -> None:
    edit(folder / "dna_config.json", dna_special_tokens=["<x>", "</x>", "<oov>"])
    with pytest.raises(ModelFolderError, match="dna_special_tokens must start with"):
        CarbonTokenizer.from_pretrained(folder)


def test_not_a_bpe_tokenizer(folder: Path) -> None:
    data = json.loads((folder / "tokenizer.json").read_text())
    data["model"] = {"type": "WordPiece", "vocab": {}}
    (folder / "tokenizer.json").write_text(json.dumps(data))
    with pytest.raises(ModelFolderError, match=r"model\.type must be 'BPE'"):
        CarbonTokenizer.from_pretrained(folder)


def test_without_dna_config_the_block_follows_the_base_vocab(folder: Path, tok: CarbonTokenizer) -> None:
    (folder / "dna_config.json").unlink()
    again = CarbonTokenizer.from_pretrained(folder)
    assert again.layout == tok.layout
    assert again.encode("x <dna>ACGTA</dna>") == tok.encode("x <dna>ACGTA</dna>")


def test_eos_and_pad_fallbacks(folder: Path, tok: CarbonTokenizer) -> None:
    (folder / "generation_config.json").unlink()
    (folder / "special_tokens_map.json").unlink()
    again = CarbonTokenizer.from_pretrained(folder)
    assert again.eos_token_id == again.pad_token_id == tok.eos_token_id
    edit(folder / "tokenizer_config.json", eos_token=None, pad_token=None)
    assert CarbonTokenizer.from_pretrained(folder).eos_token_id == tok.eos_token_id  # <|endoftext|>


def test_dna_block_listed_in_tokenizer_json_gives_same_ids(tmp_path: Path, tok: CarbonTokenizer) -> None:
    listed = build_carbon_folder(tmp_path / "listed", weights=False, list_dna_in_tokenizer_json=True)
    other = CarbonTokenizer.from_pretrained(listed)
    for text in ["AAAAAA <dna>AAAAAA</dna>", "<oov> <dna>", "hello <unused_0>"]:
        assert other.encode(text) == tok.encode(text)
    (listed / "dna_config.json").unlink()  # the block start comes from the listed <dna> then
    assert CarbonTokenizer.from_pretrained(listed).layout == tok.layout


def test_remote_code_is_never_executed(folder: Path) -> None:
    # the folder's tokenizer.py raises on import and tokenizer_config.json names it in auto_map
    config = json.loads((folder / "tokenizer_config.json").read_text())
    assert config["auto_map"]["AutoTokenizer"][0] == "tokenizer.HybridDNATokenizer"
    before = set(sys.modules)
    tok = CarbonTokenizer.from_pretrained(folder)
    assert tok.encode("<dna>ACGTAC</dna>")
    assert not {m for m in set(sys.modules) - before if m == "tokenizer" or m.endswith(".tokenizer")}


def test_auto_dna_tags_from_config(tmp_path: Path) -> None:
    folder = build_carbon_folder(tmp_path / "auto", weights=False, auto_dna_tags=True)
    tok = CarbonTokenizer.from_pretrained(folder)
    assert tok.auto_dna_tags
    assert tok.encode("ACGTAC") == [tok.dna_begin_id, tok.layout.kmer_id("ACGTAC"), tok.dna_end_id]
    assert not CarbonTokenizer.from_pretrained(folder, auto_dna_tags=False).auto_dna_tags


def _load_within(folder: Path, seconds: float = 10.0) -> BaseException | None:
    """Load the tokenizer on a thread (a FIFO read would block forever) and return its error."""
    return error_within(
        lambda: CarbonTokenizer.from_pretrained(folder), seconds, "reading the tokenizer files"
    )


@pytest.mark.parametrize(
    "name",
    [
        "tokenizer.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
        "added_tokens.json",
        "config.json",
        "generation_config.json",
        "dna_config.json",
    ],
)
def test_a_fifo_tokenizer_file_is_refused_by_name(folder: Path, name: str) -> None:
    import os

    (folder / name).unlink(missing_ok=True)
    os.mkfifo(folder / name)
    error = _load_within(folder)
    assert isinstance(error, ModelFolderError)
    assert f"{folder / name} is not a regular file" in str(error)


@pytest.mark.parametrize("name", ["tokenizer.json", "dna_config.json", "special_tokens_map.json"])
def test_a_symlink_out_of_the_folder_is_refused(folder: Path, tmp_path: Path, name: str) -> None:
    outside = tmp_path / f"outside-{name}"
    (folder / name).rename(outside)
    (folder / name).symlink_to(outside)
    error = _load_within(folder)
    assert isinstance(error, ModelFolderError)
    assert f"{folder / name} is a symlink to {outside}, outside the model folder" in str(error)
    (folder / name).unlink()
    (folder / name).symlink_to(Path("..") / outside.name)  # relative, still outside
    assert isinstance(_load_within(folder), ModelFolderError)


def test_a_broken_symlink_is_an_error_not_an_absent_file(folder: Path) -> None:
    (folder / "special_tokens_map.json").unlink()
    (folder / "special_tokens_map.json").symlink_to("gone.json")
    error = _load_within(folder)
    assert isinstance(error, ModelFolderError) and "special_tokens_map.json does not exist" in str(error)


def test_links_inside_the_folder_and_the_hub_cache_are_followed(folder: Path, tmp_path: Path) -> None:
    reference = CarbonTokenizer.from_pretrained(folder)
    (folder / "tokenizer.json").rename(folder / "base.json")
    (folder / "tokenizer.json").symlink_to("base.json")
    assert _load_within(folder) is None
    repo = tmp_path / "models--org--carbon"
    (repo / "blobs").mkdir(parents=True)
    snapshot = repo / "snapshots" / "rev1"
    snapshot.mkdir(parents=True)
    for item in folder.iterdir():
        if item.is_file() and not item.is_symlink():
            (repo / "blobs" / f"blob-{item.name}").write_bytes(item.read_bytes())
            (snapshot / item.name).symlink_to(Path("../../blobs") / f"blob-{item.name}")
    (snapshot / "tokenizer.json").symlink_to("../../blobs/blob-base.json")
    tok = CarbonTokenizer.from_pretrained(snapshot)
    assert tok.encode("hi <dna>ACGTACGTAC</dna>") == reference.encode("hi <dna>ACGTACGTAC</dna>")
