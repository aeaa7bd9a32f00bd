import Testing
@testable import CairnCore

@Suite struct CanonicalJSONTests {
    struct Vectors: Decodable {
        struct Valid: Decodable { var name: String; var input: String; var canonical: String }
        struct Invalid: Decodable { var name: String; var input: String }
        var valid: [Valid]
        var invalid: [Invalid]
    }

    @Test func givenTheVectors_whenParsedAndReencoded_thenBytesAreCanonical() throws {
        for case_ in try vector(Vectors.self, "canonical.json").valid {
            let value = try CanonicalJSON.parse(Array(case_.input.utf8))
            #expect(value.bytes == Array(case_.canonical.utf8), "\(case_.name)")
            #expect(try CanonicalJSON.parse(value.bytes).bytes == value.bytes, "\(case_.name) is a fixed point")
        }
    }

    @Test func givenTheInvalidVectors_whenParsed_thenEachIsRefused() throws {
        for case_ in try vector(Vectors.self, "canonical.json").invalid {
            let error = coreError { _ = try CanonicalJSON.parse(Array(case_.input.utf8)) }
            #expect(error?.code == .jsonMalformed, "\(case_.name)")
        }
    }

    @Test(arguments: [[0x22, 0xC3, 0x22], [0x22, 0xED, 0xA0, 0x80, 0x22], [0x22, 0xC0, 0xAF, 0x22], [0x22, 0xFF, 0x22]] as [[UInt8]])
    func givenInvalidUTF8_whenParsed_thenRefused(bytes: [UInt8]) {
        #expect(coreError { _ = try CanonicalJSON.parse(bytes) }?.code == .jsonMalformed)
    }

    @Test("Given request JSON (any numbers), when a key repeats within one object, then it is found; the same key in two objects, or bytes that are not JSON, are not a repeat",
          arguments: [
              (#"{"k": 3, "k": 50}"#, true),
              (#"{"a": {"b": 1.5e3, "b": -2}}"#, true),
              (#"[{"x": 1}, {"y": 2, "y": 2}]"#, true),
              (#"{"query": "q", "\u0071uery": "r"}"#, true),
              (#"{"k": 3, "filter": {"k": 4}, "m": [{"k": 1}, {"k": 2}]}"#, false),
              (#"{"min_similarity": 0.25, "k": 1e2, "n": -0.0}"#, false),
              (#"{"k": 3, "k""#, false),
              ("not json", false),
          ])
    func repeatedKeys(_ json: String, repeats: Bool) {
        #expect(CanonicalJSON.repeatsAKey(Array(json.utf8)) == repeats)
    }

    @Test func givenNesting_whenDeeperThan64_thenRefused() throws {
        let ok = String(repeating: "[", count: 64) + String(repeating: "]", count: 64)
        #expect(throws: Never.self) { try CanonicalJSON.parse(Array(ok.utf8)) }
        let deep = String(repeating: "[", count: 65) + String(repeating: "]", count: 65)
        #expect(coreError { _ = try CanonicalJSON.parse(Array(deep.utf8)) }?.code == .jsonMalformed)
        let hostile = Array(String(repeating: "{\"a\":[", count: 100_000).utf8)
        #expect(coreError { _ = try CanonicalJSON.parse(hostile) }?.code == .jsonMalformed)
    }

    @Test func givenMoreThanOneMiB_whenParsed_thenRefusedBeforeParsing() {
        let big = [UInt8(ascii: "\"")] + [UInt8](repeating: 0x61, count: 1 << 20) + [UInt8(ascii: "\"")]
        let error = coreError { _ = try CanonicalJSON.parse(big) }
        #expect(error?.code == .jsonMalformed)
        #expect(error?.message.contains("limit") == true)
    }

    @Test func givenEveryPrefixOfADocument_whenParsed_thenNoCrashAndEachIsRefusedAsMalformed() throws {
        let document = try protocolFile("vectors/manifest.json")
        for length in 0..<document.count - 1 {
            #expect(coreError { _ = try CanonicalJSON.parse(Array(document[..<length])) }?.code == .jsonMalformed, "prefix of \(length)")
        }
        // Seeded: a failure names its round, and the same seed gives it again.
        var random = SplitMix64(seed: 0xC0DE)
        for round in 0..<2_000 {
            var mutated = document
            mutated[Int.random(in: 0..<mutated.count, using: &random)] = UInt8.random(in: 0...255, using: &random)
            do { _ = try CanonicalJSON.parse(mutated) } catch {
                #expect(error.code == .jsonMalformed, "round \(round): \(error)")
            }
        }
    }

    @Test func givenAnError_whenDescribed_thenItNamesAnOffsetNotTheText() {
        let error = coreError { _ = try CanonicalJSON.parse(Array(#"{"secret query text": 1.5}"#.utf8)) }
        #expect(error?.message.contains("secret") == false)
        #expect(error?.message.contains("offset") == true)
        #expect(error?.isRetryable == false)
    }
}
