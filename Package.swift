// swift-tools-version: 6.0
import PackageDescription

/// `CAIRN_FUZZ=1` adds the libFuzzer harness (Fuzz/README.md). It exists only then, because it
/// links libFuzzer's driver, which only `-sanitize=fuzzer` provides.
let fuzzing = Context.environment["CAIRN_FUZZ"] == "1"

// Dependencies point inward: CairnCore holds the types and rules and does no I/O; each target
// around it does one kind of I/O; the executables are thin.
let package = Package(
    name: "Cairn",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "cairn-server", targets: ["cairn-server"]),
        .executable(name: "cairnd", targets: ["cairnd"]),
        .executable(name: "cairn", targets: ["cairn"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-crypto", from: "3.12.3"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
    ],
    targets: [
        // System libraries from Debian's -dev packages, with shims for what Swift cannot call.
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CZlib", pkgConfig: "zlib", providers: [.apt(["zlib1g-dev"])]),
        // No pkgConfig for OpenBLAS: its `-lopenblas` would link the library, and it must be
        // loaded with dlopen instead (see BLAS.swift). cblas.h is on Debian's default include path.
        .systemLibrary(name: "COpenBLAS", providers: [.apt(["libopenblas-dev"])]),
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),

        // Types and rules, no I/O.
        .target(name: "CairnCore", dependencies: [
            .product(name: "Crypto", package: "swift-crypto"),
            // AES-CTR, the set hash's expansion (SetHash.swift).
            .product(name: "_CryptoExtras", package: "swift-crypto"),
        ]),
        // The encoder's element-wise loops are optimised even in debug builds, so that the test
        // suite can run the real model on hundreds of passages in seconds. The fuzz build keeps
        // Swift's overflow and bounds checks, so that a broken file traps instead of wrapping.
        // The encoder's C kernels, compiled per instruction set (see EncoderKernels.swift), and
        // the dense search's int8 kernels (vector_kernels.h); -O3 in debug builds too, so that
        // tests of the real model take seconds, not minutes.
        .target(name: "CEncoderKernels", cSettings: [.unsafeFlags(["-O3"])]),
        // OpenBLAS, loaded with dlopen at first use: the embedding model's matrix products.
        .target(name: "CairnBLAS", dependencies: ["COpenBLAS"]),
        // Every thread that runs off Swift's cooperative pool (Threads.swift says which work
        // runs where): search threads, side work, the encoder's team, install threads.
        .target(name: "CairnThreads"),
        .target(name: "CairnEmbedding", dependencies: ["CairnBLAS", "CairnCore", "CairnThreads", "CEncoderKernels"],
                swiftSettings: fuzzing ? [] : [.unsafeFlags(["-Ounchecked"])]),
        // Files: zlib streams with size caps, atomic writes, the content-addressed blob store.
        .target(name: "CairnStore", dependencies: ["CairnCore", "CZlib"]),
        // An SQLite VFS whose sequential reads are direct: an install's verifying pass.
        .target(name: "CSQLiteStream", dependencies: ["CSQLite"]),
        .target(name: "CairnIndex", dependencies: ["CairnCore", "CairnThreads", "CSQLite", "CSQLiteStream", "CEncoderKernels"],
                exclude: ["SNAPSHOT-SCHEMA.md"]),
        .target(name: "CairnPublish", dependencies: [
            "CairnCore", "CairnEmbedding", "CairnIndex", "CairnStore",
            .product(name: "Logging", package: "swift-log"),
        ]),
        .target(name: "CairnSync", dependencies: [
            "CairnCore", "CairnEmbedding", "CairnIndex", "CairnStore", "CairnThreads", "CCurl",
            .product(name: "Logging", package: "swift-log"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        ]),
        // The Swift side of cairnd's socket API, for the CLI and for apps: the Unix-socket HTTP
        // client, the wire types of its answers, where the socket is. No server, no sync.
        .target(name: "CairnClient", dependencies: ["CairnCore"]),
        // What cairnd's socket API and cairn-server's online search share: request parsing,
        // answers, error codes, the version being searched and the worker pool that runs it.
        .target(name: "CairnSearch", dependencies: [
            "CairnCore", "CairnIndex", "CairnEmbedding", "CairnThreads",
            .product(name: "Logging", package: "swift-log"),
        ]),
        .target(name: "CairnServer", dependencies: [
            "CairnCore", "CairnHTTP", "CairnIndex", "CairnEmbedding", "CairnSearch", "CairnStore",
            .product(name: "Hummingbird", package: "hummingbird"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "Metrics", package: "swift-metrics"),
            .product(name: "Prometheus", package: "swift-prometheus"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        ]),
        // The connection limits both HTTP servers share (HTTP/1.0 close, request and write deadlines).
        .target(name: "CairnHTTP", dependencies: [.product(name: "Hummingbird", package: "hummingbird")]),
        .target(name: "CairnDaemon", dependencies: [
            "CairnClient", "CairnCore", "CairnHTTP", "CairnIndex", "CairnEmbedding", "CairnSearch", "CairnStore", "CairnSync", "CairnThreads",
            .product(name: "Hummingbird", package: "hummingbird"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "Prometheus", package: "swift-prometheus"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        ]),

        // The command lines' shared entry point (one-line usage errors).
        .target(name: "CairnCommandLine", dependencies: ["CairnBLAS", .product(name: "ArgumentParser", package: "swift-argument-parser")]),
        .executableTarget(name: "cairn-server", dependencies: [
            "CairnCommandLine", "CairnCore", "CairnPublish", "CairnServer", "CairnStore",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
            .product(name: "Logging", package: "swift-log"),
        ]),
        .executableTarget(name: "cairnd", dependencies: [
            "CairnBLAS", "CairnCommandLine", "CairnCore", "CairnDaemon",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
            .product(name: "Logging", package: "swift-log"),
        ]),
        // `cairn eval` publishes a test collection and installs it, hence Publish/Index/Store.
        .executableTarget(name: "cairn", dependencies: [
            "CairnClient", "CairnCommandLine", "CairnCore", "CairnEmbedding", "CairnPublish", "CairnIndex", "CairnSearch", "CairnStore",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
            .product(name: "Logging", package: "swift-log"),
        ]),
        .executableTarget(name: "cairn-bench", dependencies: ["CairnBLAS", "CairnClient", "CairnCore", "CairnEmbedding", "CairnIndex", "CairnStore"],
                         path: "Benchmarks/cairn-bench"),

        // Shared by the test targets: the tiny random model, temporary folders, processes, the
        // fault server, the fault reporter.
        .target(name: "CairnTestSupport", dependencies: ["CairnEmbedding", .product(name: "Logging", package: "swift-log")],
                path: "Tests/CairnTestSupport",
                exclude: ["Fixtures/fault_server.py", "Fixtures/forward_proxy.py"]),
        .testTarget(name: "CairnCoreTests", dependencies: ["CairnCore", .product(name: "Crypto", package: "swift-crypto")]),
        .testTarget(name: "CairnEmbeddingTests", dependencies: ["CairnEmbedding", "CairnTestSupport", "CairnThreads"]),
        .testTarget(name: "CairnStoreTests", dependencies: ["CairnStore", "CairnTestSupport"]),
        .testTarget(name: "CairnIndexTests", dependencies: ["CairnIndex", "CairnTestSupport"]),
        .testTarget(name: "CairnPublishTests", dependencies: ["CairnPublish", "CairnIndex", "CairnStore", "CairnTestSupport"]),
        .testTarget(name: "CairnSyncTests", dependencies: ["CairnSync", "CairnPublish", "CairnTestSupport", "CairnThreads"]),
        .testTarget(name: "CairnSearchTests", dependencies: ["CairnSearch", "CairnIndex", "CairnCore", "CairnThreads"]),
        .testTarget(name: "CairnServerTests", dependencies: ["CairnServer", "CairnIndex", "CairnSearch", "CairnEmbedding", "CairnTestSupport"]),
        .testTarget(name: "CairnDaemonTests", dependencies: ["CairnClient", "CairnDaemon", "CairnSearch", "CairnTestSupport"]),
        // Real processes: cairn-server, cairnd and cairn started from the built products.
        .testTarget(name: "CairnIntegrationTests", dependencies: ["CairnClient", "CairnCore", "CairnIndex", "CairnTestSupport"]),
        // Faults injected into real processes (network, content, disk, process, callers,
        // publisher); one line per fault: `fault: <name> — held n/n (…)`.
        .testTarget(name: "CairnFaultTests", dependencies: ["CairnClient", "CairnCore", "CairnDaemon", "CairnSearch", "CairnStore", "CairnSync",
                                                            "CairnTestSupport"]),
    ]
)

if fuzzing {
    // One executable, one subcommand per decoder: `cairn-fuzz manifest|root|delta|safetensors|search-body`.
    package.targets += [
        .systemLibrary(name: "CLibFuzzer", path: "Fuzz/CLibFuzzer"),
        .executableTarget(name: "cairn-fuzz", dependencies: ["CLibFuzzer", "CairnCore", "CairnEmbedding", "CairnSearch"],
                          path: "Fuzz/cairn-fuzz"),
    ]
}

// Upcoming language features, on for every Swift target: what a module re-exports is chosen
// (InternalImportsByDefault: a `public import` where a public declaration shows the module's
// types), and existential types are spelled `any P` (ExistentialAny).
// MemberImportVisibility is off: on Linux the libc headers are not modular, so `struct stat`
// and its fields belong to whichever C module the compiler read <sys/stat.h> through first
// (CDispatch on one cold build, Glibc on a warm one), and a file that uses them fails or
// builds depending on build order (the same fault as swift-system's CSystem, fixed there in
// 1.7.0). The explicit per-file imports it asked for are kept.
for target in package.targets where target.type != .system {
    target.swiftSettings = (target.swiftSettings ?? []) + [
        .enableUpcomingFeature("InternalImportsByDefault"),
        .enableUpcomingFeature("ExistentialAny"),
    ]
}
