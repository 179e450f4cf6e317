//! The daemon's operating numbers, answered to a `stats` request: how many
//! calls ran, what was refused by which rule, which errors occurred, how
//! long calls took, and what is running and waiting right now.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::policy::Verdict;
use crate::result::ToolResult;

/// Latencies kept for the percentiles: the most recent calls only, so the
/// numbers follow the daemon's current behaviour and memory stays bounded.
pub(crate) const LATENCY_WINDOW: usize = 10_000;

#[derive(Debug)]
pub(crate) struct Stats {
    started: Instant,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    calls: u64,
    ran: u64,
    succeeded: u64,
    refusals_by_rule: BTreeMap<String, u64>,
    errors_by_type: BTreeMap<String, u64>,
    /// Milliseconds from the request line to its answer, newest last.
    latencies_ms: VecDeque<u64>,
}

/// What is in flight, read from the server's own counters at answer time.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Load {
    pub active_runs: usize,
    pub queue_depth: usize,
    pub connections: usize,
    pub max_concurrent: usize,
    pub queue_capacity: usize,
}

impl Stats {
    pub(crate) fn new() -> Stats {
        Stats {
            started: Instant::now(),
            inner: Mutex::new(Inner::default()),
        }
    }

    /// Counts one answered `run_shell` call.
    pub(crate) fn record(&self, r: &ToolResult, latency: Duration) {
        // A poisoned lock only means another thread panicked mid-update of
        // plain counters; they are still the best numbers there are.
        let mut s = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        s.calls += 1;
        // A command ran when it has an exit status or a signal.
        if r.exit_code.is_some() || r.signal.is_some() {
            s.ran += 1;
        }
        if r.ok {
            s.succeeded += 1;
        }
        if matches!(
            r.policy_decision,
            Some(Verdict::Deny) | Some(Verdict::RequireApproval)
        ) {
            let rule = r.matched_rule.clone().unwrap_or_else(|| "(default)".into());
            *s.refusals_by_rule.entry(rule).or_default() += 1;
        }
        if let Some(e) = r.error_type {
            let name = serde_json::to_value(e)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_else(|| "UNKNOWN".into());
            *s.errors_by_type.entry(name).or_default() += 1;
        }
        if s.latencies_ms.len() == LATENCY_WINDOW {
            s.latencies_ms.pop_front();
        }
        s.latencies_ms
            .push_back(u64::try_from(latency.as_millis()).unwrap_or(u64::MAX));
    }

    /// The `stats` answer's payload.
    pub(crate) fn snapshot(&self, load: Load) -> Value {
        let s = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let mut sorted: Vec<u64> = s.latencies_ms.iter().copied().collect();
        sorted.sort_unstable();
        json!({
            "uptime_ms": u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX),
            "calls": s.calls,
            "runs": s.ran,
            "succeeded": s.succeeded,
            "refusals_by_rule": s.refusals_by_rule,
            "errors_by_type": s.errors_by_type,
            "latency_ms": {
                "window": sorted.len(),
                "p50": percentile(&sorted, 50),
                "p90": percentile(&sorted, 90),
                "p99": percentile(&sorted, 99),
                "max": sorted.last(),
            },
            "active_runs": load.active_runs,
            "queue_depth": load.queue_depth,
            "connections": load.connections,
            "max_concurrent": load.max_concurrent,
            "queue_capacity": load.queue_capacity,
        })
    }
}

/// Nearest-rank percentile of sorted values; `None` when there are none.
fn percentile(sorted: &[u64], p: usize) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (p * sorted.len()).div_ceil(100).max(1);
    sorted.get(rank - 1).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&v, 50), Some(50));
        assert_eq!(percentile(&v, 99), Some(99));
        assert_eq!(percentile(&[7], 90), Some(7));
        assert_eq!(percentile(&[], 50), None);
    }

    #[test]
    fn the_latency_window_is_bounded() {
        let s = Stats::new();
        let r = ToolResult::refusal("c", crate::result::ErrorType::Busy, "x");
        for i in 0..(LATENCY_WINDOW + 5) {
            s.record(&r, Duration::from_millis(i as u64));
        }
        let load = Load {
            active_runs: 0,
            queue_depth: 0,
            connections: 0,
            max_concurrent: 1,
            queue_capacity: 1,
        };
        let v = s.snapshot(load);
        assert_eq!(v["latency_ms"]["window"], LATENCY_WINDOW);
        assert_eq!(v["calls"], (LATENCY_WINDOW + 5) as u64);
        assert_eq!(v["errors_by_type"]["BUSY"], (LATENCY_WINDOW + 5) as u64);
        assert_eq!(v["runs"], 0);
    }
}
