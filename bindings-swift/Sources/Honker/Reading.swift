// How Swift reads what core's `Reader` hands out: a claim's jobs, a
// subscription's events, a listener's notifications, a group consumer's
// events. One iterator for all four.

import HonkerNative

/// The iterator of every honker `AsyncSequence`. Each `next` waits off the
/// caller's thread and ends at once, with nil, when the iterating Task is
/// cancelled (core's cancel token). An item taken as the Task was cancelled
/// is still returned: dropping it would lose it (a subscription would count
/// it as processed). What else was taken stays buffered in core for the next
/// call, or until the reader is closed.
public struct Reading<Element: Sendable>: AsyncIteratorProtocol {
    let cancel: CancelToken
    let closed: @Sendable () -> Bool
    let take: @Sendable (CancelToken) throws -> Element?

    /// `cancel`: a token for waits on the reader's file.
    init(_ cancel: CancelToken, closed: @escaping @Sendable () -> Bool,
         take: @escaping @Sendable (CancelToken) throws -> Element?) {
        self.cancel = cancel
        self.closed = closed
        self.take = take
    }

    public mutating func next() async throws -> Element? {
        let (cancel, take) = (self.cancel, self.take)
        while true {
            if Task.isCancelled || closed() { return nil }
            let item = try await withTaskCancellationHandler {
                try await waitOffThread { try take(cancel) }
            } onCancel: {
                cancel.cancel()
            }
            if let item { return item }
        }
    }
}
