// Small helpers shared by the cairn-bench subcommands.
import Foundation

struct Failure: Error, CustomStringConvertible { let description: String }

func option(_ name: String, in arguments: [String]) -> String? {
    guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count else { return nil }
    return arguments[index + 1]
}

func requiredOption(_ name: String, in arguments: [String]) throws -> String {
    guard let value = option(name, in: arguments) else { throw Failure(description: "\(name) is required") }
    return value
}

func intOption(_ name: String, in arguments: [String], default fallback: Int) throws -> Int {
    guard let text = option(name, in: arguments) else { return fallback }
    guard let value = Int(text), value > 0 else { throw Failure(description: "\(name) must be a positive integer") }
    return value
}

func milliseconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) * 1e3 + Double(duration.components.attoseconds) / 1e15
}

/// The value at `fraction` (0…1) of an ascending list, nearest rank.
func percentile(_ sorted: [Double], _ fraction: Double) -> Double {
    guard !sorted.isEmpty else { return .nan }
    let rank = Int((fraction * Double(sorted.count)).rounded(.up)) - 1
    return sorted[min(sorted.count - 1, max(0, rank))]
}

/// Prints one JSON object (sorted keys) on stdout.
func printJSON(_ object: [String: Any]) throws {
    print(String(decoding: try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]), as: UTF8.self))
}

/// `(path as NSString).appendingPathComponent(...)` for several parts.
func join(_ parts: String...) -> String {
    parts.dropFirst().reduce(parts[0]) { ($0 as NSString).appendingPathComponent($1) }
}

/// Writes floats as raw little-endian float32 (numpy: `np.fromfile(path, "<f4")`).
func writeFloats(_ values: [Float], to path: String) throws {
    let data = values.withUnsafeBufferPointer { Data(buffer: $0) }
    try data.write(to: URL(fileURLWithPath: path))
}

func readFloats(_ path: String) throws -> [Float] {
    let data = try Data(contentsOf: URL(fileURLWithPath: path))
    return data.withUnsafeBytes { Array($0.bindMemory(to: Float.self)) }
}
