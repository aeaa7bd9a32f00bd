import CairnCore
import CairnEmbedding
import CairnIndex
import CairnStore
import CairnTestSupport
import Foundation
import Testing
@testable import CairnPublish

@Suite("Publishing", .offCooperativePool)
struct PublishRoundTripTests {
    @Test("Given the example knowledge base, when it is published, then the snapshot holds every chunk with its model vector")
    func roundTrip() throws {
        let workspace = try Workspace()
        let report = try workspace.publish(SampleKB.examplePath)
        let source = try SourceReader.read(path: SampleKB.examplePath)
        #expect(report.version == 1)
        #expect(report.chunkCount == source.count)
        #expect(report.embedded == source.count)

        let records = try workspace.records(1)
        let byID = Dictionary(uniqueKeysWithValues: records.map { ($0.chunk.id, $0) })
        #expect(records.count == source.count)
        for chunk in source {
            let record = try #require(byID[chunk.id])
            #expect(record.chunk == chunk)
            // Batched embedding may differ from a lone one in the last bits (summation order).
            let alone = workspace.embedder.embed(chunk.embeddingText)
            #expect(record.vector.count == alone.count)
            #expect(SentenceEmbedder.cosine(record.vector, alone) > 0.99999)
        }
        let manifest = try workspace.manifest()
        #expect(manifest.stateRoot == StateRoot.compute(chunks: records))
        #expect(manifest.model.id == "sentence-transformers/all-MiniLM-L6-v2")
        #expect(manifest.model.files.map(\.name) == ["model.safetensors", "vocab.txt", "config.json"])
        #expect(manifest.expires.secondsSince1970 - manifest.created.secondsSince1970 == 30 * 86_400)
        #expect(FileManager.default.fileExists(atPath: workspace.repo + "/keys/\(workspace.key.keyID.hex).pub"))
        #expect(workspace.verify().problems == [])
    }

    @Test("Given a published version, when a few chunks change, then only those are embedded and the rest reuse the snapshot's vectors, with --keep-deltas 0 too")
    func incremental() throws {
        let workspace = try Workspace()
        var chunks = SampleKB.chunks(count: 20)
        _ = try workspace.publish(try workspace.writeSource(chunks), cache: false)
        chunks[3].content += " storm"
        chunks[7].title = "Renamed topic"
        chunks.remove(at: 10)
        chunks.append(Chunk(id: "chunk-new", title: "New", content: "radio battery torch"))
        chunks[12].tags = ["changed"]  // metadata only: the embedded text is unchanged
        let report = try workspace.publish(try workspace.writeSource(chunks), cache: false)
        #expect(report.version == 2)
        #expect(report.embedded == 3)
        #expect(report.reusedFromSnapshot == 17)
        #expect(report.reusedFromCache == 0)
        // --keep-deltas 0 builds no delta, yet the newest version's vectors are still reused.
        chunks[0].content += " again"
        let third = try workspace.publish(try workspace.writeSource(chunks), keepDeltas: 0, cache: false)
        #expect(third.embedded == 1 && third.reusedFromSnapshot == 19, "\(third.embedded) embedded")
        #expect(try workspace.manifest(3).deltas.isEmpty)
    }

    @Test("Given a published version and a filled embedding cache, when the model's vocabulary changes under the same weights (a damaged vocab.txt replaced), then no vector is reused from that version or the cache: each chunk is embedded again")
    func changedVocabularyStopsReuse() throws {
        let workspace = try Workspace()
        let source = try workspace.writeSource(SampleKB.chunks(count: 12))
        _ = try workspace.publish(source)
        // Another token in the last line: the same count, so the weights still fit it.
        let vocabulary = workspace.modelDir + "/vocab.txt"
        var lines = try String(contentsOfFile: vocabulary, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false)
        let last = lines.lastIndex { !$0.isEmpty }!
        lines[last] = "zzzreplacedtoken"
        try lines.joined(separator: "\n").write(toFile: vocabulary, atomically: true, encoding: .utf8)
        let changed = try PublishedModel(directory: workspace.modelDir, dimension: workspace.embedder.dimension,
                                         maxTokens: workspace.embedder.maximumTokens)
        let publisher = Publisher(configuration: PublishConfiguration(repository: workspace.repo, channel: "stable", source: source),
                                  key: workspace.key, embedder: workspace.embedder, model: changed,
                                  cache: try EmbeddingCache(path: workspace.cachePath), logger: .init(label: "test"))
        let report = try publisher.publish()
        #expect(report.reusedFromSnapshot == 0 && report.reusedFromCache == 0 && report.embedded == 12,
                "\(report.reusedFromSnapshot) from the snapshot, \(report.reusedFromCache) from the cache, \(report.embedded) embedded")
    }

    @Test("Given a published version whose model blob was since damaged in the repository (the same size, other bytes), when the next version is published, then the blob is written whole again and a warning names it and says to purge it from a cache or CDN; a publish that repairs nothing warns of nothing")
    func repairedBlobNamed() throws {
        let workspace = try Workspace()
        let chunks = SampleKB.chunks(count: 5)
        _ = try workspace.publish(try workspace.writeSource(chunks), cache: false)
        let vocabulary = try #require(try workspace.manifest().model.files.first { $0.name == "vocab.txt" })
        let path = BlobStore(root: workspace.repo).path(of: vocabulary.sha256)
        var bytes = try FileSystem.read(path)
        bytes[0] ^= 0x20
        try FileSystem.writeAtomically(bytes, to: path, mode: 0o644)
        var changed = chunks
        changed[0].content += " again"
        let report = try workspace.publish(try workspace.writeSource(changed), cache: false)
        let warning = report.warnings.first { $0.contains("damaged") } ?? ""
        #expect(warning.contains(vocabulary.sha256.hex) && warning.contains("purge") && warning.contains("CDN"), "\(report.warnings)")
        #expect(try FileSystem.sha256(of: path).id == vocabulary.sha256)
        changed[1].content += " again"
        #expect(try workspace.publish(try workspace.writeSource(changed), cache: false).warnings.allSatisfy { !$0.contains("damaged") })
    }

    @Test("Given a cache filled by one repository, when another repository publishes the same chunks, then nothing is embedded")
    func cacheAcrossRepositories() throws {
        let first = try Workspace()
        let chunks = SampleKB.chunks(count: 12)
        let cold = try first.publish(try first.writeSource(chunks))
        #expect(cold.embedded == 12)
        let second = try Workspace()
        let warm = try second.publish(try second.writeSource(chunks), cachePath: first.cachePath)
        #expect(warm.embedded == 0)
        #expect(warm.reusedFromCache == 12)
        #expect(try second.records(1).map(\.vector) == (try first.records(1)).map(\.vector))
    }

    @Test("Given four versions, when the fifth is published, then a delta from every kept version reproduces its state root (and, in format 2, carries its set hash)", arguments: [2, 1])
    func deltasFromEveryKeptVersion(deltaFormat: Int) throws {
        let workspace = try Workspace()
        var chunks = SampleKB.chunks(count: 15)
        for round in 0..<5 {
            if round > 0 {
                chunks[round].content += " shelter"
                chunks.append(Chunk(id: "added-\(round)", title: "Added", content: "map flood water \(round)"))
                chunks.removeFirst()
            }
            _ = try workspace.publish(try workspace.writeSource(chunks), keepDeltas: 3, deltaFormat: deltaFormat)
        }
        let manifest = try workspace.manifest()
        #expect(manifest.version == 5)
        #expect(manifest.deltas.map(\.fromVersion) == [2, 3, 4])
        let target = try workspace.records(5)
        for ref in manifest.deltas {
            let compressed = try workspace.repository.blob(ref.sha256, size: ref.size, what: "delta")
            let delta = try Delta.decode(try CairnStore.Zlib.decompress(compressed, expectedSize: ref.uncompressedSize))
            let applied = try delta.apply(to: try workspace.records(ref.fromVersion))
            #expect(StateRoot.compute(chunks: applied) == manifest.stateRoot)
            let setHash = SetHash(leaves: target.map(\.stateRecord.leaf)).digest(count: target.count)
            #expect(delta.toSetHash == (deltaFormat == 2 ? setHash : nil))
            #expect(applied.map(\.chunk.id) == target.map(\.chunk.id).sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) })
        }
        #expect(workspace.verify().problems == [])
    }

    @Test("Given version 1 created ten years ahead of the publisher's clock (a clock since set back), when version 2 is published, then it is created no earlier than version 1 and expires after it")
    func createdNeverGoesBack() throws {
        // A publisher clock that steps back cannot be made for real here: version 1's manifest is
        // re-signed with the key, created and expiring ten years later, as a clock ahead would have.
        let workspace = try Workspace()
        try workspace.publish(try workspace.writeSource(SampleKB.chunks(count: 6)))
        var ahead = try workspace.manifest(1)
        let tenYears: Int64 = 3_650 * 86_400
        ahead.created = Timestamp(secondsSince1970: ahead.created.secondsSince1970 + tenYears)!
        ahead.expires = Timestamp(secondsSince1970: ahead.expires.secondsSince1970 + tenYears)!
        let signed = SignedManifest.encode(ahead, signingKey: workspace.key)
        for path in [workspace.repository.versionPath("stable", 1), workspace.repository.manifestPath("stable")] {
            try FileSystem.writeAtomically(signed, to: path)
        }
        try workspace.publish(try workspace.writeSource(SampleKB.chunks(count: 7), name: "kb2.json"))
        let second = try workspace.manifest(2)
        #expect(second.created >= ahead.created, "created \(second.created), version 1 \(ahead.created)")
        #expect(second.expires > ahead.created)
    }

    @Test("Given a canary the new index cannot answer, when publishing, then nothing is published and the error names the canary")
    func canaryRefusal() throws {
        let workspace = try Workspace()
        let source = try workspace.writeSource(SampleKB.chunks(count: 6))
        let passing = Canary(query: "water", expect: ["chunk-000"], k: 6, mode: "lexical")
        _ = try workspace.publish(source, canaries: [passing])
        #expect(try workspace.manifest().canaries == [passing])
        let failing = Canary(query: "water", expect: ["no-such-chunk"], k: 3)
        let error = #expect(throws: PublishError.self) { try workspace.publish(source, canaries: [passing, failing]) }
        #expect(error?.code == .canaryFailed)
        #expect(error?.message.contains("canary #2") == true)
        #expect(try workspace.manifest().version == 1)
        #expect(workspace.repository.versionNumbers("stable") == [1])
    }

    @Test("Given more signing keys than a manifest may carry (17), or canaries that would make the manifest larger than devices read (1 MiB), when publishing, then it is refused in one line and manifest.json stays the version devices read")
    func unreadableManifestNotWritten() throws {
        let workspace = try Workspace()
        let source = try workspace.writeSource(SampleKB.chunks(count: 6))
        _ = try workspace.publish(source)
        let before = try Data(contentsOf: URL(fileURLWithPath: workspace.repository.manifestPath("stable")))

        let keys = [workspace.key] + (1...16).map { _ in PublisherKey.generate() }
        let many = Publisher(configuration: PublishConfiguration(repository: workspace.repo, channel: "stable", source: source),
                             keys: keys, embedder: workspace.embedder, model: workspace.model, cache: nil, logger: .init(label: "test"))
        #expect { try many.publish() } throws: { error in
            let failure = error as? PublishError
            return failure?.code == .invalidArgument && failure?.message.contains("at most 16 signatures") == true
        }

        // Each canary is within a canaries file's limits; 300 of them are not within a manifest's.
        let long = "water " + String(repeating: "a", count: 3_900)
        let canaries = (0..<300).map { _ in Canary(query: long, expect: ["chunk-000"], k: 100, mode: "lexical") }
        #expect { try workspace.publish(source, canaries: canaries) } throws: { error in
            let failure = error as? PublishError
            return failure?.code == .badInput && failure?.message.contains("devices read at most 1048576") == true
                && failure?.message.contains("\n") == false
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: workspace.repository.manifestPath("stable"))) == before)
        #expect(workspace.repository.versionNumbers("stable") == [1])
    }

    @Test("Given versions/ lost (a partial copy) and manifest.json at version 3 signed by a key this publish does not know, when the next version is published, then it is version 4, not 1, which every device holding 3 would refuse")
    func numberedAboveAnUnverifiedManifest() throws {
        let workspace = try Workspace()
        let other = PublisherKey.generate()
        for count in 6...8 { _ = try workspace.publish(try workspace.writeSource(SampleKB.chunks(count: count)), signer: other) }
        try FileManager.default.removeItem(atPath: workspace.repository.versionsFolder("stable"))
        try FileManager.default.removeItem(atPath: workspace.repo + "/keys")
        _ = try workspace.publish(try workspace.writeSource(SampleKB.chunks(count: 9)))
        #expect(try workspace.manifest().version == 4)
    }

    @Test("Given a canary with k above 100 (a canaries file allows up to 1000), when publishing, then it is judged in the top 100 as a device judges it, not refused")
    func canaryJudgedAsOnDevices() throws {
        let workspace = try Workspace()
        let source = try workspace.writeSource(SampleKB.chunks(count: 6))
        let wide = Canary(query: "water", expect: ["chunk-000"], k: 150, mode: "lexical")
        _ = try workspace.publish(source, canaries: [wide])
        #expect(try workspace.manifest().canaries == [wide])
    }

    @Test("Given a version signed by a key this publish does not sign with and no root lists (its .pub left under keys/ by whoever could write the folder), when publishing, then its vectors are not reused (a vouched version's are), though a delta from it is still built")
    func strangersVectorsNotReused() throws {
        let workspace = try Workspace()
        _ = try workspace.publish(try workspace.writeSource(SampleKB.chunks(count: 6)), cache: false)
        // The stranger's version 2 carries a vector for chunk-000's text that the model never gave.
        let chunks = SampleKB.chunks(count: 7)
        var poisoned = [Float](repeating: 0, count: workspace.model.dimension)
        poisoned[0] = 1
        let strangersCache = workspace.folder + "/strangers-cache.sqlite"
        try EmbeddingCache(path: strangersCache).store(modelKey: workspace.model.cacheKey,
                                                       [(textHash: VectorSource.textHash(chunks[0]), vector: poisoned)])
        let stranger = PublisherKey.generate()
        _ = try workspace.publish(try workspace.writeSource(chunks, name: "kb2.json"), keepDeltas: 0, cachePath: strangersCache,
                                  signer: stranger)
        #expect(workspace.repository.storedKeys().contains(stranger.publicKey))

        _ = try workspace.publish(try workspace.writeSource(SampleKB.chunks(count: 8), name: "kb3.json"), cache: false)
        func vector(_ version: Int) throws -> [Float]? {
            try workspace.records(version).first { $0.chunk.id == "chunk-000" }?.vector
        }
        #expect(try workspace.records(2, signer: stranger).first { $0.chunk.id == "chunk-000" }?.vector == poisoned)
        #expect(try vector(3) != poisoned)
        #expect(try vector(3) == vector(1))
        #expect(try workspace.manifest(3).deltas.map(\.fromVersion) == [1, 2])
    }

    @Test("Given a release that stopped after versions/<n>.json and before manifest.json (here: manifest.json cannot be replaced), when released again, then the version becomes current from its version file; a publish or verify meanwhile is not broken by an empty channel folder")
    func releaseFinishesAfterAStop() throws {
        let workspace = try Workspace()
        let repository = workspace.repository
        // A first publish to "beta" refused after the lock (a canary, the model) leaves its
        // channel folder, made here by hand: verify still passes later. One refused for a bad
        // record leaves none (the source is checked before anything is made).
        let bad = workspace.folder + "/bad.json"
        try Data(#"[{"id": "x"}]"#.utf8).write(to: URL(fileURLWithPath: bad))
        #expect(throws: PublishError.self) { try workspace.publish(bad, channel: "beta") }
        #expect(repository.channels().isEmpty)
        try FileManager.default.createDirectory(atPath: repository.versionsFolder("beta"), withIntermediateDirectories: true)
        #expect(repository.channels() == ["beta"])
        _ = try workspace.publish(try workspace.writeSource(SampleKB.chunks(count: 6)), stage: true)
        #expect(repository.stagedVersions("stable") == [1])
        // A folder where manifest.json goes: the rename over it fails, after the version file.
        try FileManager.default.createDirectory(atPath: repository.manifestPath("stable") + "/in-the-way", withIntermediateDirectories: true)
        #expect { try StagedRelease.release(repository: repository, channel: "stable", copies: []) } throws: { error in
            (error as? PublishError)?.code == .io
        }
        #expect(repository.versionNumbers("stable") == [1] && repository.stagedVersions("stable") == [1])
        try FileManager.default.removeItem(atPath: repository.manifestPath("stable"))

        #expect(try StagedRelease.release(repository: repository, channel: "stable", copies: []).version == 1)
        #expect(try workspace.manifest().version == 1)
        #expect(try Data(contentsOf: URL(fileURLWithPath: repository.manifestPath("stable")))
                == Data(contentsOf: URL(fileURLWithPath: repository.versionPath("stable", 1))))
        #expect(repository.stagedVersions("stable").isEmpty)
        #expect(workspace.verify().problems.isEmpty, "\(workspace.verify().problems)")
    }

    @Test("Given a manifest file dated 2099 that no key of the repository signed (planted, or copied from another repository), when the next version is published, then its created time is not moved to 2099")
    func unsignedManifestDoesNotDateTheNext() throws {
        let workspace = try Workspace()
        _ = try workspace.publish(try workspace.writeSource(SampleKB.chunks(count: 6)))
        let year2099 = try #require(Timestamp(rfc3339: "2099-01-01T00:00:00Z"))
        var stray = try workspace.manifest()
        stray.channel = "stray"
        stray.created = year2099
        stray.expires = try #require(Timestamp(rfc3339: "2099-02-01T00:00:00Z"))
        let folder = workspace.repository.versionsFolder("stray")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try Data(SignedManifest.encode(stray, signingKeys: [PublisherKey.generate()])).write(to: URL(fileURLWithPath: folder + "/1.json"))
        _ = try workspace.publish(try workspace.writeSource(SampleKB.chunks(count: 7), name: "kb2.json"))
        let next = try workspace.manifest()
        #expect(next.version == 2 && next.created < year2099, "\(next.created)")
    }

    @Test("Given a model blob cut short in the repository (an interrupted copy), or of its size with zeroes in it (a crash, a bad sector), when the next version is published, then the blob is written again whole and verify passes",
          arguments: [false, true])
    func damagedBlobRewritten(sameSize: Bool) throws {
        let workspace = try Workspace()
        _ = try workspace.publish(try workspace.writeSource(SampleKB.chunks(count: 6)))
        let file = try #require(try workspace.manifest().model.files.max { $0.size < $1.size })
        let path = workspace.repository.blobs.path(of: file.sha256)
        #expect(truncate(path, off_t(file.size / 2)) == 0)
        if sameSize { #expect(truncate(path, off_t(file.size)) == 0) }
        #expect(!workspace.verify().problems.isEmpty)
        _ = try workspace.publish(try workspace.writeSource(SampleKB.chunks(count: 7), name: "kb2.json"))
        #expect(ContentID(hashing: try FileSystem.read(path)) == file.sha256)
        #expect(workspace.verify().problems.isEmpty, "\(workspace.verify().problems)")
    }

    @Test("Given a staged version whose signatures took longer to gather than it lives, when released after it expired, then release refuses in one line, saying to stage it again, and nothing is released")
    func expiredStagedVersionIsNotReleased() throws {
        let workspace = try Workspace()
        let repository = workspace.repository
        _ = try workspace.publish(try workspace.writeSource(SampleKB.chunks(count: 6)), stage: true)
        let manifest = try Manifest(json: SignedManifest.decodeEnvelope(FileSystem.read(repository.stagedPath("stable", 1))).content)
        let after = Timestamp(secondsSince1970: manifest.expires.secondsSince1970 + 1)!
        let error = #expect(throws: PublishError.self) {
            try StagedRelease.release(repository: repository, channel: "stable", copies: [], now: after)
        }
        #expect(error?.code == .invalidArgument && error?.message.contains("expired at") == true
                && error?.message.contains("--stage") == true, "\(String(describing: error))")
        #expect(repository.versionNumbers("stable").isEmpty && !FileManager.default.fileExists(atPath: repository.manifestPath("stable")))
        #expect(try StagedRelease.release(repository: repository, channel: "stable", copies: []).version == 1)
    }

    @Test("Given a manifest of the repository's key dated two days ahead, when publishing with --expires-at tomorrow, then it is refused before anything is staged, since the version would be created after it expires")
    func expiresBeforeCreatedRefusedEarly() throws {
        let workspace = try Workspace()
        _ = try workspace.publish(try workspace.writeSource(SampleKB.chunks(count: 6)))
        let day: Int64 = 86_400, now = Int64(Date().timeIntervalSince1970)
        var ahead = try workspace.manifest()
        ahead.channel = "other"
        ahead.created = try #require(Timestamp(secondsSince1970: now + 2 * day))
        ahead.expires = try #require(Timestamp(secondsSince1970: now + 30 * day))
        let folder = workspace.repository.versionsFolder("other")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try Data(SignedManifest.encode(ahead, signingKeys: [workspace.key])).write(to: URL(fileURLWithPath: folder + "/1.json"))
        let blobs = try FileManager.default.subpathsOfDirectory(atPath: workspace.repo + "/blobs").count
        let error = #expect(throws: PublishError.self) {
            try workspace.publish(try workspace.writeSource(SampleKB.chunks(count: 7), name: "kb2.json"),
                                  expiresAt: Timestamp(secondsSince1970: now + day))
        }
        #expect(error?.code == .invalidArgument && error?.message.contains("nothing was written") == true, "\(String(describing: error))")
        #expect(try FileManager.default.subpathsOfDirectory(atPath: workspace.repo + "/blobs").count == blobs)
    }

    @Test("Given an earlier version whose snapshot cannot be inflated because the scratch disk is full (a tmpfs), when it is read as a delta base, then the error is an I/O error, which fails the publish (74), not a corrupt blob, which skipped the version's deltas and vectors with a note")
    func fullScratchIsNotACorruptBase() throws {
        let workspace = try Workspace()
        _ = try workspace.publish(try workspace.writeSource(SampleKB.chunks(count: 40)))
        let disk = try Tmpfs(megabytes: 1)
        defer { disk.unmount() }
        disk.fill(leaving: 0)
        let manifest = try workspace.manifest(1)
        let error = #expect(throws: PublishError.self) {
            try workspace.repository.extractSnapshot(of: manifest, to: disk.path + "/base-1.sqlite")
        }
        #expect(error?.code == .scratchUnusable && error?.message.contains("TMPDIR") == true, "\(String(describing: error))")
    }

    @Test("Given --expires-days that ends past the year 9999, when publishing, then it is refused before anything is read or written: no blob, no channel folder")
    func expiresDaysOutOfRange() throws {
        let workspace = try Workspace()
        var configuration = PublishConfiguration(repository: workspace.repo, channel: "stable",
                                                 source: try workspace.writeSource(SampleKB.chunks(count: 6)), expiresDays: 3_000_000)
        configuration.lockWait = 0
        let publisher = Publisher(configuration: configuration, key: workspace.key, embedder: workspace.embedder, model: workspace.model,
                                  cache: nil, logger: .init(label: "test"))
        let error = #expect(throws: PublishError.self) { try publisher.publish() }
        #expect(error?.code == .invalidArgument && error?.message.contains("--expires-days 3000000 ends past the year 9999") == true,
                "\(String(describing: error))")
        #expect(!FileManager.default.fileExists(atPath: workspace.repo))
    }

    @Test("Given --expires-at in the past, when publishing, then it is refused before anything is written: no blob, no channel")
    func pastExpiryWritesNothing() throws {
        let workspace = try Workspace()
        let source = try workspace.writeSource(SampleKB.chunks(count: 6))
        let error = #expect(throws: PublishError.self) {
            try workspace.publish(source, expiresAt: Timestamp(secondsSince1970: 1_577_836_800))  // 2020-01-01
        }
        #expect(error?.code == .invalidArgument && error?.message.contains("--expires-at") == true)
        #expect(!FileManager.default.fileExists(atPath: workspace.repo + "/blobs"))
        #expect(workspace.repository.channels().isEmpty)
    }

    /// A workspace whose root 1 (root key `rootKey`) has two signing keys, the workspace's and
    /// `second`, either of which signs (threshold 1); `newKey` is made for a rotation.
    static func twoSigningKeys() throws -> (Workspace, rootKey: PublisherKey, newKey: PublisherKey, second: PublisherKey) {
        let workspace = try Workspace()
        let rootKey = PublisherKey.generate(), newKey = PublisherKey.generate(), second = PublisherKey.generate()
        _ = try RootPublisher.initialize(repository: workspace.repository, rootKeys: [rootKey], rootThreshold: 1,
                                         signingKeys: [workspace.key.publicKey, second.publicKey], signingThreshold: 1, expiresDays: 30)
        return (workspace, rootKey, newKey, second)
    }

    @Test("Given a manifest dated in 9999 that only the key being revoked signed (a thief's, in versions/), when root 2 removes that key, then the rotation and the next version are written and dated by the clock, not after the thief's manifest; a manifest a kept key signed a day ahead still dates the root after it, and so does one with a field this build does not read")
    func rotationNotDatedByTheRevokedKey() throws {
        let (workspace, rootKey, newKey, second) = try Self.twoSigningKeys()
        let repository = workspace.repository
        _ = try workspace.publish(try workspace.writeSource(SampleKB.chunks(count: 6)))
        let published = try repository.manifest(at: repository.versionPath("stable", 1), trustedKeys: [workspace.key.publicKey])
        func plant(_ version: Int, created: Int64, by key: PublisherKey) throws {
            var manifest = published
            manifest.version = version
            manifest.created = try #require(Timestamp(secondsSince1970: created))
            manifest.expires = try #require(Timestamp(secondsSince1970: created + 86_400))
            try Data(SignedManifest.encode(manifest, signingKey: key)).write(to: URL(fileURLWithPath: repository.versionPath("stable", version)))
        }
        let now = Int64(Date().timeIntervalSince1970)
        try plant(1_000_000_000, created: 253_402_214_400 - 86_401, by: workspace.key)  // 9999-12-30
        var rotation = RootPublisher.Rotation()
        rotation.addSigningKeys = [newKey.publicKey]
        rotation.removeSigningKeys = [workspace.key.publicKey]
        let root2 = try RootPublisher.rotate(repository: repository, signWith: [rootKey], rotation: rotation)
        #expect(root2.created.secondsSince1970 < now + 600, "root 2 created \(root2.created)")
        // So is the next version, signed with the new key.
        let next = try workspace.publish(try workspace.writeSource(SampleKB.chunks(count: 7), name: "kb2.json"), signer: newKey)
        let released = try repository.manifest(at: repository.versionPath("stable", next.version), trustedKeys: [newKey.publicKey])
        #expect(released.created.secondsSince1970 < now + 600, "version \(next.version) created \(released.created)")

        // The rule holds for the keys root 3 keeps: dated after their newest manifest.
        try plant(3, created: now + 86_400, by: second)
        rotation = RootPublisher.Rotation()
        rotation.removeSigningKeys = [newKey.publicKey]
        let root3 = try RootPublisher.rotate(repository: repository, signWith: [rootKey], rotation: rotation)
        #expect(root3.created.secondsSince1970 == now + 86_401, "root 3 created \(root3.created)")

        // And for a manifest newer software wrote (a field this build does not read): its
        // signed `created` still dates what follows.
        var newer = published
        newer.version = 4
        newer.created = try #require(Timestamp(secondsSince1970: now + 2 * 86_400))
        newer.expires = try #require(Timestamp(secondsSince1970: now + 3 * 86_400))
        guard case .object(var members) = newer.canonicalJSON else { Issue.record("not an object"); return }
        members["shards"] = .integer(4)
        let content = CanonicalJSON.object(members)
        try Data(SignedEnvelope(content: content, signatures: SignedEnvelope.sign(content, domain: SignedManifest.domain, keys: [second]))
                    .encode(field: "manifest")).write(to: URL(fileURLWithPath: repository.versionPath("stable", 4)))
        let root4 = try RootPublisher.rotate(repository: repository, signWith: [rootKey], rotation: RootPublisher.Rotation())
        #expect(root4.created.secondsSince1970 == now + 2 * 86_400 + 1, "root 4 created \(root4.created)")
    }

    @Test("Given a version staged under root 1 and released after root 2 replaced its signing key, when released, then the signatures root 1 counts are kept beside the new key's and verify passes; when root 1's threshold is not met, release refuses, saying to stage it again")
    func releaseAcrossARotation() throws {
        let (workspace, rootKey, newKey, second) = try Self.twoSigningKeys()
        let repository = workspace.repository
        _ = try workspace.publish(try workspace.writeSource(SampleKB.chunks(count: 6)), stage: true)
        // Root 2 revokes the workspace's key for a new one; the staged file gets the new key's signature.
        var rotation = RootPublisher.Rotation()
        rotation.addSigningKeys = [newKey.publicKey]
        rotation.removeSigningKeys = [workspace.key.publicKey]
        _ = try RootPublisher.rotate(repository: repository, signWith: [rootKey], rotation: rotation)
        _ = try StagedRelease.sign(file: repository.stagedPath("stable", 1), keys: [newKey])
        #expect(try StagedRelease.release(repository: repository, channel: "stable", copies: []).version == 1)
        #expect(workspace.verify().problems.isEmpty, "\(workspace.verify().problems)")

        // Root 3 asks two signatures: version 2, staged under it with one, is refused after root 4.
        rotation = RootPublisher.Rotation()
        rotation.addSigningKeys = [workspace.key.publicKey]
        rotation.signingThreshold = 2
        _ = try RootPublisher.rotate(repository: repository, signWith: [rootKey], rotation: rotation)
        _ = try workspace.publish(try workspace.writeSource(SampleKB.chunks(count: 7), name: "kb2.json"), stage: true)
        rotation = RootPublisher.Rotation()
        rotation.signingThreshold = 1
        _ = try RootPublisher.rotate(repository: repository, signWith: [rootKey], rotation: rotation)
        #expect { try StagedRelease.release(repository: repository, channel: "stable", copies: []) } throws: { error in
            let error = error as? PublishError
            return error?.code == .thresholdNotMet && error?.message.contains("was staged under root 3") == true
                && error?.message.contains("publish it again with --stage") == true
        }
        #expect(repository.versionNumbers("stable") == [1])
    }
}
