import CairnCore
import CairnIndex
import CairnTestSupport
import Foundation

/// Runs `body` with a fresh temporary directory that is removed afterwards.
func withTemporaryDirectory<T>(_ body: (String) throws -> T) throws -> T {
    let path = (NSTemporaryDirectory() as NSString).appendingPathComponent("cairn-index-tests-\(UUID().uuidString)")
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: path) }
    return try body(path)
}

/// A fresh temporary directory (for async tests, which cannot use `withTemporaryDirectory`).
func makeTemporaryDirectory() -> String {
    // Inside the test process's own folder, removed when it ends (also when a test stops early).
    try! TemporaryDirectory.make()
}

func removeDirectory(_ path: String) {
    try? FileManager.default.removeItem(atPath: path)
}

/// `values` scaled to unit length.
func unit(_ values: Float...) -> [Float] { unit(values) }

func unit(_ values: [Float]) -> [Float] {
    let norm = values.reduce(0) { $0 + $1 * $1 }.squareRoot()
    return values.map { $0 / norm }
}

func dot(_ a: [Float], _ b: [Float]) -> Double {
    Double(zip(a, b).reduce(Float(0)) { $0 + $1.0 * $1.1 })
}

/// Ten hand-made chunks with 4-dimensional unit vectors. The axes stand for topics:
/// 0 water, 1 flood movement, 2 earthquake, 3 first aid.
enum Corpus {
    static let dimension = 4

    static let entries: [ChunkRecord] = [
        ChunkRecord(chunk: Chunk(id: "water-purify", title: "Purifying water",
                                 content: "Boil water for one full minute to kill pathogens. Chlorine tablets also work.",
                                 scenario: "flood", tags: ["water", "health"], source: "guide/water.md"), vector: unit(1, 0, 0, 0)),
        ChunkRecord(chunk: Chunk(id: "water-storage", title: "Storing drinking water",
                                 content: "Keep stored water in clean sealed containers away from sunlight.",
                                 scenario: "flood", tags: ["water"]), vector: unit(0.9, 0.1, 0, 0)),
        ChunkRecord(chunk: Chunk(id: "flood-evacuate", title: "Evacuating during a flood",
                                 content: "Move to higher ground. Do not walk or drive through moving floodwater.",
                                 scenario: "flood", tags: ["evacuation"]), vector: unit(0, 1, 0, 0)),
        ChunkRecord(chunk: Chunk(id: "quake-cover", title: "Drop, cover and hold on",
                                 content: "During an earthquake, drop to the ground and take cover under a sturdy table.",
                                 scenario: "earthquake", tags: ["shelter"]), vector: unit(0, 0, 1, 0)),
        ChunkRecord(chunk: Chunk(id: "quake-after", title: "After the shaking stops",
                                 content: "Check for gas leaks and expect aftershocks. Avoid damaged buildings.",
                                 scenario: "earthquake", tags: []), vector: unit(0, 0.2, 0.98, 0)),
        ChunkRecord(chunk: Chunk(id: "aid-bleeding", title: "Stopping heavy bleeding",
                                 content: "Apply firm pressure with a clean cloth. Use a tourniquet only as a last resort.",
                                 scenario: "general", tags: ["health", "first-aid"]), vector: unit(0, 0, 0, 1)),
        ChunkRecord(chunk: Chunk(id: "aid-burns", title: "Treating burns",
                                 content: "Cool the burn under running water for twenty minutes. Do not use ice.",
                                 scenario: "general", tags: ["health", "first-aid"]), vector: unit(0.3, 0, 0, 0.95)),
        ChunkRecord(chunk: Chunk(id: "lamp-kerosene", title: "Kerosene lamps",
                                 content: "Use them only in ventilated rooms and keep the fuel away from children.",
                                 scenario: "general", tags: []), vector: unit(0.1, 0.1, 0.1, 0.1)),
        ChunkRecord(chunk: Chunk(id: "lighting", title: "Lighting without power",
                                 content: "Candles and kerosene heaters need ventilation and care around children.",
                                 scenario: nil, tags: []), vector: unit(0.5, 0.5, 0.5, 0.5)),
        ChunkRecord(chunk: Chunk(id: "shelter-jp", title: "避難所",
                                 content: "最寄りの避難所へ移動してください。Café au lait is served at the shelter.",
                                 scenario: "earthquake", tags: ["shelter"]), vector: unit(0, 0.6, 0.8, 0)),
    ]

    static func meta(version: Int = 1, entries: [ChunkRecord] = Corpus.entries) -> SnapshotMeta {
        SnapshotMeta(channel: "test", version: version, dimension: dimension, modelID: "hand-made", entries: entries)
    }

    /// `count` rows of about 3 kB (400 words of a vocabulary of 997), each on a page of its own:
    /// a file of a few thousand pages, for tests of how it is read from disk. Ids `row-00000`….
    static func pageRows(_ count: Int) -> [ChunkRecord] {
        (0..<count).map { index in
            let words = (0..<400).map { "w\(($0 * 7 + index) % 997)" }.joined(separator: " ")
            return ChunkRecord(chunk: Chunk(id: String(format: "row-%05d", index), title: "Row \(index)", content: words),
                               vector: unit(Float(index % 7) + 1, 1, Float(index % 3), 0.5))
        }
    }

    /// Writes the corpus as a snapshot in `directory` and returns its path.
    static func snapshot(in directory: String, name: String = "snapshot.sqlite",
                         entries: [ChunkRecord] = Corpus.entries) throws -> String {
        let path = (directory as NSString).appendingPathComponent(name)
        try SnapshotWriter.create(at: path, meta: meta(entries: entries), entries: entries)
        return path
    }
}
