#!/usr/bin/env python3
"""Independent cross-check of Cairn's protocol test vectors.

Run by hand from anywhere:  python3 protocol/vectors/check.py
Needs only the standard library and the `cryptography` package (for Ed25519 and AES).

It re-derives every expected value in this folder from the documents in protocol/ with code
that shares nothing with the Swift implementation: canonical JSON, chunk hashes, leaves and the
state root, the set hash, the delta's binary encodings (formats 1 and 2) and SHA-256s, the Ed25519 key, key id and signature
of the signed manifest, and (protocol/root.md) the keys and signatures of the root chain, the
chain walk that accepts or refuses a root, and the verdict on a manifest under a root's
signing policy. Exit status 0 means every value agrees.
"""
import base64, datetime, hashlib, json, os, re, struct, sys

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

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


def set_hash(leaves):
    """protocol/state-root.md, "Set hash": LtHash16 with an AES-256-CTR expansion of each leaf."""
    lanes = [0] * 1024
    for leaf in leaves:
        stream = Cipher(algorithms.AES(leaf), modes.CTR(bytes(16))).encryptor().update(bytes(2048))
        for i in range(1024):
            lanes[i] = (lanes[i] + stream[2 * i] + (stream[2 * i + 1] << 8)) & 0xFFFF
    body = b"".join(struct.pack("<H", lane) for lane in lanes)
    return hashlib.sha256(b"cairn-set-hash-v1\n" + struct.pack(">Q", len(leaves)) + body).hexdigest(), body


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
    check("set hash of no leaves", set_hash([])[0], doc["set_hash_empty"])
    digest, lanes = set_hash([leaf_and_hashes(c)[4] for c in doc["chunks"]])
    check("set hash", digest, doc["set_hash"])
    check("set hash lanes (first 32 bytes)", lanes[:32].hex(), doc["set_hash_lanes_prefix_hex"])
    # Any order gives the same set hash; removing a leaf's expansion gives the smaller set's.
    check("set hash, leaves reversed", set_hash([leaf_and_hashes(c)[4] for c in reversed(doc["chunks"])])[0], doc["set_hash"])
    return doc["chunks"]


def encode_delta(doc, old, new, with_set_hash=False):
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
    out = (b"CAIRNDL2" if with_set_hash else b"CAIRNDL1") + struct.pack("<QQ", doc["from_version"], doc["to_version"])
    out += bytes.fromhex(doc["from_state_root"]) + bytes.fromhex(doc["to_state_root"])
    if with_set_hash:
        out += bytes.fromhex(set_hash([leaf_and_hashes(c)[4] for c in new])[0])
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
    check("delta to_set_hash", set_hash([leaf_and_hashes(c)[4] for c in new])[0], doc["to_set_hash"])
    encoded = encode_delta(doc, old, new, with_set_hash=True)
    check("delta (format 2) hex", encoded.hex(), doc["format2_hex"])
    check("delta (format 2) size", len(encoded), doc["format2_size"])
    check("delta (format 2) sha256", sha(encoded), doc["format2_sha256"])


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


# protocol/root.md: the root of trust, written from the document.
ROOT_DOMAIN = b"cairn-root-v1\n"
MANIFEST_DOMAIN = b"cairn-manifest-v1\n"
MAX_SIZE = 2 ** 53
ROOT_FIELDS = {"format_version", "version", "created", "expires",
               "root_keys", "root_threshold", "signing_keys", "signing_threshold"}
TIMESTAMP = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})Z")
KEY_ID = re.compile(r"[0-9a-f]{16}")
ALGORITHM = re.compile(r"[a-z0-9][a-z0-9-]{0,31}")


def strict_json(raw):
    """json.loads, refusing what the Cairn parser refuses and Python would take: duplicate keys,
    fractions and exponents, NaN and Infinity."""
    def pairs(items):
        if len({k for k, _ in items}) != len(items):
            raise ValueError("duplicate object key")
        return dict(items)

    def refuse(text):
        raise ValueError(f"not an integer: {text}")

    return json.loads(raw.decode("utf-8"), object_pairs_hook=pairs, parse_float=refuse, parse_constant=refuse)


def is_int(value, low, high):
    return type(value) is int and low <= value <= high  # bool is not an integer here


def base64_of(text, length):
    """The bytes of canonical standard base64 of exactly `length` bytes, else None."""
    if not isinstance(text, str):
        return None
    try:
        raw = base64.b64decode(text, validate=True)
    except ValueError:
        return None
    return raw if len(raw) == length and base64.b64encode(raw).decode() == text else None


def key_id_of(public):
    return hashlib.sha256(public).digest()[:8].hex()


def timestamp(text):
    """RFC 3339 UTC, exactly YYYY-MM-DDTHH:MM:SSZ, a real date and time (no leap second), else None."""
    match = TIMESTAMP.fullmatch(text) if isinstance(text, str) else None
    try:
        return datetime.datetime(*map(int, match.groups())) if match else None
    except ValueError:
        return None


def envelope(raw, body, max_signatures):
    """A signed file (manifest.md, root.md): (body value, [(key_id, signature bytes)], problems)."""
    try:
        doc = strict_json(raw)
    except ValueError as error:
        return None, [], [f"not strict JSON: {error}"]
    if not isinstance(doc, dict) or set(doc) != {body, "signatures"}:
        return None, [], [f"the envelope must have exactly `{body}` and `signatures`"]
    signatures, entries, problems = doc["signatures"], [], []
    if not isinstance(signatures, list):
        return None, [], ["`signatures` must be an array"]
    if len(signatures) > max_signatures:
        problems.append(f"{len(signatures)} signatures, at most {max_signatures}")
    for i, entry in enumerate(signatures):
        if not isinstance(entry, dict) or set(entry) != {"algorithm", "key_id", "signature"}:
            problems.append(f"signatures[{i}] must have exactly `algorithm`, `key_id` and `signature`")
            continue
        signature = base64_of(entry["signature"], 64)
        if entry["algorithm"] != "ed25519":
            # Another algorithm's entry (since 2026-12-06): kept, never verified nor counted.
            if not isinstance(entry["algorithm"], str) or not ALGORITHM.fullmatch(entry["algorithm"]):
                problems.append(f"signatures[{i}].algorithm must be ed25519 or another algorithm's name")
            elif not all(isinstance(entry[k], str) and len(entry[k].encode()) <= 16384 for k in ("key_id", "signature")):
                problems.append(f"signatures[{i}]: key_id and signature must be strings of at most 16 KiB")
        elif not isinstance(entry["key_id"], str) or not KEY_ID.fullmatch(entry["key_id"]):
            problems.append(f"signatures[{i}].key_id must be 16 lowercase hex digits")
        elif signature is None:
            problems.append(f"signatures[{i}].signature must be canonical base64 of 64 bytes")
        else:
            entries.append((entry["key_id"], signature))
    return doc[body], entries, problems


def root_problems(root):
    """Every field rule of protocol/root.md "Fields of `root`"; [] when the root is well formed."""
    if not isinstance(root, dict):
        return ["`root` must be an object"]
    if "format_version" in root and not is_int(root["format_version"], 1, 1):
        return ["unsupported_format"]
    problems = [f"unknown field `{k}`" for k in sorted(set(root) - ROOT_FIELDS)]
    problems += [f"missing field `{k}`" for k in sorted(ROOT_FIELDS - set(root))]
    if problems:
        return problems
    if not is_int(root["version"], 1, MAX_SIZE):
        problems.append("`version` must be in 1...2^53")
    created, expires = timestamp(root["created"]), timestamp(root["expires"])
    if created is None:
        problems.append("`created` must be YYYY-MM-DDTHH:MM:SSZ")
    if expires is None:
        problems.append("`expires` must be YYYY-MM-DDTHH:MM:SSZ")
    elif created is not None and expires <= created:
        problems.append("`expires` must be later than `created`")
    for role in ("root", "signing"):
        keys, threshold = root[f"{role}_keys"], root[f"{role}_threshold"]
        if not isinstance(keys, list) or not 1 <= len(keys) <= 16:
            problems.append(f"`{role}_keys` must be an array of 1...16 keys")
            continue
        ids = []
        for i, key in enumerate(keys):
            if not isinstance(key, dict) or set(key) != {"key_id", "public_key"}:
                problems.append(f"`{role}_keys[{i}]` must have exactly `key_id` and `public_key`")
                continue
            public = base64_of(key["public_key"], 32)
            if public is None:
                problems.append(f"`{role}_keys[{i}].public_key` must be canonical base64 of 32 bytes")
            elif key["key_id"] != key_id_of(public):
                problems.append(f"`{role}_keys[{i}].key_id` is not the id of its public key")
            else:
                ids.append(key["key_id"])
        if any(a >= b for a, b in zip(ids, ids[1:])):
            problems.append(f"`{role}_keys` must be sorted by key_id and distinct")
        if not is_int(threshold, 1, len(keys)):
            problems.append(f"`{role}_threshold` must be in 1...{len(keys)}")
    return problems


def key_map(keys):
    return {k["key_id"]: base64.b64decode(k["public_key"]) for k in keys}


def verifies(public, signature, message):
    try:
        Ed25519PublicKey.from_public_bytes(public).verify(signature, message)
        return True
    except InvalidSignature:
        return False


def signers(message, entries, keys):
    """The distinct ids of `keys` (key_id -> public key) whose signatures verify over `message`.
    Signatures by other keys, and signatures that do not verify, are ignored."""
    return {key_id for key_id, signature in entries if key_id in keys and verifies(keys[key_id], signature, message)}


def accept_root(raw, trusted):
    """protocol/root.md "Verifying a root", on top of the trusted root `trusted` (None: root 1 or a
    pinned root). Returns (root, None) when accepted, (None, why) when refused (root_refused)."""
    root, entries, problems = envelope(raw, "root", 32)
    if problems:
        return None, "; ".join(problems)
    message = ROOT_DOMAIN + canonical(root)
    # T's root keys are counted before the root is read (since 2026-12-06).
    if trusted is not None:
        old = signers(message, entries, key_map(trusted["root_keys"]))
        if len(old) < trusted["root_threshold"]:
            return None, f"{len(old)} of root {trusted['version']}'s root keys signed, threshold {trusted['root_threshold']}"
    problems = root_problems(root)
    if problems:
        return None, "; ".join(problems)
    if trusted is not None and root["version"] != trusted["version"] + 1:
        return None, f"version {root['version']} does not follow {trusted['version']}"
    own = signers(message, entries, key_map(root["root_keys"]))
    if len(own) < root["root_threshold"]:
        return None, f"{len(own)} of its own root keys signed, threshold {root['root_threshold']}"
    return root, None


def manifest_verdict(raw, chain):
    """protocol/root.md "Verifying a manifest under a root": T is chain[-1]; a signing key of an
    earlier root of the chain that T does not list is revoked."""
    manifest, entries, problems = envelope(raw, "manifest", 16)
    if problems:
        return "manifest_malformed: " + "; ".join(problems)
    trusted = chain[-1]
    signing = key_map(trusted["signing_keys"])
    revoked = {}
    for earlier in chain[:-1]:
        revoked.update(key_map(earlier["signing_keys"]))
    revoked = {key_id: public for key_id, public in revoked.items() if key_id not in signing}
    message = MANIFEST_DOMAIN + canonical(manifest)
    verified = signers(message, entries, signing)
    if len(verified) >= trusted["signing_threshold"]:
        return "accepted"
    if verified:
        return "threshold_not_met"
    if signers(message, entries, revoked):
        return "key_revoked"
    if any(key_id in signing for key_id, _ in entries):
        return "signature_invalid"
    return "untrusted_key"


def check_signed_file(what, raw, body, max_signatures, domain, private_keys, every_signature):
    """A signed file of the vectors: canonical JSON plus one newline, and each signature (with
    `every_signature` False: each one that verifies) is the deterministic Ed25519 signature of the
    named test key over the file's signed message, re-signed here."""
    try:
        check(f"{what}: file is canonical JSON plus a newline", raw, canonical(strict_json(raw)) + b"\n")
    except ValueError as error:
        check(f"{what}: file is strict JSON", str(error), None)
    value, entries, problems = envelope(raw, body, max_signatures)
    check(f"{what}: envelope", problems, [])
    if value is None:
        return None, []
    message = domain + canonical(value)
    for key_id, signature in entries:
        private = private_keys.get(key_id)
        check(f"{what}: signature by {key_id} is by a test key", private is not None, True)
        if private is not None and (every_signature or verifies(private.public_key().public_bytes(
                serialization.Encoding.Raw, serialization.PublicFormat.Raw), signature, message)):
            check(f"{what}: signature by {key_id}", base64.b64encode(signature).decode(),
                  base64.b64encode(private.sign(message)).decode())  # Ed25519 is deterministic
    return value, entries


def check_roots():
    doc = json.loads(load("root-chain.json"))
    private_keys = {}  # key id -> test key, to re-sign
    for name, key in sorted(doc["keys"].items()):
        seed = bytes.fromhex(key["seed_hex"])
        check(f"root-chain key {name}: seed is 32 equal bytes", (len(seed), len(set(seed))), (32, 1))
        private = Ed25519PrivateKey.from_private_bytes(seed)
        public = private.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        check(f"root-chain key {name}: public_key", base64.b64encode(public).decode(), key["public_key"])
        check(f"root-chain key {name}: key_id", key_id_of(public), key["key_id"])
        private_keys[key_id_of(public)] = private
    check("root-chain keys are distinct", len(private_keys), len(doc["keys"]))

    chain = []  # the roots the walk accepted, root 1 first
    for position, vector in enumerate(doc["roots"], start=1):
        what = f"root {vector['version']}"
        raw = vector["file"].encode()
        check(f"{what}: position in the chain", vector["version"], position)
        root, _ = check_signed_file(what, raw, "root", 32, ROOT_DOMAIN, private_keys, True)
        if root is None:
            break
        check(f"{what}: field rules", root_problems(root), [])
        check(f"{what}: version", root.get("version"), vector["version"])
        check(f"{what}: signed message sha256", sha(ROOT_DOMAIN + canonical(root)), vector["signed_message_sha256"])
        accepted, why = accept_root(raw, chain[-1] if chain else None)
        check(f"{what}: accepted by the chain walk", why, None)
        if accepted is None:
            break  # nothing later can follow it
        chain.append(accepted)

    for vector in doc["refused_roots"]:
        what = f"refused root '{vector['name']}'"
        after = vector["after"]
        check(f"{what}: root {after} was accepted", 1 <= after <= len(chain), True)
        if not 1 <= after <= len(chain):
            continue
        raw = vector["file"].encode()
        check_signed_file(what, raw, "root", 32, ROOT_DOMAIN, private_keys, False)
        accepted, why = accept_root(raw, chain[after - 1])
        check(f"{what} after root {after}", "root_refused" if accepted is None else "accepted", vector["code"])

    for vector in doc["manifests"]:
        what = f"manifest '{vector['name']}'"
        number = vector["root"]
        check(f"{what}: root {number} was accepted", 1 <= number <= len(chain), True)
        if not 1 <= number <= len(chain):
            continue
        raw = vector["file"].encode()
        check_signed_file(what, raw, "manifest", 16, MANIFEST_DOMAIN, private_keys, False)
        check(f"{what} under root {number}", manifest_verdict(raw, chain[:number]), vector["verdict"])


def check_model_folders():
    """protocol/data-directory.md, "Model folders"."""
    doc = json.loads(load("model-folder.json"))
    for vector in doc["models"]:
        files = vector["files"]
        name = None
        if any(f["name"] == "model.safetensors" for f in files):
            lines = "".join(f"{f['name']} {f['sha256']} {f['size']}\n"
                            for f in sorted(files, key=lambda f: f["name"].encode()))
            name = hashlib.sha256(lines.encode()).hexdigest()
        check(f"model folder of {vector['what']}", name, vector["folder"])


check_canonical()
check_model_folders()
old_chunks = check_state_root()
check_delta(old_chunks)
check_manifest()
check_roots()
if failures:
    print(f"{failures} mismatch(es)")
    sys.exit(1)
print("all protocol vectors check out")
