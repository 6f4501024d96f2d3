//! The stream's records and options.

use crate::payload::Payload;
use crate::trace::TraceContext;

/// One event of a stream.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    /// Its offset: dense and gap-free from 1 within its stream.
    pub offset: i64,
    /// The label it was published with, if any.
    pub key: Option<String>,
    /// Its payload.
    pub payload: Payload,
    /// When it was published (ms since the epoch).
    pub created_at: i64,
    /// The producer's W3C trace context, if it had one.
    pub trace_context: Option<TraceContext>,
    /// The priority it was published with (0 unless given).
    pub priority: i32,
}

impl From<super::ops::Event> for Event {
    fn from(e: super::ops::Event) -> Event {
        Event {
            offset: e.offset,
            key: e.key,
            payload: e.payload,
            created_at: e.created_at,
            trace_context: e.trace_context,
            priority: e.priority,
        }
    }
}

/// How to publish one event.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PublishOptions {
    /// A label stored with the event (up to 512 bytes).
    pub key: Option<String>,
    /// Makes a retried publish return the original offset (within 24 h) and
    /// append nothing; the same key with another payload is
    /// `INVALID_ARGUMENT`. Up to 512 bytes.
    pub idempotency_key: Option<String>,
    /// The producer's W3C trace context, stored beside the event (never in
    /// its payload) and handed to its readers. Python and Node fill it from
    /// the active OpenTelemetry span.
    pub trace_context: Option<TraceContext>,
    /// A priority stored with the event and handed to its readers (0 by
    /// default). Reading stays in offset order; the value is the app's.
    pub priority: i32,
}

impl PublishOptions {
    /// `INVALID_ARGUMENT` unless every option is one core takes (keys of
    /// 1 to 512 bytes).
    pub fn check(&self) -> crate::Result<()> {
        if let Some(k) = &self.key {
            crate::validate::key("key", k)?;
        }
        if let Some(k) = &self.idempotency_key {
            crate::validate::key("idempotency key", k)?;
        }
        Ok(())
    }
}

/// Where a consumer with no committed offset starts. A committed offset
/// always wins; moving one is [`Stream::seek`](super::Stream::seek).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Start {
    /// The first retained event.
    #[default]
    Beginning,
    /// Only events published after the subscription starts.
    Latest,
    /// This offset (up to one past the last event).
    Offset(i64),
    /// The first event published at or after this time (ms since the epoch).
    Time(i64),
}

/// A consumer's place and how far behind it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsumerInfo {
    /// Its name.
    pub consumer: String,
    /// The next offset it reads.
    pub next_offset: i64,
    /// Events published that it has not passed yet.
    pub lag: i64,
}

/// What [`Stream::info`](super::Stream::info) reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamInfo {
    /// Events retained.
    pub length: i64,
    /// The first retained offset, if any event is.
    pub first_offset: Option<i64>,
    /// The last offset published (0: none yet).
    pub last_offset: i64,
    /// Every consumer, by name.
    pub consumers: Vec<ConsumerInfo>,
    /// Every consumer group, by name.
    pub groups: Vec<super::group::GroupInfo>,
}

impl From<super::ops::Info> for StreamInfo {
    fn from(i: super::ops::Info) -> StreamInfo {
        StreamInfo {
            length: i.length,
            first_offset: i.first_offset,
            last_offset: i.last_offset,
            consumers: i
                .consumers
                .into_iter()
                .map(|c| ConsumerInfo {
                    consumer: c.consumer,
                    next_offset: c.next_offset,
                    lag: c.lag,
                })
                .collect(),
            groups: i.groups,
        }
    }
}
