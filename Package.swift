// swift-tools-version: 6.0
import PackageDescription

// Dependencies point inward: CairnCore holds the types and rules and does no I/O; each target
// around it does one kind of I/O; the executables are thin.
let package = Package(
    name: "Cairn",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "cairn-server", targets: ["cairn-server"]),
        .executable(name: "cairnd", targets: ["cairnd"]),
        .executable(name: "cairn", targets: ["cairn"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-crypto", from: "3.12.3"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
    ],
    targets: [
        // System libraries from Debian's -dev packages, with shims for what Swift cannot call.
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CZlib", pkgConfig: "zlib", providers: [.apt(["zlib1g-dev"])]),
        .systemLibrary(name: "COpenBLAS", pkgConfig: "openblas", providers: [.apt(["libopenblas-dev"])]),
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),

        .target(name: "CairnCore", dependencies: [
            .product(name: "Crypto", package: "swift-crypto"),
        ]),
        // The encoder's element-wise loops are optimised even in debug builds, so that the test
        // suite can run the real model on hundreds of passages in seconds.
        .target(name: "CairnEmbedding", dependencies: ["COpenBLAS"],
                swiftSettings: [.unsafeFlags(["-Ounchecked"])]),
        .target(name: "CairnIndex", dependencies: ["CairnCore", "CairnEmbedding", "CSQLite"],
                exclude: ["SNAPSHOT-SCHEMA.md"]),
        .target(name: "CairnPublish", dependencies: [
            "CairnCore", "CairnEmbedding", "CairnIndex", "CZlib",
            .product(name: "Crypto", package: "swift-crypto"),
            .product(name: "Logging", package: "swift-log"),
        ]),

        .executableTarget(name: "cairn-server", dependencies: [
            "CairnCore", "CairnPublish",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
            .product(name: "Logging", package: "swift-log"),
        ]),
        .executableTarget(name: "cairnd", dependencies: [
            "CairnCore",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
            .product(name: "Logging", package: "swift-log"),
        ]),
        .executableTarget(name: "cairn", dependencies: [
            "CairnCore", "CairnEmbedding",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ]),

        .executableTarget(name: "cairn-bench", dependencies: ["CairnEmbedding"], path: "Benchmarks/cairn-bench"),

        .testTarget(name: "CairnCoreTests", dependencies: ["CairnCore"]),
        .testTarget(name: "CairnEmbeddingTests", dependencies: ["CairnEmbedding"]),
        .testTarget(name: "CairnIndexTests", dependencies: ["CairnIndex"]),
    ]
)
