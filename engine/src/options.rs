//! What the engine is opened with (validated by `honker::Options`, which
//! holds these among honker's own).

use std::sync::Arc;
use std::time::Duration;

use crate::clock::{Clock, SystemClock};
use crate::error::{Error, Result};

/// How hard a commit tries to reach the disk (SQLite `PRAGMA synchronous` in
/// WAL mode).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Durability {
    /// `synchronous=NORMAL`: a commit survives the process crashing; the last
    /// few commits may be lost if the machine loses power. The default.
    #[default]
    Normal,
    /// `synchronous=FULL`: every commit is fsynced before it returns; survives
    /// power loss, costs an fsync per write transaction.
    Full,
}

impl Durability {
    /// The name every surface uses: `"normal"` or `"full"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Durability::Normal => "normal",
            Durability::Full => "full",
        }
    }
}

impl std::str::FromStr for Durability {
    type Err = Error;

    /// `"normal"` or `"full"`; anything else is `INVALID_ARGUMENT`. The one
    /// parser every binding uses.
    fn from_str(s: &str) -> Result<Durability> {
        match s {
            "normal" => Ok(Durability::Normal),
            "full" => Ok(Durability::Full),
            other => Err(Error::invalid(format!(
                "durability must be \"normal\" or \"full\", got {other:?}"
            ))),
        }
    }
}

/// What the engine needs of `honker::Options` (validated there).
#[derive(Clone, Debug)]
pub struct Options {
    pub durability: Durability,
    pub busy_timeout: Duration,
    pub readers: usize,
    pub clock: Arc<dyn Clock>,
    pub watch_fallback: Duration,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            durability: Durability::Normal,
            busy_timeout: Duration::from_secs(5),
            readers: 4,
            clock: Arc::new(SystemClock),
            watch_fallback: Duration::from_secs(1),
        }
    }
}
