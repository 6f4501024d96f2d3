// swift-tools-version:6.0
// The Swift package `Honker`, for apps that add it by Git URL (SwiftPM reads
// the manifest at the repository's root): the `Honker` library from
// bindings-swift/'s sources. bindings-swift/Package.swift is the one this
// repository builds and tests (with the interop driver, the benchmarks and
// the tests); the test command builds an app package against this one and
// checks that the two `release` constants agree (scripts/swift-test.sh).
//
// Apple platforms: the library's XCFramework, from a release's URL and
// checksum (`release`), or from bindings-swift/build/HonkerFFI.xcframework,
// made by scripts/apple-xcframework.sh. Linux: the static library in
// bindings-swift/lib (see bindings-swift/Package.swift).
import PackageDescription

/// A release's XCFramework (scripts/apple-xcframework.sh --url prints this
/// line): the same as bindings-swift/Package.swift's.
let release: (url: String, checksum: String)? = nil

let dir = "bindings-swift"

#if os(Linux)
let ffi: Target = .systemLibrary(name: "honker_swiftFFI", path: "\(dir)/Sources/honker_swiftFFI")
let ffiLinker: [LinkerSetting] = [
    .unsafeFlags(["-L", Context.packageDirectory + "/\(dir)/lib"]), .linkedLibrary("honker_swift"),
]
#else
let ffi: Target = release.map { .binaryTarget(name: "honker_swiftFFI", url: $0.url, checksum: $0.checksum) }
    ?? .binaryTarget(name: "honker_swiftFFI", path: "\(dir)/build/HonkerFFI.xcframework")
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
        .systemLibrary(name: "CSQLite", path: "\(dir)/Sources/CSQLite"),
        ffi,
        .target(
            name: "HonkerNative",
            dependencies: ["honker_swiftFFI", "CSQLite"],
            path: "\(dir)/Sources/HonkerNative",
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
            path: "\(dir)/Sources/Honker",
            resources: [.copy("PrivacyInfo.xcprivacy")]
        ),
    ],
    swiftLanguageModes: [.v6]
)
