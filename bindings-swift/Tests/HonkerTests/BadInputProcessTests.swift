// Every bad input (HonkerBadInputs: the Python suite's, as Swift's types
// allow, and the durations and dates that trapped), each in a process of
// its own: none crashes, each is a coded INVALID_ARGUMENT, and none changes
// the file.
import Foundation
import XCTest

final class BadInputProcessTests: XCTestCase {
    /// The executable, built next to the tests by `swift build` (on Linux
    /// the tests run as `.build/debug/HonkerPackageTests.xctest`; with
    /// Xcode, in the bundle's directory).
    var executable: URL {
        let places = [Bundle.main.executableURL, Bundle(for: BadInputProcessTests.self).bundleURL]
        let found = places.compactMap { $0?.deletingLastPathComponent().appendingPathComponent("HonkerBadInputs") }
        return found.first { FileManager.default.isExecutableFile(atPath: $0.path) } ?? found[0]
    }

    func run(_ args: [String]) throws -> (status: Int32, reason: Process.TerminationReason, out: String) {
        let p = Process()
        p.executableURL = executable
        p.arguments = args
        let pipe = Pipe()
        p.standardOutput = pipe
        p.standardError = pipe
        try p.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return (p.terminationStatus, p.terminationReason, String(decoding: data, as: UTF8.self))
    }

    func testEveryBadInputIsACodedErrorInItsOwnProcessAndNoneCrashes() throws {
        let list = try run([])
        let cases = list.out.split(separator: "\n").map(String.init)
        XCTAssertGreaterThanOrEqual(cases.count, 35, list.out)
        for name in cases {
            let dir = URL(fileURLWithPath: NSTemporaryDirectory())
                .appendingPathComponent("honker-bad-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: dir) }
            let r = try run([name, dir.path])
            XCTAssertEqual(r.reason, .exit, "\(name) crashed (signal \(r.status)): \(r.out)")
            XCTAssertEqual(r.status, 0, "\(name): \(r.out)")
            let lines = r.out.split(separator: "\n").map(String.init)
            XCTAssertEqual(lines.count, 2, "\(name): \(r.out)")
            XCTAssertTrue(lines.first?.hasPrefix("INVALID_ARGUMENT: ") == true, "\(name): \(r.out)")
            XCTAssertEqual(lines.last, "unchanged", "\(name) changed the file: \(r.out)")
        }
    }
}
