@testable import CairnCore
import Foundation
import Testing

@Suite struct ManifestTests {
    struct Expected: Decodable { var key_id: String; var manifest_canonical: String; var signature_base64: String }

    func fixture() throws -> (file: [UInt8], key: PublisherKey, manifest: Manifest) {
        let file = try protocolFile("vectors/manifest.json")
        let key = try testPublisherKey()
        return (file, key, try SignedManifest.decodeAndVerify(file, trustedKeys: [key.publicKey]))
    }

    /// The vector's manifest as a mutable JSON object, for building hostile variants.
    func manifestMembers() throws -> [String: CanonicalJSON] {
        guard case .object(let outer) = try CanonicalJSON.parse(try protocolFile("vectors/manifest.json")),
              case .object(let members)? = outer["manifest"] else { throw CoreError(.invalidArgument, "fixture") }
        return members
    }

    @Test func givenTheVectorFile_whenVerifiedWithTheTestKey_thenTheManifestMatches() throws {
        let (_, key, manifest) = try fixture()
        let expected = try vector(Expected.self, "manifest-expected.json")
        #expect(manifest.canonicalJSON.bytes == Array(expected.manifest_canonical.utf8))
        #expect(manifest.channel == "test" && manifest.version == 2 && manifest.dimension == 4)
        #expect(manifest.created.rfc3339 == "2026-11-21T20:00:00Z")
        #expect(manifest.publisherKeyID.hex == expected.key_id && key.keyID.hex == expected.key_id)
        #expect(manifest.canaries == [Canary(query: "How long should I boil water?", expect: ["water-001"], k: 3)])
        #expect(manifest.deltas.first?.fromVersion == 1)
    }

    #if os(Linux)
    @Test func givenTheVectorManifest_whenSignedAgain_thenTheFileIsByteIdentical() throws {
        // Ed25519 is deterministic with BoringSSL; CryptoKit on Apple platforms randomises.
        let (file, key, manifest) = try fixture()
        #expect(SignedManifest.encode(manifest, signingKey: key) == file)
    }
    #endif

    @Test func givenAFreshKey_whenEncodedAndDecoded_thenRoundTrips() throws {
        let (_, _, manifest) = try fixture()
        let key = PublisherKey.generate()
        let file = SignedManifest.encode(manifest, signingKey: key)
        #expect(file.last == 0x0A)
        #expect(try SignedManifest.decodeAndVerify(file, trustedKeys: [key.publicKey]) == manifest)
    }

    @Test func givenATamperedByte_whenVerified_thenSignatureInvalid() throws {
        var file = try fixture().file
        let channel = Array(#""channel":"test""#.utf8)
        let at = file.indices.first { file[$0...].starts(with: channel) }!
        file[at + channel.count - 2] = UInt8(ascii: "x")
        let error = coreError { _ = try SignedManifest.decodeAndVerify(file, trustedKeys: [try testPublisherKey().publicKey]) }
        #expect(error?.code == .signatureInvalid)
    }

    @Test func givenNonCanonicalWhitespace_whenVerified_thenStillAccepted() throws {
        let (file, key, manifest) = try fixture()
        var spaced = Array(String(decoding: file, as: UTF8.self).replacingOccurrences(of: ",\"", with: ",\n  \"").utf8)
        spaced.insert(0x20, at: 0)
        #expect(try SignedManifest.decodeAndVerify(spaced, trustedKeys: [key.publicKey]) == manifest)
    }

    @Test func givenAnUnknownKey_whenVerified_thenUntrustedKey() throws {
        let file = try fixture().file
        let error = coreError { _ = try SignedManifest.decodeAndVerify(file, trustedKeys: [PublisherKey.generate().publicKey]) }
        #expect(error?.code == .untrustedKey)
        #expect(coreError { _ = try SignedManifest.decodeAndVerify(file, trustedKeys: []) }?.code == .untrustedKey)
    }

    @Test func givenNoSignatures_whenVerified_thenUntrustedKey() throws {
        let members = try manifestMembers()
        let file = CanonicalJSON.object(["manifest": .object(members), "signatures": .array([])]).bytes
        let error = coreError { _ = try SignedManifest.decodeAndVerify(file, trustedKeys: [try testPublisherKey().publicKey]) }
        #expect(error?.code == .untrustedKey)
    }

    @Test func givenATrustedKeyIdWithAnotherKeysSignature_whenVerified_thenSignatureInvalid() throws {
        let key = try testPublisherKey()
        let members = try manifestMembers()
        let forged = PublisherKey.generate().sign(SignedManifest.signedBytes(.object(members)))
        let entry = CanonicalJSON.object(["key_id": .string(key.keyID.hex), "algorithm": .string("ed25519"),
                                          "signature": .string(Base64.encode(forged))])
        let file = CanonicalJSON.object(["manifest": .object(members), "signatures": .array([entry])]).bytes
        #expect(coreError { _ = try SignedManifest.decodeAndVerify(file, trustedKeys: [key.publicKey]) }?.code == .signatureInvalid)
    }

    @Test("Given a manifest signed with Ed25519 and with another algorithm (a publisher moving its fleet to a second algorithm), then it verifies by its Ed25519 signature, the other entry is kept when the file is written again and never counted; signed with the other alone, it is untrusted_key naming that algorithm; an algorithm that is not a name is malformed")
    func givenAnotherAlgorithmsSignature_whenVerified_thenItIsKeptAndNotCounted() throws {
        let (file, key, manifest) = try fixture()
        guard case .object(var outer) = try CanonicalJSON.parse(file), case .array(let ours)? = outer["signatures"] else {
            Issue.record("the fixture's file has no signatures array"); return
        }
        let other = CanonicalJSON.object(["algorithm": .string("ml-dsa-65"), "key_id": .string("pq-2031"),
                                          "signature": .string(String(repeating: "A", count: 4_412))])
        outer["signatures"] = .array(ours + [other])
        let both = CanonicalJSON.object(outer).bytes + [0x0A]
        #expect(try SignedManifest.decodeAndVerify(both, trustedKeys: [key.publicKey]) == manifest)
        let envelope = try SignedManifest.decodeEnvelope(both)
        #expect(envelope.signatures.count == 1 && envelope.foreignAlgorithms == ["ml-dsa-65"])
        #expect(envelope.adding(SignedEnvelope.sign(envelope.content, domain: SignedManifest.domain, keys: [PublisherKey.generate()]))
                    .encode(field: "manifest").count > both.count)
        #expect(try SignedManifest.decodeEnvelope(envelope.encode(field: "manifest")).foreign == [other])

        outer["signatures"] = .array([other])
        let alone = coreError { _ = try SignedManifest.decodeAndVerify(CanonicalJSON.object(outer).bytes + [0x0A], trustedKeys: [key.publicKey]) }
        #expect(alone?.code == .untrustedKey && alone?.message.contains("only ml-dsa-65") == true, "\(String(describing: alone))")

        for name in ["ED25519", "", String(repeating: "a", count: 33), "rsa pss"] {
            outer["signatures"] = .array(ours + [.object(["algorithm": .string(name), "key_id": .string("k"), "signature": .string("s")])])
            let error = coreError { _ = try SignedManifest.decodeAndVerify(CanonicalJSON.object(outer).bytes + [0x0A], trustedKeys: [key.publicKey]) }
            #expect(error?.code == .manifestMalformed, "\(name)")
        }
    }

    @Test func givenTooManySignatures_whenVerified_thenRefusedBeforeCheckingAny() throws {
        let (file, key, _) = try fixture()
        guard case .object(var outer) = try CanonicalJSON.parse(file), case .array(let one)? = outer["signatures"] else {
            Issue.record("the fixture's file has no signatures array"); return
        }
        outer["signatures"] = .array(Array(repeating: one[0], count: 17))
        let error = coreError { _ = try SignedManifest.decodeAndVerify(CanonicalJSON.object(outer).bytes, trustedKeys: [key.publicKey]) }
        #expect(error?.code == .manifestMalformed)
    }

    @Test func givenNotJSON_whenVerified_thenManifestMalformedWithCause() throws {
        for bytes in [[], Array("not json".utf8), Array(#"{"manifest":{},"signatures":[],"x":1.5}"#.utf8)] as [[UInt8]] {
            let error = coreError { _ = try SignedManifest.decodeAndVerify(bytes, trustedKeys: [try testPublisherKey().publicKey]) }
            #expect(error?.code == .manifestMalformed)
            #expect((error?.cause as? CoreError)?.code == .jsonMalformed)
        }
    }

    @Test func givenFormatVersion2_whenVerified_thenUnsupportedFormat() throws {
        var members = try manifestMembers()
        members["format_version"] = .integer(2)
        members["something_new"] = .string("a field version 2 might add")
        let key = try testPublisherKey()
        let error = coreError { _ = try SignedManifest.decodeAndVerify(signRaw(.object(members), with: key), trustedKeys: [key.publicKey]) }
        #expect(error?.code == .unsupportedFormat)
    }

    /// Signed variants with a field or a value this build does not know: each is refused with
    /// `.unsupportedFormat` naming `field` and saying to upgrade (newer software wrote it).
    static let unknown: [(String, String, @Sendable (inout [String: CanonicalJSON]) -> Void)] = [
        ("unknown top-level field", "unknown field `extra`", { $0["extra"] = .bool(true) }),
        ("unknown compression", "snapshot.compression", {
            guard case .object(var s)? = $0["snapshot"] else { return }
            s["compression"] = .string("zstd"); $0["snapshot"] = .object(s)
        }),
        ("bad canary mode", "canaries[0].mode", {
            guard case .array(let c)? = $0["canaries"], case .object(var first) = c[0] else { return }
            first["mode"] = .string("fuzzy"); $0["canaries"] = .array([.object(first)])
        }),
        ("bad model file name", "model.files[0].name", {
            guard case .object(var m)? = $0["model"], case .array(let f)? = m["files"], case .object(var first) = f[0] else { return }
            first["name"] = .string("../etc/passwd"); m["files"] = .array([.object(first)]); $0["model"] = .object(m)
        }),
        ("unknown field in the snapshot", "`snapshot` has unknown field `shards`", {
            guard case .object(var s)? = $0["snapshot"] else { return }
            s["shards"] = .integer(4); $0["snapshot"] = .object(s)
        }),
    ]

    @Test(arguments: 0..<unknown.count)
    func givenASignedManifestWithSomethingUnknown_whenVerified_thenUnsupportedFormatNamingIt(index: Int) throws {
        let (name, field, mutate) = Self.unknown[index]
        var members = try manifestMembers()
        mutate(&members)
        let key = try testPublisherKey()
        let error = coreError { _ = try SignedManifest.decodeAndVerify(signRaw(.object(members), with: key), trustedKeys: [key.publicKey]) }
        #expect(error?.code == .unsupportedFormat, "\(name)")
        #expect(error?.message.contains(field) == true && error?.message.contains("upgrade") == true, "\(name): \(error?.message ?? "")")
        // Signed by a key not trusted, the same file is refused before it is read.
        let stranger = coreError { _ = try SignedManifest.decodeAndVerify(signRaw(.object(members), with: PublisherKey.generate()), trustedKeys: [key.publicKey]) }
        #expect(stranger?.code == .untrustedKey, "\(name)")
    }

    /// Signed variants that must each be refused with `.manifestMalformed` naming `field`.
    static let malformed: [(String, String, @Sendable (inout [String: CanonicalJSON]) -> Void)] = [
        ("missing field", "state_root", { $0["state_root"] = nil }),
        ("missing format_version", "format_version", { $0["format_version"] = nil }),
        ("ill-typed field", "version", { $0["version"] = .string("2") }),
        ("version zero", "version", { $0["version"] = .integer(0) }),
        ("bad hex", "state_root", { $0["state_root"] = .string(String(repeating: "G", count: 64)) }),
        ("uppercase hex", "state_root", { $0["state_root"] = .string(String(repeating: "A", count: 64)) }),
        ("bad channel", "channel", { $0["channel"] = .string("Test/..") }),
        ("bad time", "created", { $0["created"] = .string("2026-02-30T00:00:00Z") }),
        ("expires before created", "expires", { $0["expires"] = .string("2026-01-01T00:00:00Z") }),
        ("negative size", "snapshot.size", {
            guard case .object(var s)? = $0["snapshot"] else { return }
            s["size"] = .integer(-1); $0["snapshot"] = .object(s)
        }),
        ("size above 2^53", "snapshot.uncompressed_size", {
            guard case .object(var s)? = $0["snapshot"] else { return }
            s["uncompressed_size"] = .integer((1 << 53) + 1); $0["snapshot"] = .object(s)
        }),
        ("dimension mismatch", "model.dimension", { $0["dimension"] = .integer(5) }),
        // Above 16,384 a row's sign-bit distance no longer fits the 16 bits the dense search keeps.
        ("dimension above 16384", "dimension", {
            $0["dimension"] = .integer(65_536)
            guard case .object(var m)? = $0["model"] else { return }
            m["dimension"] = .integer(65_536); $0["model"] = .object(m)
        }),
        ("delta from a later version", "deltas[0].from_version", {
            guard case .array(let d)? = $0["deltas"], case .object(var first) = d[0] else { return }
            first["from_version"] = .integer(7); $0["deltas"] = .array([.object(first)])
        }),
    ]

    @Test(arguments: 0..<malformed.count)
    func givenASignedButMalformedManifest_whenVerified_thenManifestMalformedNamingTheField(index: Int) throws {
        let (name, field, mutate) = Self.malformed[index]
        var members = try manifestMembers()
        mutate(&members)
        let key = try testPublisherKey()
        let error = coreError { _ = try SignedManifest.decodeAndVerify(signRaw(.object(members), with: key), trustedKeys: [key.publicKey]) }
        #expect(error?.code == .manifestMalformed, "\(name)")
        #expect(error?.message.contains(field) == true, "\(name): \(error?.message ?? "")")
    }

    @Test func givenDuplicateKeysFloatsOrDeepNesting_whenVerified_thenRefused() throws {
        let key = try testPublisherKey().publicKey
        let file = String(decoding: try fixture().file, as: UTF8.self)
        let duplicate = file.replacingOccurrences(of: #""version":2"#, with: #""version":2,"version":3"#)
        let float = file.replacingOccurrences(of: #""version":2"#, with: #""version":2.0"#)
        let deep = #"{"manifest":"# + String(repeating: "[", count: 80) + String(repeating: "]", count: 80) + "}"
        for text in [duplicate, float, deep] {
            let error = coreError { _ = try SignedManifest.decodeAndVerify(Array(text.utf8), trustedKeys: [key]) }
            #expect(error?.code == .manifestMalformed)
        }
    }

    @Test func givenEveryPrefixAndRandomMutations_whenVerified_thenNeverCrashesAndNeverAccepts() throws {
        let (file, key, manifest) = try fixture()
        for length in 0..<file.count - 1 {
            #expect((try? SignedManifest.decodeAndVerify(Array(file[..<length]), trustedKeys: [key.publicKey])) == nil)
        }
        for _ in 0..<1_000 {
            var mutated = file
            mutated[Int.random(in: 0..<mutated.count)] ^= UInt8.random(in: 1...255)
            if let accepted = try? SignedManifest.decodeAndVerify(mutated, trustedKeys: [key.publicKey]) {
                #expect(accepted == manifest, "only insignificant bytes (e.g. white space) may change")
            }
        }
    }

    struct ModelFolderVectors: Decodable {
        struct File: Decodable { let name: String; let sha256: String; let size: Int }
        struct Model: Decodable { let what: String; let files: [File]; let folder: String? }
        let models: [Model]
    }

    @Test("A model's folder name is the vector's: the weights and every other file count, so another vocabulary gets another folder")
    func modelFolderNames() throws {
        let vectors = try vector(ModelFolderVectors.self, "model-folder.json")
        #expect(vectors.models.count == 3)
        for model in vectors.models {
            let files = model.files.map { Manifest.ModelFile(name: $0.name, sha256: ContentID(hex: $0.sha256)!, size: $0.size) }
            // The order files are listed in does not matter.
            for listed in [files, files.reversed()] {
                let name = Manifest.Model(id: "m", dimension: 4, maxTokens: 16, files: listed).folderName
                #expect(name == model.folder, "\(model.what)")
            }
        }
        #expect(Set(vectors.models.compactMap(\.folder)).count == 2)
    }
}
