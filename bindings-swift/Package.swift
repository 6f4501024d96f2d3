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
// Apple platforms: the library as an XCFramework binary target, built by
// scripts/apple-xcframework.sh (docs/swift.md, "Apple platforms"); Apple
// builds are not run in this repository's CI.
import PackageDescription

let libDir = Context.packageDirectory + "/lib"

/// A release's XCFramework (scripts/apple-xcframework.sh --url prints this
/// line with the zip's checksum): set in a tagged release so that an app can
/// add the package by Git URL. Left nil, Apple builds use a local
/// build/HonkerFFI.xcframework made by that script.
let release: (url: String, checksum: String)? = nil

#if os(Linux)
// The static library in ./lib, the generated header and module map.
let ffi: Target = .systemLibrary(name: "honker_swiftFFI", path: "Sources/honker_swiftFFI")
let ffiLinker: [LinkerSetting] = [.unsafeFlags(["-L", libDir]), .linkedLibrary("honker_swift")]
#else
let ffi: Target = release.map { .binaryTarget(name: "honker_swiftFFI", url: $0.url, checksum: $0.checksum) }
    ?? .binaryTarget(name: "honker_swiftFFI", path: "build/HonkerFFI.xcframework")
let ffiLinker: [LinkerSetting] = []
#endif

let package = Package(
    name: "Honker",
    // The system SQLite of these releases is 3.39 or newer (honker's minimum).
    platforms: [.macOS(.v13), .iOS(.v16)],
    products: [
        .library(name: "Honker", targets: ["Honker"]),
    ],
    targets: [
        .systemLibrary(name: "CSQLite", path: "Sources/CSQLite"),
        ffi,
        .target(
            name: "HonkerNative",
            dependencies: ["honker_swiftFFI", "CSQLite"],
            path: "Sources/HonkerNative",
            exclude: ["README.md"],
            linkerSettings: ffiLinker + [
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
