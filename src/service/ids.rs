//! The one source of call ids in the process: the service's calls and the
//! daemon's own answers (busy, invalid lines, cancelled before start) draw
//! from the same counter, so no two answers of one process share an id and
//! a trace can key on them.

use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// Told apart from other processes' ids by the pid and the start time.
static PREFIX: LazyLock<String> = LazyLock::new(|| {
    let millis = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    format!("c{:x}{:x}", std::process::id(), millis)
});

static NEXT: AtomicU64 = AtomicU64::new(0);

/// A call id unique in this process: `c<pid><start ms>-<n>`, hex.
pub fn next_call_id() -> String {
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("{}-{n}", *PREFIX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_share_a_prefix_and_never_repeat() {
        let a = next_call_id();
        let b = next_call_id();
        assert_ne!(a, b);
        let (pa, na) = a.rsplit_once('-').unwrap();
        let (pb, nb) = b.rsplit_once('-').unwrap();
        assert_eq!(pa, pb);
        assert!(pa.starts_with('c'));
        assert!(nb.parse::<u64>().unwrap() > na.parse::<u64>().unwrap());
    }
}
