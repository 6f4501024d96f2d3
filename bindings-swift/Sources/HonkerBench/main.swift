// One Swift benchmark process: workload W1–W4 of bench/python (the same
// counts, payloads and batch sizes), through the Swift API as an app's async
// code calls it, printing {"ops": N, "seconds": S} as JSON.
//
//     HonkerBench WORKLOAD PATH COUNT      (WORKLOAD: fill, W1, W2, W3, W4)
//
// bench/swift/run.py runs it in the Swift chroot beside Python's
// workloads.py in the same run and prints the ratios.
import Foundation
import Honker

struct Email: Codable, Sendable {
    let to: String
    let template: String
}

func payload(_ i: Int) -> Email {
    Email(to: "user\(i)@example.com", template: "order-confirmed")
}

@main
struct Bench {
    static func main() async throws {
        let args = CommandLine.arguments
        guard args.count == 4, let count = Int(args[3]) else {
            FileHandle.standardError.write(Data("usage: HonkerBench fill|W1|W2|W3|W4 PATH COUNT\n".utf8))
            exit(2)
        }
        let (workload, path) = (args[1], args[2])
        let db = try Database(path: path)
        let q = try db.queue("bench")
        var ops = 0
        let started = Date()
        switch workload {
        case "fill":
            for start in stride(from: 0, to: count, by: 1000) {
                try await q.enqueueMany((start..<min(count, start + 1000)).map(payload))
            }
            ops = count
        case "W1":
            for i in 0..<count { try await q.enqueue(payload(i)) }
            ops = count
        case "W2":
            let batch = (0..<1000).map(payload)
            for _ in 0..<count { try await q.enqueueMany(batch) }
            ops = count * 1000
        case "W3":
            while true {
                let jobs = try await q.claimBatch(workerId: "bench-worker", n: 1)
                if jobs.isEmpty { break }
                for job in jobs { try await job.ack() }
                ops += jobs.count
            }
        case "W4":
            while true {
                let jobs = try await q.claimBatch(workerId: "bench-worker", n: 32)
                if jobs.isEmpty { break }
                try await q.ackMany(jobs)
                ops += jobs.count
            }
        default:
            FileHandle.standardError.write(Data("unknown workload \(workload)\n".utf8))
            exit(2)
        }
        let seconds = Date().timeIntervalSince(started)
        print("{\"ops\": \(ops), \"seconds\": \(seconds)}")
    }
}
