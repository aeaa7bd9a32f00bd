public import Foundation

/// What one published version of a channel is and where its bytes are (protocol/manifest.md).
/// Signed as a whole; see `SignedManifest`.
public struct Manifest: Sendable, Equatable {
    /// The manifest format this build reads and writes.
    public static let currentFormatVersion = 1

    public var formatVersion: Int
    /// The channel's name, `[a-z0-9][a-z0-9._-]{0,63}`.
    public var channel: String
    /// Strictly increasing per channel, ≥ 1.
    public var version: Int
    public var created: Timestamp
    /// After this instant devices refuse the manifest (freeze protection).
    public var expires: Timestamp
    /// The state root of this version's chunk records (protocol/state-root.md).
    public var stateRoot: ContentID
    public var chunkCount: Int
    /// The embedding dimension; equals `model.dimension`.
    public var dimension: Int
    public var model: Model
    public var snapshot: Snapshot
    /// Deltas *to* this version, at most one per `fromVersion`.
    public var deltas: [DeltaRef]
    /// Queries the device runs after installing, each with the chunk ids it must find.
    public var canaries: [Canary]
    /// The id of the key the publisher signs with.
    public var publisherKeyID: KeyID

    public init(formatVersion: Int = Manifest.currentFormatVersion, channel: String, version: Int,
                created: Timestamp, expires: Timestamp, stateRoot: ContentID, chunkCount: Int, dimension: Int,
                model: Model, snapshot: Snapshot, deltas: [DeltaRef] = [], canaries: [Canary] = [],
                publisherKeyID: KeyID) {
        self.formatVersion = formatVersion
        self.channel = channel
        self.version = version
        self.created = created
        self.expires = expires
        self.stateRoot = stateRoot
        self.chunkCount = chunkCount
        self.dimension = dimension
        self.model = model
        self.snapshot = snapshot
        self.deltas = deltas
        self.canaries = canaries
        self.publisherKeyID = publisherKeyID
    }

    /// Every blob it names: the snapshot, the deltas, the model's files.
    public var blobIDs: Set<ContentID> { Set([snapshot.sha256] + deltas.map(\.sha256) + model.files.map(\.sha256)) }

    /// `created` as a Foundation `Date`.
    public var createdDate: Date { created.date }
    /// `expires` as a Foundation `Date`.
    public var expiresDate: Date { expires.date }

    /// Whether the manifest has expired at `now`: true once `now` is at or after `expires`.
    public func isExpired(at now: Timestamp) -> Bool { now >= expires }

    /// Whether `name` is a valid channel name: `[a-z0-9][a-z0-9._-]{0,63}`.
    public static func isValidChannelName(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard (1...64).contains(bytes.count) else { return false }
        func allowed(_ c: UInt8, first: Bool) -> Bool {
            switch c {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
            case UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"): !first
            default: false
            }
        }
        return bytes.enumerated().allSatisfy { allowed($0.element, first: $0.offset == 0) }
    }
}

extension Manifest {
    /// The embedding model the corpus was embedded with; the device embeds queries with it.
    public struct Model: Sendable, Equatable {
        /// E.g. `sentence-transformers/all-MiniLM-L6-v2`.
        public var id: String
        public var dimension: Int
        /// Always `float32` in format 1.
        public var dtype: String
        public var maxTokens: Int
        /// The model's blobs, names unique.
        public var files: [ModelFile]

        public init(id: String, dimension: Int, dtype: String = "float32", maxTokens: Int, files: [ModelFile]) {
            self.id = id
            self.dimension = dimension
            self.dtype = dtype
            self.maxTokens = maxTokens
            self.files = files
        }

        /// The folder a device (`DIR/models/`) or a search cache keeps this model's files in: the
        /// hex SHA-256 of one line `<name> <sha256 hex> <size>\n` per file, in name order, so that
        /// two models with the same weights and another vocabulary or configuration never share
        /// one. Nil without weights (lexical only).
        public var folderName: String? {
            guard files.contains(where: { $0.name == "model.safetensors" }) else { return nil }
            let lines = files.sorted { $0.name < $1.name }.map { "\($0.name) \($0.sha256.hex) \($0.size)\n" }.joined()
            return ContentID(hashing: Array(lines.utf8)).hex
        }

        /// Whether `folder` holds every file of the model at its signed size: a folder with a file
        /// removed or cut short (a disk error, a hand) is to be built again, not trusted because
        /// it exists. Sizes only: the hashes were checked when the folder was built.
        public func isWhole(in folder: String) -> Bool {
            files.allSatisfy { file in
                var info = stat()
                return stat(folder + "/" + file.name, &info) == 0 && Int64(info.st_size) == Int64(file.size)
            }
        }
    }

    /// One file of the model, stored as a blob.
    public struct ModelFile: Sendable, Equatable {
        /// The file names a model may have.
        public static let allowedNames = ["model.safetensors", "vocab.txt", "config.json"]
        public var name: String
        public var sha256: ContentID
        public var size: Int

        public init(name: String, sha256: ContentID, size: Int) {
            self.name = name
            self.sha256 = sha256
            self.size = size
        }
    }

    /// How a snapshot or delta blob is compressed.
    public enum Compression: String, Sendable, Equatable, CaseIterable {
        /// zlib (RFC 1950) stream.
        case zlib
    }

    /// The full snapshot of this version.
    public struct Snapshot: Sendable, Equatable {
        public var sha256: ContentID
        /// The blob's size in bytes (compressed).
        public var size: Int
        public var uncompressedSize: Int
        public var compression: Compression

        public init(sha256: ContentID, size: Int, uncompressedSize: Int, compression: Compression = .zlib) {
            self.sha256 = sha256
            self.size = size
            self.uncompressedSize = uncompressedSize
            self.compression = compression
        }
    }

    /// A delta from an earlier version to this one.
    public struct DeltaRef: Sendable, Equatable {
        public var fromVersion: Int
        /// The state root the device must have for this delta to apply.
        public var fromStateRoot: ContentID
        public var sha256: ContentID
        public var size: Int
        public var uncompressedSize: Int
        public var compression: Compression

        public init(fromVersion: Int, fromStateRoot: ContentID, sha256: ContentID, size: Int,
                    uncompressedSize: Int, compression: Compression = .zlib) {
            self.fromVersion = fromVersion
            self.fromStateRoot = fromStateRoot
            self.sha256 = sha256
            self.size = size
            self.uncompressedSize = uncompressedSize
            self.compression = compression
        }
    }
}
