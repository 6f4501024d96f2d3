//! [`Listener`]: a channel's notifications as a sequence that sleeps until
//! another process (or thread) notifies.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use parking_lot::Mutex;

use crate::channel::{Channel, Notification};
use crate::error::{Error, Result};
use crate::validate;

#[derive(Debug)]
struct State {
    /// The id of the last message read.
    after_id: i64,
    /// The sequence number of the next message expected.
    next_seq: i64,
    buffer: VecDeque<Notification>,
}

/// Hands out every notification of one channel committed after it started,
/// in commit order, each once. If the channel's window moved past
/// notifications it had not read, `next` fails once with `TRIMMED` and
/// [`Error::missed`] set, then goes on from the oldest retained one.
/// Thread-safe: `close` may come from another thread while `next` waits.
#[derive(Debug)]
pub struct Listener {
    channel: Channel,
    batch: usize,
    state: Mutex<State>,
    closed: AtomicBool,
}

impl super::Reader for Listener {
    fn next_until(&self, wait: Duration, stop: &dyn Fn() -> bool) -> Result<Option<Notification>> {
        let stop = || self.is_closed() || stop();
        let db = self.channel.database();
        let reads = crate::Reads(|| self.take_buffered());
        db.inner.wait_for(&reads, wait, &stop, "Listener::next")
    }

    fn is_closed(&self) -> bool {
        Listener::is_closed(self)
    }
}

/// A host's wait that holds no thread: each look says "now" (a take is
/// one read when nothing is buffered), the take `next(ZERO)`.
impl crate::Source for Listener {
    type Item = Notification;

    fn look(&self) -> Result<Option<Duration>> {
        Ok(Some(Duration::ZERO))
    }

    fn take(&self) -> Result<Option<Notification>> {
        self.next(Duration::ZERO)
    }
}

impl super::QuickDrop for Listener {
    /// A listener holds no lease and writes nothing when dropped.
    fn drops_quickly(&self) -> bool {
        true
    }
}

impl Listener {
    /// Starts listening on `channel`, reading `batch` messages at a time.
    pub fn new(channel: &Channel, batch: usize) -> Result<Listener> {
        let batch = validate::batch_usize(batch)?;
        let (last_seq, last_id) = channel.head()?;
        Ok(Listener {
            channel: channel.clone(),
            batch,
            state: Mutex::new(State {
                after_id: last_id.unwrap_or(0),
                next_seq: last_seq + 1,
                buffer: VecDeque::new(),
            }),
            closed: AtomicBool::new(false),
        })
    }

    /// The channel's name.
    pub fn channel(&self) -> &str {
        self.channel.name()
    }

    /// The next notification, waiting up to `wait`; `None` when the wait ran
    /// out or the listener was closed.
    pub fn next(&self, wait: Duration) -> Result<Option<Notification>> {
        super::Reader::next_until(self, wait, &|| false)
    }

    /// One read into the buffer when it is empty, then the next buffered
    /// notification.
    fn take_buffered(&self) -> Result<Option<Notification>> {
        let mut s = self.state.lock();
        while s.buffer.is_empty() {
            let expected = s.next_seq;
            let got = self.channel.read(s.after_id, self.batch)?;
            let resume = match got.first() {
                Some(m) => m.seq,
                None => match self.channel.head_after(s.after_id)? {
                    (_, true) => continue, // sent since the read: read it now
                    (last, false) => (last + 1).max(expected),
                },
            };
            if let Some(m) = got.last() {
                s.after_id = m.id;
                s.next_seq = m.seq + 1;
            } else {
                s.next_seq = resume;
            }
            s.buffer.extend(got);
            if resume > expected {
                return Err(Error::trimmed(
                    &format!("channel {:?}", self.channel.name()),
                    (resume - expected) as u64,
                    resume,
                ));
            }
            break;
        }
        Ok(s.buffer.pop_front())
    }

    /// Whether [`close`](Self::close) was called.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Stops the listener and wakes a waiting `next`. Idempotent.
    pub fn close(&self) {
        if !self.closed.swap(true, Ordering::SeqCst) {
            self.channel.database().poke();
        }
    }
}

impl crate::Database {
    /// Listens on `channel`: every notification committed from now on.
    pub fn listen(&self, channel: &str) -> Result<Listener> {
        self.channel(channel)?.listen()
    }
}

impl crate::channel::Channel {
    /// A listener that gets every notification committed from now on.
    pub fn listen(&self) -> Result<Listener> {
        Listener::new(self, 1000)
    }
}
