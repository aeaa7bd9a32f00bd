extension Manifest {
    /// The manifest as canonical JSON: the exact value that is signed (protocol/manifest.md).
    public var canonicalJSON: CanonicalJSON {
        func int(_ value: Int) -> CanonicalJSON { .integer(Int64(value)) }
        return .object([
            "format_version": int(formatVersion),
            "channel": .string(channel),
            "version": int(version),
            "created": .string(created.rfc3339),
            "expires": .string(expires.rfc3339),
            "state_root": .string(stateRoot.hex),
            "chunk_count": int(chunkCount),
            "dimension": int(dimension),
            "model": .object([
                "id": .string(model.id),
                "dimension": int(model.dimension),
                "dtype": .string(model.dtype),
                "max_tokens": int(model.maxTokens),
                "files": .array(model.files.map {
                    .object(["name": .string($0.name), "sha256": .string($0.sha256.hex), "size": int($0.size)])
                }),
            ]),
            "snapshot": .object([
                "sha256": .string(snapshot.sha256.hex),
                "size": int(snapshot.size),
                "uncompressed_size": int(snapshot.uncompressedSize),
                "compression": .string(snapshot.compression.rawValue),
            ]),
            "deltas": .array(deltas.map {
                .object([
                    "from_version": int($0.fromVersion),
                    "from_state_root": .string($0.fromStateRoot.hex),
                    "sha256": .string($0.sha256.hex),
                    "size": int($0.size),
                    "uncompressed_size": int($0.uncompressedSize),
                    "compression": .string($0.compression.rawValue),
                ])
            }),
            "canaries": .array(canaries.map(\.canonicalJSON)),
            "publisher_key_id": .string(publisherKeyID.hex),
        ])
    }

    /// Parses a manifest strictly: `format_version` first (anything but 1 is
    /// `.unsupportedFormat`), then every field, refusing missing, ill-typed and out-of-range
    /// fields with `.manifestMalformed` naming the field, and unknown fields and values (a
    /// compression, a model file name) with `.unsupportedFormat` (newer software wrote them).
    public init(json: CanonicalJSON) throws(CoreError) {
        var r = try JSONObjectReader(json, path: "", code: .manifestMalformed)
        // A field or value this build does not know: the publisher's software is newer.
        r.unknownCode = .unsupportedFormat
        guard case .integer(let format)? = r.optional("format_version") else {
            throw r.failure("format_version", r.members["format_version"] == nil ? "is missing" : "must be an integer")
        }
        guard format == Int64(Manifest.currentFormatVersion) else {
            throw CoreError(.unsupportedFormat, "manifest format_version \(format) is not supported; this build reads \(Manifest.currentFormatVersion); upgrade the software")
        }
        let maxVersion = JSONObjectReader.maxInteger
        let channel = try r.string("channel")
        guard Manifest.isValidChannelName(channel) else { throw r.failure("channel", "must match [a-z0-9][a-z0-9._-]{0,63}") }
        let version = try r.integer("version", in: 1...maxVersion)
        let created = try r.timestamp("created")
        let expires = try r.timestamp("expires")
        guard expires > created else { throw r.failure("expires", "must be later than `created`") }
        let stateRoot = try r.contentID("state_root")
        let chunkCount = try r.integer("chunk_count")
        let dimension = try r.integer("dimension", in: 1...Delta.maxDimension)
        let model = try r.object("model", Self.readModel)
        guard model.dimension == dimension else { throw r.failure("model.dimension", "must equal `dimension`") }
        let snapshot = try r.object("snapshot") { (s: inout JSONObjectReader) throws(CoreError) in
            Snapshot(sha256: try s.contentID("sha256"), size: try s.integer("size"),
                     uncompressedSize: try s.integer("uncompressed_size"), compression: try Self.compression(&s))
        }
        let deltas = try r.objects("deltas") { (d: inout JSONObjectReader) throws(CoreError) in
            let from = try d.integer("from_version", in: 1...maxVersion)
            guard from < version else { throw d.failure("from_version", "must be less than `version`") }
            return DeltaRef(fromVersion: from, fromStateRoot: try d.contentID("from_state_root"),
                            sha256: try d.contentID("sha256"), size: try d.integer("size"),
                            uncompressedSize: try d.integer("uncompressed_size"), compression: try Self.compression(&d))
        }
        guard Set(deltas.map(\.fromVersion)).count == deltas.count else {
            throw r.failure("deltas", "must have at most one delta per from_version")
        }
        let canaries = try r.objects("canaries", Canary.read)
        guard let keyID = KeyID(hex: try r.string("publisher_key_id")) else {
            throw r.failure("publisher_key_id", "must be 16 lowercase hexadecimal digits")
        }
        try r.finish()
        self.init(formatVersion: Int(format), channel: channel, version: version, created: created, expires: expires,
                  stateRoot: stateRoot, chunkCount: chunkCount, dimension: dimension, model: model,
                  snapshot: snapshot, deltas: deltas, canaries: canaries, publisherKeyID: keyID)
    }

    private static func compression(_ r: inout JSONObjectReader) throws(CoreError) -> Compression {
        Compression(rawValue: try r.string("compression", oneOf: Compression.allCases.map(\.rawValue)))!
    }

    private static func readModel(_ m: inout JSONObjectReader) throws(CoreError) -> Model {
        let id = try m.string("id")
        guard !id.isEmpty else { throw m.failure("id", "must not be empty") }
        let dimension = try m.integer("dimension", in: 1...Delta.maxDimension)
        let dtype = try m.string("dtype", oneOf: ["float32"])
        let maxTokens = try m.integer("max_tokens", in: 1...JSONObjectReader.maxInteger)
        let files = try m.objects("files") { (f: inout JSONObjectReader) throws(CoreError) in
            ModelFile(name: try f.string("name", oneOf: ModelFile.allowedNames), sha256: try f.contentID("sha256"),
                      size: try f.integer("size"))
        }
        guard Set(files.map(\.name)).count == files.count else { throw m.failure("files", "must not repeat a name") }
        return Model(id: id, dimension: dimension, dtype: dtype, maxTokens: maxTokens, files: files)
    }
}
