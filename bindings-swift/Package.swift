// swift-tools-version:5.9
// The Swift package `Honker`: an idiomatic layer (Sources/Honker) over the
// UniFFI-generated bindings (Sources/HonkerNative, Sources/honker_swiftFFI:
// generated, never edited by hand; scripts/swift-bindgen.sh)
// of the Rust library libhonker_swift.
//
// Linux (and scripts/swift-test.sh): the static library is expected in
// ./lib (cargo build --release -p honker-swift, then copy
// target/release/libhonker_swift.a). Apple platforms: see README-swift.md
// (an XCFramework as a binary target instead).
import PackageDescription

let libDir = Context.packageDirectory + "/lib"

let package = Package(
    name: "Honker",
    platforms: [.macOS(.v12), .iOS(.v15)],
    products: [
        .library(name: "Honker", targets: ["Honker"]),
    ],
    targets: [
        .systemLibrary(name: "honker_swiftFFI", path: "Sources/honker_swiftFFI"),
        .target(
            name: "HonkerNative",
            dependencies: ["honker_swiftFFI"],
            path: "Sources/HonkerNative",
            exclude: ["README.md"],
            linkerSettings: [
                .unsafeFlags(["-L", libDir]),
                .linkedLibrary("honker_swift"),
                .linkedLibrary("m"),
                .linkedLibrary("dl", .when(platforms: [.linux])),
                .linkedLibrary("pthread", .when(platforms: [.linux])),
            ]
        ),
        .target(name: "Honker", dependencies: ["HonkerNative"], path: "Sources/Honker"),
        // The Swift surface of tests-interop (JSON steps on stdin).
        .executableTarget(
            name: "HonkerInteropDriver",
            dependencies: ["Honker", "HonkerNative"],
            path: "Sources/HonkerInteropDriver"
        ),
        .testTarget(name: "HonkerTests", dependencies: ["Honker"], path: "Tests/HonkerTests"),
    ]
)
