// swift-tools-version:6.0
// The Swift package `Honker`: an idiomatic layer (Sources/Honker) over the
// UniFFI-generated bindings (Sources/HonkerNative, Sources/honker_swiftFFI:
// generated, never edited by hand; scripts/swift-bindgen.sh) of the Rust
// library libhonker_swift, built on the system SQLite (Sources/CSQLite: one
// SQLite library in the app's process, shared with GRDB, Core Data and
// SQLite.swift; the library defines no sqlite3_* symbol of its own).
//
// Swift 6 language mode, complete concurrency checking.
//
// Linux (and scripts/swift-test.sh): the static library is expected in
// ./lib (cargo build --release -p honker-swift, then copy
// target/release/libhonker_swift.a); libsqlite3-dev provides sqlite3.h.
// Apple platforms: scripts/apple-xcframework.sh builds the library as an
// XCFramework, used as a binary target instead (docs/swift.md, "Apple
// platforms"); Apple builds are not run in this repository's CI.
import PackageDescription

let libDir = Context.packageDirectory + "/lib"

let package = Package(
    name: "Honker",
    // The system SQLite of these releases is 3.39 or newer (honker's minimum).
    platforms: [.macOS(.v13), .iOS(.v16)],
    products: [
        .library(name: "Honker", targets: ["Honker"]),
    ],
    targets: [
        .systemLibrary(name: "CSQLite", path: "Sources/CSQLite"),
        .systemLibrary(name: "honker_swiftFFI", path: "Sources/honker_swiftFFI"),
        .target(
            name: "HonkerNative",
            dependencies: ["honker_swiftFFI", "CSQLite"],
            path: "Sources/HonkerNative",
            exclude: ["README.md"],
            linkerSettings: [
                .unsafeFlags(["-L", libDir]),
                .linkedLibrary("honker_swift"),
                .linkedLibrary("sqlite3"),
                .linkedLibrary("m"),
                .linkedLibrary("dl", .when(platforms: [.linux])),
                .linkedLibrary("pthread", .when(platforms: [.linux])),
            ]
        ),
        .target(
            name: "Honker",
            dependencies: ["HonkerNative"],
            path: "Sources/Honker",
            resources: [.copy("PrivacyInfo.xcprivacy")]
        ),
        // The Swift surface of tests-interop (JSON steps on stdin).
        .executableTarget(
            name: "HonkerInteropDriver",
            dependencies: ["Honker", "HonkerNative"],
            path: "Sources/HonkerInteropDriver"
        ),
        // Every bad input, one process per case (BadInputProcessTests).
        .executableTarget(
            name: "HonkerBadInputs",
            dependencies: ["Honker"],
            path: "Sources/HonkerBadInputs"
        ),
        // Swift vs Python on the queue workloads (bench/swift/run.py).
        .executableTarget(
            name: "HonkerBench",
            dependencies: ["Honker"],
            path: "Sources/HonkerBench"
        ),
        .testTarget(name: "HonkerTests", dependencies: ["Honker", "CSQLite"], path: "Tests/HonkerTests"),
    ],
    swiftLanguageModes: [.v6]
)
