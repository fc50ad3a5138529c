"""Embedders: the offline default, the optional ONNX model, an OpenAI-compatible endpoint."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from hermes_fsm.errors import MemoryStoreError, VectorSizeMismatch
from hermes_fsm.memory import HashingEmbedder
from hermes_fsm.memory.embedders import cosine
from hermes_fsm.memory.openai_embedder import OpenAIEmbedder
from hermes_fsm.memory.qdrant_semantic import QdrantSemanticStore
from tests.memory.test_recall_quality import HAS_ONNX
from tests.memory.test_tier_conformance import item


def test_hashing_vectors_are_deterministic_unit_length_and_sized():
    e = HashingEmbedder(128)
    a, b = e.embed(["I prefer email", "I prefer email"])
    assert a == b and len(a) == 128
    assert sum(x * x for x in a) == pytest.approx(1.0)


def test_hashing_vectors_are_the_same_to_the_last_bit_as_before_it_was_made_faster():
    """Stored vectors were made by earlier versions: a new one must give the same bits
    (digest of the vectors of the first, pure-Python implementation)."""
    import hashlib
    import struct

    texts = ["I prefer email, not phone calls", "我喜欢用邮件联系",
             "SKU A1001 在华东仓还有多少库存?", "the a is", ""]
    vectors = HashingEmbedder(512).embed(texts)
    assert all(type(x) is float for v in vectors for x in v)
    digest = hashlib.sha256(b"".join(struct.pack("<512d", *v) for v in vectors)).hexdigest()
    assert digest == "6965864e099cca6f9c98d3b9d7dd2afa5b8bdf00969db79478fe2b19ab5a3456"


def test_hashing_a_batch_gives_each_text_the_bits_it_gets_alone():
    """A batch is summed in one bincount: no text's vector may depend on its neighbours."""
    from tests.memory.recall_eval import load_cases

    texts = ["", "the a is", "I prefer email", "我喜欢用邮件联系", "x", "email email -email"]
    for case in load_cases()[:60]:
        texts += [case["query"], *(f"{m['key']}: {m['value']} | {m['text']}"
                                   for m in case["memories"])]
    e = HashingEmbedder(512)
    batch = e.embed(texts)
    assert batch == [HashingEmbedder(512).embed([t])[0] for t in texts]
    assert all(type(x) is float for v in batch for x in v)
    assert e.embed([]) == []


@pytest.mark.parametrize(("query", "near", "far"), [
    ("contact me by email", "I prefer email", "the weather in Berlin"),
    ("我喜欢用邮件联系", "请用邮件联系我", "北京今天天气很好"),
])
def test_hashing_puts_related_text_closer_than_unrelated(query, near, far):
    q, n, f = HashingEmbedder().embed([query, near, far])
    assert cosine(q, n) > cosine(q, f)


@pytest.mark.skipif(not HAS_ONNX, reason="needs the onnx extra: pip install 'hermes-fsm[onnx]'")
def test_minilm_embeds_paraphrases_close_with_no_download():
    from hermes_fsm.memory.onnx_embedder import MiniLMEmbedder

    e = MiniLMEmbedder()
    q, n, f = e.embed(["where do I live", "my home is in Berlin", "I like jazz music"])
    assert len(q) == 384 and cosine(q, n) > cosine(q, f)


class _Embeddings(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        vectors = HashingEmbedder(32).embed(body["input"])
        data = [{"index": i, "embedding": v} for i, v in enumerate(vectors)]
        payload = json.dumps({"data": list(reversed(data)), "model": body["model"]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: object) -> None:
        return None


@pytest.fixture
def endpoint():
    server = HTTPServer(("127.0.0.1", 0), _Embeddings)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/v1"
    server.shutdown()


def test_openai_compatible_endpoint_embeds_in_input_order(endpoint):
    e = OpenAIEmbedder(endpoint, "test-model", timeout_s=5)
    assert e.dim == 32
    assert e.embed(["a b", "c d"]) == HashingEmbedder(32).embed(["a b", "c d"])


def test_an_unreachable_endpoint_is_a_clear_error():
    e = OpenAIEmbedder("http://127.0.0.1:9/v1", "m", dim=8, timeout_s=2)
    with pytest.raises(MemoryStoreError, match=r"embeddings endpoint .* failed"):
        e.embed(["x"])


async def test_a_collection_made_with_another_vector_size_is_a_clear_error(tmp_path):
    path = str(tmp_path / "qdrant")
    store = QdrantSemanticStore(256, path=path)
    await store.put([item("u1", "a", "1", 1)], [HashingEmbedder(256).embed(["1"])[0]])
    await store.close()
    other = QdrantSemanticStore(384, path=path)
    with pytest.raises(VectorSizeMismatch, match="size 256, but the embedder makes 384"):
        await other.items("u1")
    await other.close()
    reopened = QdrantSemanticStore(256, path=path)
    assert [i.value for i in await reopened.items("u1")] == ["1"]  # nothing was corrupted
    await reopened.close()
