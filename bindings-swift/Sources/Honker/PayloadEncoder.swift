// The JSON an `Encodable` payload is stored as: what Foundation's
// `JSONEncoder` with `.sortedKeys` writes (its default strategies: `Date` as
// seconds since 2001, `Data` as base64, `URL` as its absolute string,
// `Decimal` as a number, a non-finite number an `EncodingError`), written in
// one pass over a small tree instead of through Foundation's machinery,
// which costs ~4 µs for a two-field struct on Linux — more than the rest of
// an enqueue inside a batch. Object keys are sorted by their UTF-8 bytes
// (code point order, as Python's `sort_keys` and Rust's `BTreeMap` sort),
// so a payload's text does not depend on a dictionary's hash order.
import Foundation

enum PayloadJSON {
    /// `value` as JSON text; `EncodingError` for what JSON cannot carry.
    static func encode<T: Encodable>(_ value: T) throws -> String {
        var out: [UInt8] = []
        out.reserveCapacity(128)
        try encode(value, into: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// `value` as JSON text appended to `out` (a batch's payloads are
    /// written into one buffer: Packed.swift).
    static func encode<T: Encodable>(_ value: T, into out: inout [UInt8]) throws {
        let root = NodeEncoder(parent: nil, key: nil)
        // The value encodes into the root itself (one encoder fewer than
        // `box`, which nests), unless it is one of the special cases.
        let node: JSONNode
        if let special = try root.special(value, at: nil) {
            node = special
        } else {
            try value.encode(to: root)
            node = root.node ?? .pending(root)
        }
        if case .pending(let e) = node, e.node == nil {
            throw EncodingError.invalidValue(value, EncodingError.Context(
                codingPath: [], debugDescription: "Top-level \(T.self) did not encode any values."))
        }
        write(node, into: &out)
    }
}

/// A value being encoded. Containers are references: `Encoder` lets a value
/// write into a container (or a nested one) after asking for another.
enum JSONNode {
    case null
    case bool(Bool)
    case int(Int64)
    case uint(UInt64)
    case double(Double)
    case float(Float)
    case string(String)
    case number(String)  // already JSON (a Decimal)
    case object(JSONObject)
    case array(JSONArray)
    // A nested encoder's value, known once it is used (a super encoder):
    // written as what it becomes, `{}` if it stays empty (as JSONEncoder).
    case pending(NodeEncoder)
}

final class JSONObject {
    /// Members in the order they are written: by the key's UTF-8 bytes while
    /// there are few (kept so as they are set, so most objects are never
    /// sorted), in the order set once there are many (sorted when written).
    private(set) var members: [(key: String, value: JSONNode)] = []
    /// Positions by key, once there are enough keys for a scan to cost.
    private var index: [String: Int]?

    var inKeyOrder: Bool { index == nil }

    init() {
        members.reserveCapacity(4)
    }

    func set(_ key: String, _ value: JSONNode) {
        // The same key twice: the last value wins, as in JSONEncoder.
        if var index {
            if let i = index[key] {
                members[i].value = value
            } else {
                index[key] = members.count
                self.index = index
                members.append((key, value))
            }
            return
        }
        // Keys equal as Swift strings (canonically) are one key, as in
        // JSONEncoder's dictionary, whatever their bytes.
        if let i = members.firstIndex(where: { $0.key == key }) {
            members[i].value = value
            return
        }
        var i = members.count
        while i > 0, !precedes(members[i - 1].key, key) { i -= 1 }
        members.insert((key, value), at: i)
        if members.count == 16 {
            index = Dictionary(uniqueKeysWithValues: zip(members.map(\.key), members.indices))
        }
    }
}

final class JSONArray {
    var items: [JSONNode] = []
}

/// One level of the encoding: the `Encoder` a value's `encode(to:)` sees.
final class NodeEncoder: Encoder {
    let parent: NodeEncoder?
    let key: CodingKey?
    var node: JSONNode?

    init(parent: NodeEncoder?, key: CodingKey?) {
        self.parent = parent
        self.key = key
    }

    var codingPath: [CodingKey] {
        var path: [CodingKey] = []
        var e: NodeEncoder? = self
        while let level = e {
            if let k = level.key { path.append(k) }
            e = level.parent
        }
        return path.reversed()
    }

    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        KeyedEncodingContainer(KeyedNodeContainer<Key>(encoder: self, object: object()))
    }

    func unkeyedContainer() -> UnkeyedEncodingContainer {
        UnkeyedNodeContainer(encoder: self, array: array())
    }

    func singleValueContainer() -> SingleValueEncodingContainer {
        SingleNodeContainer(encoder: self)
    }

    func object() -> JSONObject {
        if case .object(let o)? = node { return o }
        let o = JSONObject()
        node = .object(o)
        return o
    }

    func array() -> JSONArray {
        if case .array(let a)? = node { return a }
        let a = JSONArray()
        node = .array(a)
        return a
    }

    /// `value` as a node, below this encoder at `key`.
    func box<T: Encodable>(_ value: T, at key: CodingKey? = nil) throws -> JSONNode {
        if let special = try special(value, at: key) { return special }
        let nested = NodeEncoder(parent: self, key: key)
        try value.encode(to: nested)
        return nested.node ?? .pending(nested)
    }

    /// Metatype checks (cheap) for JSONEncoder's special cases and the
    /// scalars, before the general route through `encode(to:)`; nil for
    /// that route.
    func special<T: Encodable>(_ value: T, at key: CodingKey?) throws -> JSONNode? {
        if T.self == String.self { return .string(value as! String) }
        if T.self == Int.self { return .int(Int64(value as! Int)) }
        if T.self == Bool.self { return .bool(value as! Bool) }
        if T.self == Double.self { return try double(value as! Double, at: key) }
        if T.self == Int64.self { return .int(value as! Int64) }
        if T.self == Date.self {
            return try double((value as! Date).timeIntervalSinceReferenceDate, at: key)
        }
        if T.self == Data.self { return .string((value as! Data).base64EncodedString()) }
        if T.self == URL.self { return .string((value as! URL).absoluteString) }
        if T.self == Decimal.self {
            let d = value as! Decimal
            guard !d.isNaN else { throw nonFinite(d, at: key) }
            return .number(d.description)
        }
        return nil
    }

    func double(_ v: Double, at key: CodingKey?) throws -> JSONNode {
        guard v.isFinite else { throw nonFinite(v, at: key) }
        return .double(v)
    }

    func float(_ v: Float, at key: CodingKey?) throws -> JSONNode {
        guard v.isFinite else { throw nonFinite(v, at: key) }
        return .float(v)
    }

    func nonFinite(_ value: Any, at key: CodingKey?) -> EncodingError {
        EncodingError.invalidValue(value, EncodingError.Context(
            codingPath: codingPath + (key.map { [$0] } ?? []),
            debugDescription: "Unable to encode \(value) directly in JSON."))
    }
}

/// An array position in a coding path.
struct IndexKey: CodingKey {
    let intValue: Int?
    let stringValue: String
    init(_ i: Int) {
        intValue = i
        stringValue = "Index \(i)"
    }
    init?(stringValue: String) { return nil }
    init?(intValue: Int) { self.init(intValue) }
}

struct KeyedNodeContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let encoder: NodeEncoder
    let object: JSONObject

    var codingPath: [CodingKey] { encoder.codingPath }

    mutating func encodeNil(forKey key: Key) throws { object.set(key.stringValue, .null) }
    mutating func encode(_ v: Bool, forKey key: Key) throws { object.set(key.stringValue, .bool(v)) }
    mutating func encode(_ v: String, forKey key: Key) throws { object.set(key.stringValue, .string(v)) }
    mutating func encode(_ v: Double, forKey key: Key) throws {
        object.set(key.stringValue, try encoder.double(v, at: key))
    }
    mutating func encode(_ v: Float, forKey key: Key) throws {
        object.set(key.stringValue, try encoder.float(v, at: key))
    }
    mutating func encode(_ v: Int, forKey key: Key) throws { object.set(key.stringValue, .int(Int64(v))) }
    mutating func encode(_ v: Int8, forKey key: Key) throws { object.set(key.stringValue, .int(Int64(v))) }
    mutating func encode(_ v: Int16, forKey key: Key) throws { object.set(key.stringValue, .int(Int64(v))) }
    mutating func encode(_ v: Int32, forKey key: Key) throws { object.set(key.stringValue, .int(Int64(v))) }
    mutating func encode(_ v: Int64, forKey key: Key) throws { object.set(key.stringValue, .int(v)) }
    mutating func encode(_ v: UInt, forKey key: Key) throws { object.set(key.stringValue, .uint(UInt64(v))) }
    mutating func encode(_ v: UInt8, forKey key: Key) throws { object.set(key.stringValue, .uint(UInt64(v))) }
    mutating func encode(_ v: UInt16, forKey key: Key) throws { object.set(key.stringValue, .uint(UInt64(v))) }
    mutating func encode(_ v: UInt32, forKey key: Key) throws { object.set(key.stringValue, .uint(UInt64(v))) }
    mutating func encode(_ v: UInt64, forKey key: Key) throws { object.set(key.stringValue, .uint(v)) }
    mutating func encode<T: Encodable>(_ v: T, forKey key: Key) throws {
        object.set(key.stringValue, try encoder.box(v, at: key))
    }

    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy keyType: NestedKey.Type, forKey key: Key
    ) -> KeyedEncodingContainer<NestedKey> {
        let nested = NodeEncoder(parent: encoder, key: key)
        let o = nested.object()
        object.set(key.stringValue, .object(o))
        return KeyedEncodingContainer(KeyedNodeContainer<NestedKey>(encoder: nested, object: o))
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> UnkeyedEncodingContainer {
        let nested = NodeEncoder(parent: encoder, key: key)
        let a = nested.array()
        object.set(key.stringValue, .array(a))
        return UnkeyedNodeContainer(encoder: nested, array: a)
    }

    mutating func superEncoder() -> Encoder { superEncoder(named: "super") }
    mutating func superEncoder(forKey key: Key) -> Encoder { superEncoder(named: key.stringValue, key) }

    private func superEncoder(named name: String, _ key: CodingKey? = nil) -> Encoder {
        let nested = NodeEncoder(parent: encoder, key: key ?? (SuperKey() as CodingKey))
        object.set(name, .pending(nested))
        return nested
    }
}

struct SuperKey: CodingKey {
    var stringValue: String { "super" }
    var intValue: Int? { nil }
    init() {}
    init?(stringValue: String) { return nil }
    init?(intValue: Int) { return nil }
}

struct UnkeyedNodeContainer: UnkeyedEncodingContainer {
    let encoder: NodeEncoder
    let array: JSONArray

    var codingPath: [CodingKey] { encoder.codingPath }
    var count: Int { array.items.count }
    private var nextKey: IndexKey { IndexKey(array.items.count) }

    mutating func encodeNil() throws { array.items.append(.null) }
    mutating func encode(_ v: Bool) throws { array.items.append(.bool(v)) }
    mutating func encode(_ v: String) throws { array.items.append(.string(v)) }
    mutating func encode(_ v: Double) throws { array.items.append(try encoder.double(v, at: nextKey)) }
    mutating func encode(_ v: Float) throws { array.items.append(try encoder.float(v, at: nextKey)) }
    mutating func encode(_ v: Int) throws { array.items.append(.int(Int64(v))) }
    mutating func encode(_ v: Int8) throws { array.items.append(.int(Int64(v))) }
    mutating func encode(_ v: Int16) throws { array.items.append(.int(Int64(v))) }
    mutating func encode(_ v: Int32) throws { array.items.append(.int(Int64(v))) }
    mutating func encode(_ v: Int64) throws { array.items.append(.int(v)) }
    mutating func encode(_ v: UInt) throws { array.items.append(.uint(UInt64(v))) }
    mutating func encode(_ v: UInt8) throws { array.items.append(.uint(UInt64(v))) }
    mutating func encode(_ v: UInt16) throws { array.items.append(.uint(UInt64(v))) }
    mutating func encode(_ v: UInt32) throws { array.items.append(.uint(UInt64(v))) }
    mutating func encode(_ v: UInt64) throws { array.items.append(.uint(v)) }
    mutating func encode<T: Encodable>(_ v: T) throws {
        array.items.append(try encoder.box(v, at: nextKey))
    }

    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy keyType: NestedKey.Type
    ) -> KeyedEncodingContainer<NestedKey> {
        let nested = NodeEncoder(parent: encoder, key: nextKey)
        let o = nested.object()
        array.items.append(.object(o))
        return KeyedEncodingContainer(KeyedNodeContainer<NestedKey>(encoder: nested, object: o))
    }

    mutating func nestedUnkeyedContainer() -> UnkeyedEncodingContainer {
        let nested = NodeEncoder(parent: encoder, key: nextKey)
        let a = nested.array()
        array.items.append(.array(a))
        return UnkeyedNodeContainer(encoder: nested, array: a)
    }

    mutating func superEncoder() -> Encoder {
        let nested = NodeEncoder(parent: encoder, key: nextKey)
        array.items.append(.pending(nested))
        return nested
    }
}

struct SingleNodeContainer: SingleValueEncodingContainer {
    let encoder: NodeEncoder

    var codingPath: [CodingKey] { encoder.codingPath }

    // A second value replaces the first (JSONEncoder traps there; a payload
    // encoder never does).
    mutating func encodeNil() throws { encoder.node = .null }
    mutating func encode(_ v: Bool) throws { encoder.node = .bool(v) }
    mutating func encode(_ v: String) throws { encoder.node = .string(v) }
    mutating func encode(_ v: Double) throws { encoder.node = try encoder.double(v, at: nil) }
    mutating func encode(_ v: Float) throws { encoder.node = try encoder.float(v, at: nil) }
    mutating func encode(_ v: Int) throws { encoder.node = .int(Int64(v)) }
    mutating func encode(_ v: Int8) throws { encoder.node = .int(Int64(v)) }
    mutating func encode(_ v: Int16) throws { encoder.node = .int(Int64(v)) }
    mutating func encode(_ v: Int32) throws { encoder.node = .int(Int64(v)) }
    mutating func encode(_ v: Int64) throws { encoder.node = .int(v) }
    mutating func encode(_ v: UInt) throws { encoder.node = .uint(UInt64(v)) }
    mutating func encode(_ v: UInt8) throws { encoder.node = .uint(UInt64(v)) }
    mutating func encode(_ v: UInt16) throws { encoder.node = .uint(UInt64(v)) }
    mutating func encode(_ v: UInt32) throws { encoder.node = .uint(UInt64(v)) }
    mutating func encode(_ v: UInt64) throws { encoder.node = .uint(v) }
    mutating func encode<T: Encodable>(_ v: T) throws {
        // The value's own encoding, at this level (its encoder has no key).
        encoder.node = try encoder.box(v)
    }
}

// ----- writing ---------------------------------------------------------------

private func write(_ node: JSONNode, into out: inout [UInt8]) {
    switch node {
    case .null: out.append(contentsOf: "null".utf8)
    case .bool(let b): out.append(contentsOf: (b ? "true" : "false").utf8)
    case .int(let i): writeInteger(i, into: &out)
    case .uint(let u): writeInteger(u, into: &out)
    case .double(let d): writeNumber(d.description, into: &out)
    case .float(let f): writeNumber(f.description, into: &out)
    case .string(let s): writeString(s, into: &out)
    case .number(let n): out.append(contentsOf: n.utf8)
    case .pending(let e):
        if let n = e.node {
            write(n, into: &out)
        } else {
            out.append(contentsOf: "{}".utf8)
        }
    case .array(let a):
        out.append(UInt8(ascii: "["))
        for (i, item) in a.items.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            write(item, into: &out)
        }
        out.append(UInt8(ascii: "]"))
    case .object(let o):
        out.append(UInt8(ascii: "{"))
        let members = o.members
        func member(_ n: Int, _ i: Int) {
            if n > 0 { out.append(UInt8(ascii: ",")) }
            writeString(members[i].key, into: &out)
            out.append(UInt8(ascii: ":"))
            write(members[i].value, into: &out)
        }
        if o.inKeyOrder {
            for i in members.indices { member(i, i) }
        } else {
            let order = members.indices.sorted { precedes(members[$0].key, members[$1].key) }
            for (n, i) in order.enumerated() { member(n, i) }
        }
        out.append(UInt8(ascii: "}"))
    }
}

private func precedes(_ a: String, _ b: String) -> Bool {
    a.utf8.lexicographicallyPrecedes(b.utf8)
}

private func writeInteger<I: BinaryInteger>(_ value: I, into out: inout [UInt8]) {
    out.append(contentsOf: String(value).utf8)
}

/// Swift's shortest round-tripping form, whole numbers without ".0" (as
/// JSONEncoder writes them): valid JSON for a finite value ("1", "0.1",
/// "1e-05", "1.5e+300").
private func writeNumber(_ text: String, into out: inout [UInt8]) {
    if text.hasSuffix(".0") {
        out.append(contentsOf: text.utf8.dropLast(2))
    } else {
        out.append(contentsOf: text.utf8)
    }
}

private let hex: [UInt8] = Array("0123456789abcdef".utf8)

private func writeString(_ s: String, into out: inout [UInt8]) {
    out.append(UInt8(ascii: "\""))
    // Most strings need no escape: copied whole.
    let copied = s.utf8.withContiguousStorageIfAvailable { utf8 -> Bool in
        if utf8.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) {
            return false
        }
        out.append(contentsOf: utf8)
        return true
    } ?? false
    if copied {
        out.append(UInt8(ascii: "\""))
        return
    }
    for b in s.utf8 {
        switch b {
        case UInt8(ascii: "\""): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
        case UInt8(ascii: "\\"): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
        case 0x0A: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
        case 0x0D: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
        case 0x09: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
        case 0..<0x20:
            out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"),
                                    UInt8(ascii: "0"), hex[Int(b >> 4)], hex[Int(b & 0xF)]])
        default: out.append(b)
        }
    }
    out.append(UInt8(ascii: "\""))
}
