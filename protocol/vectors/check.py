#!/usr/bin/env python3
"""Independent cross-check of Cairn's protocol test vectors.

Run by hand from anywhere:  python3 protocol/vectors/check.py
Needs only the standard library and the `cryptography` package (for Ed25519).

It re-derives every expected value in this folder from the documents in protocol/ with code
that shares nothing with the Swift implementation: canonical JSON, chunk hashes, leaves and the
state root, the delta's binary encoding and SHA-256, and the Ed25519 key, key id and signature
of the signed manifest. Exit status 0 means every value agrees.
"""
import base64, hashlib, json, os, struct, sys

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives import serialization

HERE = os.path.dirname(os.path.abspath(__file__))
failures = 0


def check(what, got, want):
    global failures
    if got != want:
        failures += 1
        print(f"MISMATCH {what}:\n  got  {got!r}\n  want {want!r}")


def load(name):
    with open(os.path.join(HERE, name), "rb") as f:
        return f.read()


def canonical(value):
    """protocol/canonical-encoding.md, written from the document."""
    if value is None:
        return b"null"
    if value is True:
        return b"true"
    if value is False:
        return b"false"
    if isinstance(value, int):
        return str(value).encode()
    if isinstance(value, str):
        out = bytearray(b'"')
        for byte in value.encode("utf-8"):
            if byte in (0x22, 0x5C):
                out += bytes([0x5C, byte])
            elif byte < 0x20:
                out += b"\\u00%02x" % byte
            else:
                out.append(byte)
        return bytes(out + b'"')
    if isinstance(value, list):
        return b"[" + b",".join(canonical(v) for v in value) + b"]"
    if isinstance(value, dict):
        keys = sorted(value, key=lambda k: k.encode("utf-8"))
        return b"{" + b",".join(canonical(k) + b":" + canonical(value[k]) for k in keys) + b"}"
    raise TypeError(f"not canonical JSON: {type(value)}")


def sha(data):
    return hashlib.sha256(data).hexdigest()


def f32le(vector):
    return b"".join(struct.pack("<f", x) for x in vector)


def leaf_and_hashes(chunk):
    meta = {"title": chunk["title"], "scenario": chunk["scenario"], "tags": chunk["tags"], "source": chunk["source"]}
    content_hash = hashlib.sha256(chunk["content"].encode()).digest()
    metadata_hash = hashlib.sha256(canonical(meta)).digest()
    embedding_hash = hashlib.sha256(f32le(chunk["vector"])).digest()
    ident = chunk["id"].encode()
    leaf = hashlib.sha256(struct.pack(">I", len(ident)) + ident + content_hash + metadata_hash + embedding_hash).digest()
    return canonical(meta).decode(), content_hash.hex(), metadata_hash.hex(), embedding_hash.hex(), leaf


def state_root(chunks):
    ordered = sorted(chunks, key=lambda c: c["id"].encode())
    h = hashlib.sha256(b"cairn-state-root-v1\n" + struct.pack(">Q", len(ordered)))
    for c in ordered:
        h.update(leaf_and_hashes(c)[4])
    return h.hexdigest()


def check_canonical():
    doc = json.loads(load("canonical.json"))
    for case in doc["valid"]:
        check(f"canonical: {case['name']}", canonical(json.loads(case["input"])).decode(), case["canonical"])


def check_state_root():
    doc = json.loads(load("state-root.json"))
    for c in doc["chunks"]:
        check(f"vector hex {c['id']}", f32le(c["vector"]).hex(), c["vector_f32le_hex"])
        meta, content, metadata, embedding, leaf = leaf_and_hashes(c)
        e = c["expected"]
        check(f"metadata_json {c['id']}", meta, e["metadata_json"])
        check(f"content_hash {c['id']}", content, e["content_hash"])
        check(f"metadata_hash {c['id']}", metadata, e["metadata_hash"])
        check(f"embedding_hash {c['id']}", embedding, e["embedding_hash"])
        check(f"leaf {c['id']}", leaf.hex(), e["leaf"])
    check("state root", state_root(doc["chunks"]), doc["state_root"])
    return doc["chunks"]


def encode_delta(doc, old, new):
    def string(s):
        b = s.encode()
        return struct.pack("<I", len(b)) + b

    def optional(s):
        return b"\x00" if s is None else b"\x01" + string(s)

    old_by_id = {c["id"]: c for c in old}
    upserts = [c for c in new if c["id"] not in old_by_id or leaf_and_hashes(c)[4] != leaf_and_hashes(old_by_id[c["id"]])[4]]
    upserts.sort(key=lambda c: c["id"].encode())
    new_ids = {c["id"] for c in new}
    deletes = sorted((c["id"] for c in old if c["id"] not in new_ids), key=str.encode)
    check("delta upsert ids", [c["id"] for c in upserts], doc["upsert_ids"])
    check("delta delete ids", deletes, doc["delete_ids"])
    out = b"CAIRNDL1" + struct.pack("<QQ", doc["from_version"], doc["to_version"])
    out += bytes.fromhex(doc["from_state_root"]) + bytes.fromhex(doc["to_state_root"])
    out += struct.pack("<III", doc["dimension"], len(upserts), len(deletes))
    for c in upserts:
        out += string(c["id"]) + string(c["title"]) + string(c["content"]) + optional(c["scenario"])
        out += struct.pack("<I", len(c["tags"])) + b"".join(string(t) for t in c["tags"])
        out += optional(c["source"]) + f32le(c["vector"])
    for i in deletes:
        out += string(i)
    return out


def check_delta(old):
    doc = json.loads(load("delta.json"))
    new = doc["new_chunks"]
    check("delta from_state_root", state_root(old), doc["from_state_root"])
    check("delta to_state_root", state_root(new), doc["to_state_root"])
    encoded = encode_delta(doc, old, new)
    check("delta hex", encoded.hex(), doc["hex"])
    check("delta size", len(encoded), doc["size"])
    check("delta sha256", sha(encoded), doc["sha256"])


def check_manifest():
    expected = json.loads(load("manifest-expected.json"))
    seed = bytes.fromhex(expected["seed_hex"])
    check("test seed is 0x01..0x20", seed, bytes(range(1, 33)))
    private = Ed25519PrivateKey.from_private_bytes(seed)
    public = private.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    check("publisher.key", load("publisher.key").decode(), "cairn-ed25519-private-v1 " + base64.b64encode(seed).decode() + "\n")
    check("publisher.pub", load("publisher.pub").decode(), "cairn-ed25519-public-v1 " + base64.b64encode(public).decode() + "\n")
    key_id = hashlib.sha256(public).digest()[:8].hex()
    check("key id", key_id, expected["key_id"])

    raw = load("manifest.json")
    signed = json.loads(raw)
    check("manifest.json is canonical JSON plus a newline", raw, canonical(signed) + b"\n")
    manifest_bytes = canonical(signed["manifest"])
    check("canonical manifest", manifest_bytes.decode(), expected["manifest_canonical"])
    check("manifest publisher_key_id", signed["manifest"]["publisher_key_id"], key_id)
    message = b"cairn-manifest-v1\n" + manifest_bytes
    check("signed message sha256", sha(message), expected["signed_message_sha256"])
    signature = private.sign(message)  # Ed25519 is deterministic (RFC 8032)
    check("signature", base64.b64encode(signature).decode(), expected["signature_base64"])
    entry = signed["signatures"][0]
    check("signature entry", entry, {"algorithm": "ed25519", "key_id": key_id, "signature": expected["signature_base64"]})
    private.public_key().verify(base64.b64decode(entry["signature"]), message)  # raises if invalid
    check("file sha256", sha(raw), expected["file_sha256"])


check_canonical()
old_chunks = check_state_root()
check_delta(old_chunks)
check_manifest()
if failures:
    print(f"{failures} mismatch(es)")
    sys.exit(1)
print("all protocol vectors check out")
