// The packed forms of the queue's bulk calls: payloads in, enqueue results
// and claimed jobs out, each one byte buffer across the FFI instead of
// UniFFI records lifted field by field (the layout and the reason are in
// bindings-swift/src/packed.rs, which writes what this reads and reads what
// this writes).
import Foundation
import HonkerNative

enum Packed {
    private static let json: UInt8 = 0
    private static let bytes: UInt8 = 1

    /// `payloads` as core takes them (as `encode` does one): `Data` as bytes,
    /// anything else as JSON text, each written straight into the buffer.
    static func payloads<P: Encodable>(_ payloads: [P]) throws -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(payloads.count * 64)
        for p in payloads {
            if P.self == Data.self {
                append(bytes, p as! Data, into: &out)
                continue
            }
            out.append(json)
            let at = out.count
            out.append(contentsOf: [0, 0, 0, 0])
            try encodeJSON(p, into: &out)
            withUnsafeBytes(of: UInt32(truncatingIfNeeded: out.count - at - 4).littleEndian) {
                out.replaceSubrange(at..<at + 4, with: $0)
            }
        }
        return out
    }

    /// JSON texts as they are, unchecked here (core validates them).
    static func jsonTexts(_ texts: [String]) -> [UInt8] {
        var out: [UInt8] = []
        for t in texts { append(json, t.utf8, into: &out) }
        return out
    }

    private static func append<C: Collection<UInt8>>(_ kind: UInt8, _ item: C, into out: inout [UInt8]) {
        out.append(kind)
        withUnsafeBytes(of: UInt32(truncatingIfNeeded: item.count).littleEndian) { out.append(contentsOf: $0) }
        out.append(contentsOf: item)
    }

    /// `body` with the address and length of `packed`, valid during the
    /// call only: how payloads cross (packed.rs, `borrowed`).
    static func withAddress<T>(_ packed: [UInt8], _ body: (UInt64, UInt64) throws -> T) rethrows -> T {
        try packed.withUnsafeBytes { raw in
            try body(UInt64(UInt(bitPattern: raw.baseAddress)), UInt64(raw.count))
        }
    }

    /// The unique modes by their codes (core's `UniqueMode::ALL`).
    static let uniqueModes = ["live", "period", "throttle", "debounce"]

    static func enqueued(_ packed: Data) throws -> [Enqueued] {
        try packed.withUnsafeBytes { raw in
            var r = Reader(raw: raw)
            var out: [Enqueued] = []
            out.reserveCapacity(raw.count / 9)
            while !r.atEnd {
                let id = try r.int(Int64.self)
                let code = Int(try r.int(UInt8.self))
                guard code <= uniqueModes.count else { throw HonkerError.Internal(message: "a packed enqueue names no mode \(code)") }
                out.append(Enqueued(id: id, existing: code != 0, unique: code == 0 ? nil : uniqueModes[code - 1]))
            }
            return out
        }
    }

    static func claimed(_ packed: Data) throws -> [ClaimedJob] {
        try packed.withUnsafeBytes { raw in
            var r = Reader(raw: raw)
            var out: [ClaimedJob] = []
            while !r.atEnd {
                let id = try r.int(Int64.self)
                let attempts = try r.int(UInt32.self)
                let maxAttempts = try r.int(UInt32.self)
                let priority = try r.int(Int32.self)
                let runAtMs = try r.int(Int64.self)
                let createdAtMs = try r.int(Int64.self)
                let leaseExpiresAtMs = try r.int(Int64.self)
                let payload: Payload
                switch try r.int(UInt8.self) {
                case json: payload = .json(text: try r.string())
                case bytes: payload = .bytes(data: Data(try r.slice()))
                default: throw Reader.malformed
                }
                let token = try r.string()
                let traceContext = try r.int(UInt8.self) != 0 ? try r.string() : nil
                out.append(ClaimedJob(
                    id: id, payload: payload, attempts: attempts, maxAttempts: maxAttempts,
                    priority: priority, runAtMs: runAtMs, createdAtMs: createdAtMs,
                    leaseExpiresAtMs: leaseExpiresAtMs, token: token, traceContext: traceContext))
            }
            return out
        }
    }

    /// Reads a packed buffer front to back; never past its end.
    private struct Reader {
        static let malformed = HonkerError.Internal(message: "a packed buffer from the library is malformed")
        let raw: UnsafeRawBufferPointer
        var at = 0

        var atEnd: Bool { at >= raw.count }

        mutating func int<T: FixedWidthInteger>(_: T.Type) throws -> T {
            let size = MemoryLayout<T>.size
            guard raw.count - at >= size else { throw Reader.malformed }
            defer { at += size }
            return T(littleEndian: raw.loadUnaligned(fromByteOffset: at, as: T.self))
        }

        mutating func slice() throws -> UnsafeRawBufferPointer {
            let n = Int(try int(UInt32.self))
            guard raw.count - at >= n else { throw Reader.malformed }
            defer { at += n }
            return UnsafeRawBufferPointer(rebasing: raw[at..<at + n])
        }

        mutating func string() throws -> String {
            String(decoding: try slice(), as: UTF8.self)
        }
    }
}
