"""/v1/completions against the model's own full-vocabulary log-softmax and the openai client."""

from __future__ import annotations

import json

import httpx
import numpy as np
import openai
import pytest

from hexamer import Carbon
from tests.server.conftest import full_logprobs, greedy_ids

PROMPT_IDS = [[5, 17, 300, 426, 1000, 2000], [40, 41, 426, 700]]


def _post(url: str, **body: object) -> dict:
    r = httpx.post(f"{url}/v1/completions", json=body, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()


def test_models_and_openai_client(url: str) -> None:
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="none")
    models = client.models.list().data
    assert len(models) == 1
    out = client.completions.create(model=models[0].id, prompt="hello", max_tokens=5, temperature=0, seed=1)
    assert out.choices[0].finish_reason in ("length", "stop")
    assert out.usage is not None and out.usage.prompt_tokens > 0
    stream = client.completions.create(
        model=models[0].id, prompt="hello", max_tokens=5, temperature=0, stream=True,
        stream_options={"include_usage": True},
    )  # fmt: skip
    chunks = list(stream)
    assert "".join(c.choices[0].text for c in chunks if c.choices) == out.choices[0].text
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == out.usage.completion_tokens


@pytest.mark.parametrize("top_n", [0, 5, 4096])
def test_prompt_logprobs_match_the_model(url: str, ref: Carbon, top_n: int) -> None:
    """The remote client's path: token-id prompts, max_tokens=1, echo, prompt_logprobs=N."""
    out = _post(url, prompt=PROMPT_IDS, max_tokens=1, echo=True, prompt_logprobs=top_n, temperature=0)
    assert len(out["choices"]) == len(PROMPT_IDS)
    tok = ref.tokenizer
    for ids, choice in zip(PROMPT_IDS, out["choices"], strict=True):
        lp = full_logprobs(ref, ids)
        plp = choice["prompt_logprobs"]
        assert len(plp) == len(ids) and plp[0] is None
        for i in range(1, len(ids)):
            entry = plp[i]
            actual = entry[str(ids[i])]
            want = lp[i - 1]
            assert actual["logprob"] == pytest.approx(float(want[ids[i]]), abs=1e-4)
            assert actual["rank"] == int((want >= want[ids[i]]).sum())
            assert actual["decoded_token"] == tok.decode([ids[i]])
            top = set(int(t) for t in want.topk(min(top_n, len(want))).indices) if top_n else set()
            assert set(map(int, entry)) == top | {ids[i]}
            for t, v in entry.items():
                assert v["logprob"] == pytest.approx(float(want[int(t)]), abs=1e-4)
        # echo: the prompt text, then the one generated token
        assert choice["text"].startswith(tok.decode(ids))


def test_greedy_whole_vocabulary_generation(url: str, ref: Carbon) -> None:
    prompt = "The <dna>ACGTACGGTACC"
    ids = ref.tokenizer.encode(prompt)
    want = greedy_ids(ref, ids, 10)
    out = _post(
        url, prompt=prompt, max_tokens=10, temperature=0, ignore_eos=True, return_token_ids=True, logprobs=2
    )
    choice = out["choices"][0]
    assert choice["token_ids"] == want
    assert choice["prompt_token_ids"] == ids
    assert choice["finish_reason"] == "length"
    # the text of the generated ids, decoded in the prompt's open <dna> region
    full = ref.tokenizer.decode(ids + want, skip_special_tokens=True)
    assert choice["text"] == full[len(ref.tokenizer.decode(ids, skip_special_tokens=True)) :]
    # legacy logprobs: raw log-softmax of each generated token
    ctx = list(ids)
    for t, (tid, lp) in enumerate(zip(want, choice["logprobs"]["token_logprobs"], strict=True)):
        assert lp == pytest.approx(float(full_logprobs(ref, ctx)[-1][tid]), abs=1e-4), t
        ctx.append(tid)
    assert all(len(d) <= 3 for d in choice["logprobs"]["top_logprobs"])
    offsets = choice["logprobs"]["text_offset"]
    assert offsets[0] == 0 and np.all(np.diff(offsets) >= 0)


def _stream(url: str, **body: object) -> tuple[dict[int, str], list[dict]]:
    texts: dict[int, str] = {}
    events = []
    with httpx.stream("POST", f"{url}/v1/completions", json={**body, "stream": True}, timeout=60) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if not line.startswith("data: "):
                continue
            data = line[6:]
            if data == "[DONE]":
                break
            ev = json.loads(data)
            events.append(ev)
            for c in ev["choices"]:
                texts[c["index"]] = texts.get(c["index"], "") + c["text"]
    return texts, events


def test_stream_equals_non_stream_and_n_seeds(url: str) -> None:
    body = {"prompt": ["hello world", "<dna>ACGT"], "max_tokens": 12, "temperature": 1.0, "seed": 11, "n": 3}
    plain = _post(url, **body)
    texts, events = _stream(url, **body, stream_options={"include_usage": True})
    assert [c["index"] for c in plain["choices"]] == list(range(6))
    assert texts == {c["index"]: c["text"] for c in plain["choices"]}
    assert events[-1]["choices"] == [] and events[-1]["usage"] == plain["usage"]
    # choice j of a prompt is seeded seed + j, whatever else is in the request
    for j in range(3):
        solo = _post(url, prompt="hello world", max_tokens=12, temperature=1.0, seed=11 + j)
        assert solo["choices"][0]["text"] == plain["choices"][j]["text"]


def test_stop_strings_and_eos(url: str, ref: Carbon) -> None:
    base = _post(url, prompt="abc", max_tokens=16, temperature=0, ignore_eos=True)["choices"][0]["text"]
    assert len(base) > 6
    stop = base[3:6]
    cut = _post(url, prompt="abc", max_tokens=16, temperature=0, ignore_eos=True, stop=[stop])["choices"][0]
    assert cut["text"] == base[: base.index(stop)]
    assert cut["finish_reason"] == "stop" and cut["stop_reason"] == stop
    texts, _ = _stream(url, prompt="abc", max_tokens=16, temperature=0, ignore_eos=True, stop=stop)
    assert texts[0] == cut["text"]
    eos = ref.tokenizer.eos_token_id
    assert eos is not None
    ended = _post(url, prompt="abc", max_tokens=5, allowed_token_ids=[eos, 7], temperature=0, logit_bias=None)
    choice = ended["choices"][0]
    # only EOS and one other id are allowed: either EOS ends it, or id 7 repeats to the limit
    assert choice["finish_reason"] in ("stop", "length")
    forced = _post(url, prompt="abc", max_tokens=3, allowed_token_ids=[eos], ignore_eos=True)["choices"][0]
    assert forced["finish_reason"] == "length" and forced["text"] == ""
    stopped = _post(url, prompt="abc", max_tokens=3, allowed_token_ids=[eos])["choices"][0]
    assert stopped["finish_reason"] == "stop" and stopped["stop_reason"] is None
    by_id = _post(url, prompt="abc", max_tokens=3, allowed_token_ids=[7], stop_token_ids=[7])["choices"][0]
    assert by_id["finish_reason"] == "stop" and by_id["stop_reason"] == 7


def test_echo_without_generation(url: str, ref: Carbon) -> None:
    out = _post(url, prompt="hello <dna>ACGTAC", max_tokens=0, echo=True, logprobs=1)
    choice = out["choices"][0]
    assert choice["text"] == "hello <dna>ACGTAC"
    assert out["usage"]["completion_tokens"] == 0
    ids = ref.tokenizer.encode("hello <dna>ACGTAC")
    lps = choice["logprobs"]["token_logprobs"]
    assert lps[0] is None and len(lps) == len(ids)
    want = full_logprobs(ref, ids)
    assert lps[1:] == pytest.approx([float(want[i - 1][ids[i]]) for i in range(1, len(ids))], abs=1e-4)
