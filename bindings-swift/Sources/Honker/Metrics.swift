// Queue metrics counted in the file (ADR 27): `Queue.metrics()`,
// `Database.metrics()`, `Database.metricsText()`. Every process and
// language counts into the same rows, so the numbers are the whole file's.
// A process writes its counts at most a second after they commit, at close
// and at exit (a killed process loses its last second of counts); it reads
// its own at once. They are cumulative: compute rates from two readings.
import Foundation

/// A queue's counters since the file was created (or reached schema 10), and
/// its jobs by state now.
public struct QueueMetrics: Sendable, Equatable {
    public let queue: String
    /// Jobs enqueued (a dedupe hit that returned the live job is not).
    public let enqueued: UInt64
    /// Claims (a job claimed again after a retry or a lapsed lease counts again).
    public let claimed: UInt64
    public let acked: UInt64
    /// Given back by a worker for another attempt.
    public let retried: UInt64
    /// Taken back after their lease lapsed (the worker died or stalled).
    public let reclaimed: UInt64
    public let dead: UInt64
    public let expired: UInt64
    public let cancelled: UInt64
    /// From when a job was due to its claim.
    public let claimLatency: LatencyHistogram
    public let ready: UInt64
    public let scheduled: UInt64
    public let running: UInt64
    public let deadLetters: UInt64

    /// Claim latency, in seconds.
    public struct LatencyHistogram: Sendable, Equatable {
        /// Cumulative: claims with a latency up to `le` seconds (`nil`: +Inf).
        public let buckets: [(le: TimeInterval?, count: UInt64)]
        public let sum: TimeInterval
        public let count: UInt64

        public static func == (a: LatencyHistogram, b: LatencyHistogram) -> Bool {
            a.sum == b.sum && a.count == b.count
                && a.buckets.map { $0.le } == b.buckets.map { $0.le }
                && a.buckets.map { $0.count } == b.buckets.map { $0.count }
        }
    }

    private struct Wire: Decodable {
        struct Bucket: Decodable {
            let le_seconds: Double?
            let count: UInt64
        }
        struct Latency: Decodable {
            let buckets: [Bucket]
            let sum_seconds: Double
            let count: UInt64
        }
        let queue: String
        let totals: [String: UInt64]
        let claim_latency: Latency
        let jobs: [String: UInt64]
    }

    /// core's JSON list (`QueueMetrics::to_json`).
    static func decode(list json: String) throws -> [QueueMetrics] {
        try JSONDecoder().decode([Wire].self, from: Data(json.utf8)).map { w in
            QueueMetrics(
                queue: w.queue,
                enqueued: w.totals["enqueued"] ?? 0,
                claimed: w.totals["claimed"] ?? 0,
                acked: w.totals["acked"] ?? 0,
                retried: w.totals["retried"] ?? 0,
                reclaimed: w.totals["reclaimed"] ?? 0,
                dead: w.totals["dead"] ?? 0,
                expired: w.totals["expired"] ?? 0,
                cancelled: w.totals["cancelled"] ?? 0,
                claimLatency: LatencyHistogram(
                    buckets: w.claim_latency.buckets.map { (le: $0.le_seconds, count: $0.count) },
                    sum: w.claim_latency.sum_seconds,
                    count: w.claim_latency.count),
                ready: w.jobs["ready"] ?? 0,
                scheduled: w.jobs["scheduled"] ?? 0,
                running: w.jobs["running"] ?? 0,
                deadLetters: w.jobs["dead"] ?? 0)
        }
    }
}
