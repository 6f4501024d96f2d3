// The payload encoder (PayloadEncoder.swift) against Foundation's
// JSONEncoder with .sortedKeys, whose output it replaces: the same JSON
// value for every shape Codable can produce, decodable by JSONDecoder, keys
// in code point order, and EncodingError (never a trap) where JSON cannot
// carry a value.
import Foundation
import XCTest

@testable import Honker

private struct Mail: Codable, Equatable {
    let to: String
    let template: String
}

private enum Kind: Codable, Equatable {
    case plain
    case pair(Int, String)
    case named(label: String, mail: Mail)
}

private struct Empty: Codable, Equatable {}

private struct Everything: Codable, Equatable {
    var s = "q\"b\\s/\n\t\r\u{01}\u{1F}\u{7F}é🦆\u{2028}"
    var i = Int.min
    var i8: Int8 = -8
    var i16: Int16 = 16
    var i32 = Int32.max
    var i64 = Int64.min
    var u = UInt.max
    var u8: UInt8 = 255
    var u16: UInt16 = 7
    var u32 = UInt32.max
    var u64: UInt64 = 1 << 53
    var d = 0.1
    var whole = 3.0
    var negZero = -0.0
    var big = 1.5e300
    var tiny = Double.leastNonzeroMagnitude
    var f: Float = 0.25
    var yes = true
    var none: String? = nil
    var some: Int? = 4
    var list = [1, 2, 3]
    var mails = [Mail(to: "a@example.com", template: "t"), Mail(to: "b", template: "")]
    var dict = ["b": 1, "a": 2, "é": 3, "Z": 4, "": 5]
    var intKeys = [2: "two", 10: "ten"]
    var date = Date(timeIntervalSinceReferenceDate: 12.5)
    var data = Data([0, 1, 2, 255])
    var url = URL(string: "https://example.com/a?b=c")!
    var decimal = Decimal(string: "12.345")!
    var kinds: [Kind] = [.plain, .pair(1, "x"), .named(label: "l", mail: Mail(to: "c", template: "d"))]
    var empty = Empty()
    var holes: [Int?] = [1, nil, 3]
    var matrix = [[1.5, 2], [], [-3]]
}

/// Writes through every container kind, out of order: a nested container
/// filled after its parent moved on, a key written twice, super encoders.
private struct Handwritten: Encodable {
    enum Key: String, CodingKey { case z, a, inner, list, parent, twice }
    enum Inner: String, CodingKey { case y, x }

    func encode(to encoder: Encoder) throws {
        var top = encoder.container(keyedBy: Key.self)
        var inner = top.nestedContainer(keyedBy: Inner.self, forKey: .inner)
        var list = top.nestedUnkeyedContainer(forKey: .list)
        try top.encode("first", forKey: .twice)
        try top.encode(1, forKey: .z)
        try inner.encode(true, forKey: .y)
        try list.encode("one")
        var pair = list.nestedUnkeyedContainer()
        try pair.encode(2)
        try list.encodeNil()
        let parent = top.superEncoder(forKey: .parent)
        var single = parent.singleValueContainer()
        try single.encode(Mail(to: "p", template: "q"))
        try inner.encode("late", forKey: .x)
        try pair.encode(3)
        try top.encode("second", forKey: .twice)
        try Mail(to: "s", template: "t").encode(to: top.superEncoder())
        try top.encode(-1, forKey: .a)
    }
}

final class PayloadEncoderTests: XCTestCase {
    private func foundation<T: Encodable>(_ value: T) throws -> String {
        let e = JSONEncoder()
        e.outputFormatting = [.sortedKeys]
        return String(decoding: try e.encode(value), as: UTF8.self)
    }

    /// The JSON value of `text`, written back in one canonical form.
    private func canonical(_ text: String) throws -> String {
        let value = try JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])
        let data = try JSONSerialization.data(withJSONObject: value, options: [.sortedKeys, .fragmentsAllowed])
        return String(decoding: data, as: UTF8.self)
    }

    private func assertSameAsFoundation<T: Encodable>(_ value: T, file: StaticString = #filePath,
                                                       line: UInt = #line) throws {
        let ours = try PayloadJSON.encode(value)
        XCTAssertEqual(try canonical(ours), try canonical(try foundation(value)), ours, file: file, line: line)
    }

    func testEveryShapeIsTheJSONValueFoundationWrites() throws {
        try assertSameAsFoundation(Everything())
        try assertSameAsFoundation(Handwritten())
        try assertSameAsFoundation([Mail(to: "x", template: "y")])
        try assertSameAsFoundation(["k": [Kind.plain]])
        try assertSameAsFoundation(Optional<Int>.none)
        try assertSameAsFoundation("fragment")
        try assertSameAsFoundation(42)
    }

    func testWhatItWritesDecodesToTheSameValue() throws {
        let value = Everything()
        let decoded = try JSONDecoder().decode(Everything.self, from: Data(try PayloadJSON.encode(value).utf8))
        XCTAssertEqual(decoded, value)
        let kinds = value.kinds
        XCTAssertEqual(try JSONDecoder().decode([Kind].self, from: Data(try PayloadJSON.encode(kinds).utf8)), kinds)
    }

    func testTheExactText() throws {
        XCTAssertEqual(try PayloadJSON.encode(Mail(to: "a@b", template: "order-confirmed")),
                       #"{"template":"order-confirmed","to":"a@b"}"#)
        // Keys in code point order, whatever the dictionary's hash order.
        XCTAssertEqual(try PayloadJSON.encode(["b": 1, "a": 2, "é": 3, "Z": 4, "aa": 5]),
                       #"{"Z":4,"a":2,"aa":5,"b":1,"é":3}"#)
        // The order Foundation's .sortedKeys gives, byte for byte.
        let mixed = ["b": 1, "B": 2, "a10": 3, "a9": 4, "é": 5, "z": 6, "_": 7]
        XCTAssertEqual(try PayloadJSON.encode(mixed), try foundation(mixed))
        XCTAssertEqual(try PayloadJSON.encode("q\"\\/\n\t\r\u{01}\u{1F}é🦆"),
                       #""q\"\\/\n\t\r\u0001\u001fé🦆""#)
        XCTAssertEqual(try PayloadJSON.encode([1.0, -0.0, 0.1, 1e-5, 2.5e300, Double(Int64.max)]),
                       "[1,-0,0.1,1e-05,2.5e+300,9.223372036854776e+18]")
        XCTAssertEqual(try PayloadJSON.encode([Int64.min, 0, Int64.max]),
                       "[-9223372036854775808,0,9223372036854775807]")
        XCTAssertEqual(try PayloadJSON.encode([UInt64.max]), "[18446744073709551615]")
        XCTAssertEqual(try PayloadJSON.encode(Handwritten()),
                       #"{"a":-1,"inner":{"x":"late","y":true},"list":["one",[2,3],null],"#
                           + #""parent":{"template":"q","to":"p"},"super":{"template":"t","to":"s"},"#
                           + #""twice":"second","z":1}"#)
        XCTAssertEqual(try PayloadJSON.encode([Empty()]), "[{}]")
        XCTAssertEqual(try PayloadJSON.encode(Data([0, 1, 255]) as Data?), #""AAH/""#)
    }

    func testManyKeysStayUniqueAndSorted() throws {
        var dict: [String: Int] = [:]
        for i in 0..<200 { dict["k\(i)"] = i }
        let text = try PayloadJSON.encode(dict)
        let back = try JSONDecoder().decode([String: Int].self, from: Data(text.utf8))
        XCTAssertEqual(back, dict)
        let keys = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]).keys
        XCTAssertEqual(keys.count, 200)
        XCTAssertTrue(text.hasPrefix(#"{"k0":0,"k1":1,"k10":10,"k100":100,"k101":101,"#), text)
    }

    func testAKeyWrittenAgainKeepsOnePlaceAndItsLastValueFewKeysOrMany() throws {
        // Below 16 keys an object keeps its keys in order as they are set;
        // from 16 on it indexes them and sorts when written.
        struct Again: Encodable {
            let before: Int
            struct Key: CodingKey {
                let stringValue: String
                init(_ s: String) { stringValue = s }
                init?(stringValue: String) { self.init(stringValue) }
                var intValue: Int? { nil }
                init?(intValue: Int) { nil }
            }
            func encode(to encoder: Encoder) throws {
                var c = encoder.container(keyedBy: Key.self)
                for i in (0..<before).reversed() { try c.encode(i, forKey: Key("k\(i)")) }
                try c.encode(1, forKey: Key("\u{E9}"))
                // The same key as Swift compares strings (canonical
                // equivalence), other bytes: one key, as in JSONEncoder.
                try c.encode(2, forKey: Key("e\u{301}"))
                try c.encode(3, forKey: Key("k0"))
                try c.encode(4, forKey: Key("a"))
            }
        }
        for before in [0, 1, 3, 14, 15, 16, 40] {
            let ours = try PayloadJSON.encode(Again(before: before))
            XCTAssertEqual(ours, try foundation(Again(before: before)), "\(before) keys before")
        }
        XCTAssertEqual(try PayloadJSON.encode(Again(before: 2)), #"{"a":4,"k0":3,"k1":1,"é":2}"#)
    }

    func testWhatJSONCannotCarryIsAnEncodingErrorWithItsPath() {
        struct Bad: Encodable {
            let fine = 1
            let values: [Double]
        }
        for v in [Double.nan, .infinity, -.infinity] {
            XCTAssertThrowsError(try PayloadJSON.encode(Bad(values: [0, v]))) { error in
                guard case EncodingError.invalidValue(_, let context) = error else {
                    return XCTFail("\(error)")
                }
                XCTAssertEqual(context.codingPath.map(\.stringValue), ["values", "Index 1"])
            }
            XCTAssertThrowsError(try PayloadJSON.encode(v))
            XCTAssertThrowsError(try PayloadJSON.encode(["f": Float(v)]))
        }
        XCTAssertThrowsError(try PayloadJSON.encode(["d": Decimal.nan]))
        // A top-level value that encodes nothing: as JSONEncoder does.
        struct Silent: Encodable {
            func encode(to encoder: Encoder) throws {}
        }
        XCTAssertThrowsError(try foundation(Silent()))
        XCTAssertThrowsError(try PayloadJSON.encode(Silent()))
        XCTAssertEqual(try? PayloadJSON.encode(Empty()), try? foundation(Empty()))
    }

    func testAnEnqueuedPayloadIsStoredAsThisText() async throws {
        let t = try testDb()
        let q = try t.db.queue("mail")
        let id = try await q.enqueue(["b": 1, "a": 2]).id
        let rows = try t.db.query("SELECT payload FROM _honker_jobs WHERE id = ?", [.integer(value: id)])
        XCTAssertEqual(rows.first?[0], .text(value: #"{"a":2,"b":1}"#))
    }
}
