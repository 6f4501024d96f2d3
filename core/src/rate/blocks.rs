//! Blocks of a rate-limited queue's starts, reserved ahead by one process
//! (ADR 23 §9), so that a queue limit that does not bind costs no write per
//! claim.
//!
//! Without them, every claim on a limited queue writes the queue's `tat`:
//! one more page in every claim's commit (about 15 % of claim 1 + ack 1).
//! Instead, a claim in a transaction of its own that took all it asked for,
//! on a limit less than half used, also reserves a block of `m` starts,
//! valid from `now` until `now + v`, in the same write. The next claims of
//! this `Database` on that queue take their starts from the block and write
//! nothing for the limit.
//!
//! **Why the guarantee still holds exactly.** GCRA's bound (at most `limit
//! + burst − 1` starts in any window of length `per`) rests on two facts
//! about every start at time `s`: it owns a distinct slot `x` on the `tat`
//! line (slots are `T` apart), and `s + T ≤ x ≤ s + τ`. Then the starts in
//! a window `[a, a + per)` own slots in `[a + T, a + per + τ)`: at most
//! `(per + τ) / T` of them. A block's slots are placed after the end of its
//! validity, `x > now + v`, and end by `now + τ/2`; a start from the block
//! at `s ∈ [now, now + v]` then has `x ≥ now + v + T ≥ s + T` and `x ≤ now
//! + τ ≤ s + τ`. So starts from blocks and exact starts, of any processes,
//! obey the same bound. What a block costs is capacity, never excess:
//! starts it does not hand out by `now + v` are lost, and the slots it
//! skips to begin after `now + v` are too.
//!
//! **When.** Only while the limit is less than half used, so a limit that
//! binds (or nearly) is decided exactly at every claim, as before, and a
//! block never takes more than half the tolerance `τ` from other processes
//! (a `burst` of 1 never has room for one). A block is dropped when the
//! stored limit changes (any `set_rate_limit`, here or elsewhere, or a
//! lift), when the stored `tat` is behind the one the block wrote (the
//! queue's state was reset), or when the clock leaves its validity.

use std::collections::HashMap;

use parking_lot::Mutex;

use super::types::RateLimit;

/// How long a block's starts stay valid at most (ms).
const VALID_MS: i64 = 100;
/// How many starts a block holds at least (when they fit), and per start
/// asked of the claim that reserves it.
const BLOCK: i64 = 256;
const PER_CLAIM: i64 = 4;

/// A queue's limit as one claim read it: parameters, `tat` (µs) and when
/// the parameters were last set (`updated_at`, ms).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct QueueLimit {
    pub(crate) limit: RateLimit,
    pub(crate) tat: Option<i64>,
    pub(crate) set_at: i64,
}

/// Starts reserved ahead for one queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Block {
    limit: RateLimit,
    set_at: i64,
    /// The queue's `tat` this block's write left (µs).
    tat: i64,
    from_ms: i64,
    until_ms: i64,
    left: i64,
}

impl Block {
    /// The block for a claim of `want` that started what it asked for at
    /// `now_ms` and leaves the queue's `tat` at `tat` (µs), and the `tat`
    /// to store instead, or `None` when the limit is not less than half
    /// used or no block of at least two claims fits.
    pub(crate) fn plan(
        stored: &QueueLimit,
        tat: i64,
        want: i64,
        now_ms: i64,
    ) -> Option<(Block, i64)> {
        let l = &stored.limit;
        let (t, tau) = (l.interval_us(), l.tolerance_us());
        let now = now_ms.checked_mul(1000)?;
        let v_ms = VALID_MS.min(tau / 4 / 1000);
        if v_ms < 1 {
            return None;
        }
        let until_ms = now_ms.checked_add(v_ms)?;
        let first = tat.max(until_ms.checked_mul(1000)?);
        let room = now.checked_add(tau / 2)?.checked_sub(first)?;
        let m = (room / t).min(BLOCK.max(want.saturating_mul(PER_CLAIM)));
        if m < want.saturating_mul(2).max(2) {
            return None;
        }
        let new_tat = first.checked_add(m.checked_mul(t)?)?;
        let block = Block {
            limit: stored.limit,
            set_at: stored.set_at,
            tat: new_tat,
            from_ms: now_ms,
            until_ms,
            left: m,
        };
        Some((block, new_tat))
    }

    /// Whether `n` starts can come from this block at `now_ms`, with the
    /// queue's limit stored as `stored`.
    fn serves(&self, stored: &QueueLimit, n: i64, now_ms: i64) -> bool {
        self.limit == stored.limit
            && self.set_at == stored.set_at
            && stored.tat.is_some_and(|t| t >= self.tat)
            && (self.from_ms..=self.until_ms).contains(&now_ms)
            && self.left >= n
    }
}

/// One `Database`'s blocks, by queue.
#[derive(Debug, Default)]
pub(crate) struct Blocks(Mutex<HashMap<String, Block>>);

impl Blocks {
    /// Takes `n` starts of `queue` from its block, if it serves them (see
    /// [`Block::serves`]), and says which block (for
    /// [`give_back`](Self::give_back)); a block that cannot is dropped.
    pub(crate) fn take(
        &self,
        queue: &str,
        stored: &QueueLimit,
        n: i64,
        now_ms: i64,
    ) -> Option<i64> {
        let mut blocks = self.0.lock();
        match blocks.get_mut(queue) {
            Some(b) if b.serves(stored, n, now_ms) => {
                b.left -= n;
                Some(b.tat)
            }
            Some(_) => {
                blocks.remove(queue);
                None
            }
            None => None,
        }
    }

    /// Gives back `n` starts taken from the block `which` for a claim that
    /// started fewer (the queue ran out), if that block is still the
    /// queue's (blocks differ in the `tat` they wrote).
    /// How many starts `queue`'s block holds for a claim at `now_ms` that
    /// read `stored`, without taking any; a block that no longer serves is
    /// dropped.
    pub(crate) fn left(&self, queue: &str, stored: &QueueLimit, now_ms: i64) -> Option<i64> {
        let mut blocks = self.0.lock();
        match blocks.get(queue) {
            Some(b) if b.serves(stored, 1, now_ms) => Some(b.left),
            Some(_) => {
                blocks.remove(queue);
                None
            }
            None => None,
        }
    }

    pub(crate) fn give_back(&self, queue: &str, which: i64, n: i64) {
        if let Some(b) = self.0.lock().get_mut(queue).filter(|b| b.tat == which) {
            b.left += n;
        }
    }

    /// Installs a block whose write committed.
    pub(crate) fn install(&self, queue: &str, block: Block) {
        self.0.lock().insert(queue.to_owned(), block);
    }
}

/// The blocks of a fair queue's keys under its rate limit per key (ADR
/// 36), one per queue and key (named by [`KeyBlocks::name`]): the same
/// reservations, and the same proof, with each key's `tat` as the line.
#[derive(Debug, Default)]
pub(crate) struct KeyBlocks(pub(crate) Blocks);

impl KeyBlocks {
    /// The block name of `key` of `queue` (a queue name holds no NUL).
    pub(crate) fn name(queue: &str, key: &str) -> String {
        format!("{queue}\u{0}{key}")
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn limit(limit: i64, per_ms: u64, burst: i64) -> QueueLimit {
        QueueLimit {
            limit: RateLimit::new(limit, Duration::from_millis(per_ms)).burst(burst),
            tat: None,
            set_at: 1,
        }
    }

    #[test]
    fn a_burst_of_one_or_a_small_tolerance_never_gets_a_block() {
        for (l, per, burst) in [(5, 1000, 1), (10, 1000, 3), (1_000_000, 1000, 1)] {
            let q = limit(l, per, burst);
            let now = 1_000_000;
            let tat = now * 1000 + q.limit.interval_us();
            assert_eq!(
                Block::plan(&q, tat, 1, now),
                None,
                "{l}/{per} ms burst {burst}"
            );
        }
    }

    #[test]
    fn a_block_ends_by_half_the_tolerance_and_begins_after_its_validity() {
        let q = limit(1_000_000_000, 1000, 1_000_000);
        let now = 5_000;
        let (b, tat) = Block::plan(&q, now * 1000 + 1, 1, now).unwrap();
        assert_eq!(b.left, BLOCK);
        assert_eq!(b.until_ms, now + VALID_MS);
        assert_eq!(tat, (now + VALID_MS) * 1000 + BLOCK);
        // Half used already: none.
        let half = now * 1000 + q.limit.tolerance_us() / 2;
        assert_eq!(Block::plan(&q, half, 1, now), None);
    }

    #[test]
    fn a_block_serves_only_its_limit_its_validity_and_an_unreset_state() {
        let q = limit(1_000_000_000, 1000, 1_000_000);
        let now = 5_000;
        let (b, tat) = Block::plan(&q, now * 1000 + 1, 1, now).unwrap();
        let stored = QueueLimit {
            tat: Some(tat),
            ..q
        };
        let blocks = Blocks::default();
        blocks.install("q", b);
        assert_eq!(blocks.take("q", &stored, 1, now), Some(tat));
        blocks.give_back("q", tat, 1);
        blocks.give_back("q", tat + 1, 1000);
        assert_eq!(blocks.0.lock()["q"].left, BLOCK, "its own block only");
        assert!(blocks.take("q", &stored, 1, now + VALID_MS).is_some());
        for other in [
            QueueLimit {
                set_at: 2,
                ..stored
            },
            QueueLimit {
                tat: Some(tat - 1),
                ..stored
            },
            QueueLimit {
                tat: None,
                ..stored
            },
            QueueLimit {
                limit: q.limit.burst(999_999),
                ..stored
            },
        ] {
            blocks.install("q", b);
            assert_eq!(blocks.take("q", &other, 1, now), None, "{other:?}");
            assert_eq!(blocks.take("q", &stored, 1, now), None, "dropped");
        }
        for at in [now - 1, now + VALID_MS + 1] {
            blocks.install("q", b);
            assert_eq!(blocks.take("q", &stored, 1, at), None, "at {at}");
        }
        blocks.install("q", b);
        assert_eq!(blocks.take("q", &stored, BLOCK + 1, now), None, "too few");
    }

    /// One stored limit and the processes claiming on it: each claim as
    /// `Database` claims do (from the process's block, else exactly,
    /// reserving a block when it may), with every start's time.
    struct Sim {
        q: QueueLimit,
        procs: Vec<Blocks>,
        starts: Vec<i64>,
        from_blocks: i64,
    }

    impl Sim {
        fn new(l: i64, per: u64, burst: i64) -> Sim {
            Sim {
                q: limit(l, per, burst),
                procs: (0..4).map(|_| Blocks::default()).collect(),
                starts: Vec::new(),
                from_blocks: 0,
            }
        }

        fn claim(&mut self, p: usize, want: i64, now: i64) -> i64 {
            let blocks = &self.procs[p];
            if blocks.take("q", &self.q, want, now).is_some() {
                self.from_blocks += want;
                self.starts.extend(std::iter::repeat_n(now, want as usize));
                return want;
            }
            let l = &self.q.limit;
            let (n, _) = crate::rate::ops::queue_allowance(l, self.q.tat, want, now);
            if n == 0 {
                return 0;
            }
            self.starts.extend(std::iter::repeat_n(now, n as usize));
            let mut tat = crate::rate::ops::queue_tat_after(l, self.q.tat, n, now);
            if n == want {
                if let Some((b, reserved)) = Block::plan(&self.q, tat, want, now) {
                    tat = reserved;
                    blocks.install("q", b);
                }
            }
            self.q.tat = Some(tat);
            n
        }

        /// The most starts in any window of length `per`, and the bound.
        fn most_in_a_window(&self) -> (usize, usize) {
            let per = self.q.limit.per_ms();
            let mut starts = self.starts.clone();
            starts.sort_unstable();
            let (mut most, mut lo) = (0, 0);
            for hi in 0..starts.len() {
                while starts[hi] - starts[lo] >= per {
                    lo += 1;
                }
                most = most.max(hi - lo + 1);
            }
            (most, (self.q.limit.limit + self.q.limit.burst - 1) as usize)
        }
    }

    /// The hard case, by hand: a block reserved after an idle spell and
    /// used late in its validity, while another process starts a full
    /// burst and then the sustained rate. Had the block's slots been
    /// placed right after the stored `tat` (before its validity ends), its
    /// starts would come on top of a full burst: `limit + burst − 1 + 256`.
    #[test]
    fn a_block_used_late_does_not_add_to_a_full_burst() {
        let mut sim = Sim::new(20_000, 1000, 5_000);
        let t0 = 10_000;
        assert_eq!(sim.claim(0, 1, t0), 1);
        let late = t0 + VALID_MS.min(sim.q.limit.tolerance_us() / 4000);
        assert_eq!(sim.claim(0, BLOCK, late), BLOCK, "the block, late");
        for now in late..late + 1000 {
            sim.claim(1, 40_000, now);
        }
        let (most, bound) = sim.most_in_a_window();
        assert!(most <= bound, "{most} > {bound}");
        assert_eq!(sim.from_blocks, BLOCK);
    }

    /// Processes that each claim exactly or from blocks, on one stored
    /// limit, at random times and sizes, in phases of demand (some
    /// processes active, light or heavy) between idle spells: no window of
    /// length `per` holds more than `limit + burst − 1` starts, and blocks
    /// are used.
    #[test]
    fn blocks_and_exact_claims_of_several_processes_keep_the_bound() {
        let mut rng = fastrand::Rng::with_seed(7);
        for (l, per, burst) in [
            (2_000, 1000, 1_000),
            (300, 1000, 300),
            (20_000, 1000, 5_000),
            (100_000, 1000, 50_000),
            (500, 100, 400),
        ] {
            let mut sim = Sim::new(l, per, burst);
            let mut now = 10_000_i64;
            let (mut active, mut most_want, mut step) = (4, 40, 3);
            for _ in 0..100_000 {
                if rng.u32(0..200) == 0 {
                    now += rng.i64(0..=2 * per as i64);
                    active = rng.usize(1..=4);
                    most_want = [1, 4, 40, 400][rng.usize(0..4)];
                    step = rng.i64(0..=5);
                }
                now += rng.i64(0..=step);
                sim.claim(rng.usize(0..active), rng.i64(1..=most_want), now);
            }
            let (most, bound) = sim.most_in_a_window();
            assert!(
                most <= bound,
                "{l}/{per} ms burst {burst}: {most} > {bound}"
            );
            assert!(sim.from_blocks > 0, "{l}/{per} ms burst {burst}: no block");
        }
    }
}
