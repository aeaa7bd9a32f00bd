import CLibFuzzer
#if canImport(Glibc)
import Glibc
#endif

/// `cairn-fuzz TARGET [libFuzzer options] [corpus folders]`: runs libFuzzer on one decoder.
///
/// Built only with `CAIRN_FUZZ=1 swift build -Xswiftc -sanitize=fuzzer,address` (see
/// Fuzz/README.md and `scripts/fuzz`). SwiftPM makes this `main` the program's entry point, so
/// it hands control to libFuzzer's own driver (`LLVMFuzzerRunDriver`) with the target name
/// removed from the arguments.
@main
enum CairnFuzz {
    static let targets: [FuzzTarget] = [.manifest, .root, .delta, .safeTensors, .searchBody]

    static func main() {
        let arguments = CommandLine.arguments
        guard arguments.count >= 2, let target = targets.first(where: { $0.name == arguments[1] }) else {
            let names = targets.map(\.name).joined(separator: "|")
            printError("usage: cairn-fuzz \(names) [libFuzzer options] [corpus folders]")
            exit(2)
        }
        selected = target
        exit(runLibFuzzer(arguments: [arguments[0]] + arguments.dropFirst(2)))
    }
}

/// The target chosen on the command line. Written once in `main` before libFuzzer starts, then
/// only read, from libFuzzer's single fuzzing thread.
nonisolated(unsafe) private var selected: FuzzTarget?

/// The entry point libFuzzer calls with each input (its runtime also refers to this symbol).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    // libFuzzer's buffer is an exact-size heap copy: a read past it is an AddressSanitizer error.
    selected!.run(UnsafeRawBufferPointer(start: data, count: size))
    return 0
}

/// Calls `LLVMFuzzerRunDriver(&argc, &argv, fuzzOneInput)`.
private func runLibFuzzer(arguments: [String]) -> CInt {
    // libFuzzer keeps pointers into argv for the whole run: these copies are never freed.
    let argv = UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>.allocate(capacity: arguments.count + 1)
    argv.initialize(from: arguments.map { strdup($0) } + [nil], count: arguments.count + 1)
    var argvPointer: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = argv
    var argc = CInt(arguments.count)
    return LLVMFuzzerRunDriver(&argc, &argvPointer, fuzzOneInput)
}

/// One decoder under test: `run` must return normally for every input; a trap, a sanitizer
/// report or a broken property (`require`) is a finding.
struct FuzzTarget: Sendable {
    let name: String
    let run: @Sendable (UnsafeRawBufferPointer) -> Void
}

/// Writes one line to standard error.
func printError(_ line: String) {
    var text = line + "\n"
    text.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
}

/// Stops the run with `message` when a property that must hold for every input does not.
func require(_ condition: @autoclosure () -> Bool, _ message: String) {
    if !condition() { fatalError("property broken: \(message)") }
}
