import Crypto
import Testing
@testable import CairnCore

@Suite struct KeyTests {
    struct Expected: Decodable { var seed_hex: String; var key_id: String; var public_key_base64: String }

    @Test func givenTheTestKeyFiles_whenParsed_thenSeedPublicKeyAndIdMatch() throws {
        let expected = try vector(Expected.self, "manifest-expected.json")
        let key = try testPublisherKey()
        let publicKey = try PublicKey(fileText: String(decoding: try protocolFile("vectors/publisher.pub"), as: UTF8.self))
        #expect(key.seed == Array(1...32))
        #expect(hexString(key.seed) == expected.seed_hex)
        #expect(key.publicKey == publicKey)
        #expect(publicKey.keyID.hex == expected.key_id)
        #expect(key.fileText == String(decoding: try protocolFile("vectors/publisher.key"), as: UTF8.self))
        #expect(publicKey.fileText == "cairn-ed25519-public-v1 \(expected.public_key_base64)\n")
    }

    @Test func givenAGeneratedKey_whenWrittenAndRead_thenRoundTrips() throws {
        let key = PublisherKey.generate()
        #expect(try PublisherKey(fileText: key.fileText).seed == key.seed)
        #expect(try PublicKey(fileText: key.publicKey.fileText) == key.publicKey)
        #expect(try PublicKey(fileText: String(key.publicKey.fileText.dropLast())) == key.publicKey, "newline optional")
        #expect(!key.description.contains(Base64.encode(key.seed)))
    }

    @Test func givenASignature_whenCheckedAgainstOtherBytes_thenInvalid() throws {
        let key = try testPublisherKey()
        let signature = key.sign(Array("a".utf8))
        #expect(key.publicKey.isValidSignature(signature, for: Array("a".utf8)))
        #expect(!key.publicKey.isValidSignature(signature, for: Array("b".utf8)))
        #expect(!key.publicKey.isValidSignature(Array(signature.dropLast()), for: Array("a".utf8)))
    }

    @Test func givenMalformedKeyFiles_whenParsed_thenKeyMalformedWithAClearMessage() throws {
        let publicText = try testPublisherKey().publicKey.fileText
        let privateText = try testPublisherKey().fileText
        let wrongKind = coreError { _ = try PublisherKey(fileText: publicText) }
        #expect(wrongKind?.code == .keyMalformed)
        #expect(wrongKind?.message.contains("public key file") == true)
        #expect(coreError { _ = try PublicKey(fileText: privateText) }?.message.contains("private key file") == true)
        let cases = [
            "", "cairn-ed25519-public-v1", "cairn-ed25519-public-v1 !!!!\n", "cairn-ed25519-public-v1 AAEC\n",
            "cairn-ed25519-public-v2 \(Base64.encode(Array(repeating: 1, count: 32)))\n",
            "cairn-ed25519-public-v1  \(Base64.encode(Array(repeating: 1, count: 32)))\n",
            "cairn-ed25519-public-v1 \(Base64.encode(Array(repeating: 1, count: 33)))\n",
        ]
        for text in cases {
            #expect(coreError { _ = try PublicKey(fileText: text) }?.code == .keyMalformed, "\(text)")
        }
        #expect(coreError { _ = try PublisherKey(seed: [1, 2, 3]) }?.code == .keyMalformed)
        #expect(coreError { _ = try PublicKey(rawBytes: []) }?.code == .keyMalformed)
    }

    @Test func givenKeyIDHex_whenParsed_thenStrict() {
        #expect(KeyID(hex: "65b60673d6ed884b")?.hex == "65b60673d6ed884b")
        #expect(KeyID(hex: "65B60673D6ED884B") == nil)
        #expect(KeyID(hex: "65b60673d6ed884") == nil)
        #expect(KeyID(hex: "65b60673d6ed884bxx") == nil)
    }

    @Test("Given the identity point as a key, when parsed, then it is refused, because with it the signature of the base point and scalar 1 verifies for any message; so are the other small-order points and a non-canonical y, and real keys still parse")
    func weakKeysRefused() throws {
        let identity = [1] + [UInt8](repeating: 0, count: 31)
        // Why: swift-crypto on Linux (BoringSSL) takes the identity, and R = B, S = 1 passes
        // R = [S]B − [h]A for every message h.
        let base: [UInt8] = [0x58] + [UInt8](repeating: 0x66, count: 31)
        let forged = base + [1] + [UInt8](repeating: 0, count: 31)
        let raw = try Curve25519.Signing.PublicKey(rawRepresentation: identity)
        #expect(raw.isValidSignature(forged, for: Array("any manifest at all".utf8)))

        var weak = PublicKey.smallOrderYs + PublicKey.smallOrderYs.map { var signed = $0; signed[31] |= 0x80; return signed }
        weak.append([0xED] + [UInt8](repeating: 0xFF, count: 30) + [0x7F])  // y = p, a second spelling of y = 0
        weak.append([0xEE] + [UInt8](repeating: 0xFF, count: 30) + [0x7F])  // y = p + 1, of the identity
        weak.append([0xF0] + [UInt8](repeating: 0xFF, count: 30) + [0xFF])  // y = p + 3, of y = 3
        for bytes in weak {
            #expect(throws: CoreError.self) { try PublicKey(rawBytes: bytes) }
        }
        for _ in 0..<64 { _ = try PublicKey(rawBytes: Array(Curve25519.Signing.PrivateKey().publicKey.rawRepresentation)) }
    }

    @Test("Given a staged envelope holding a damaged signature by key K, when a copy's valid signature by K is added, then K counts, and the verified envelope keeps K's valid signature alone")
    func damagedSignatureDoesNotBlockAValidOne() {
        let key = PublisherKey.generate()
        let content = CanonicalJSON.object(["version": .integer(5), "channel": .string("stable")])
        let valid = SignedEnvelope.sign(content, domain: SignedManifest.domain, keys: [key])
        var flipped = valid[0].bytes
        flipped[10] ^= 0x01
        let damaged = SignedEnvelope(content: content, signatures: [.init(keyID: key.keyID, bytes: flipped)])
        #expect(damaged.validSigners(among: [key.publicKey], domain: SignedManifest.domain).isEmpty)
        let merged = damaged.adding(valid)
        #expect(merged.validSigners(among: [key.publicKey], domain: SignedManifest.domain) == [key.keyID])
        #expect(merged.verified(among: [key.publicKey], domain: SignedManifest.domain).signatures == valid)
        #expect(merged.adding(valid).signatures.count == 2, "an exact duplicate is not added again")
    }
}
