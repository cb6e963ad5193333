//! The host's stop (ABI 2.6 `stop()`), as a signal a sink's waits can end on. The host calls
//! `stop()` from another thread while a write may run (a shutdown, the definition removed); a sink
//! waiting out a back-off before a retry of its own waits with [`Stop::wait`], which returns at
//! once when the stop comes, and the write completes as a retry (nothing of it is committed).
//!
//! ```ignore
//! let stop = host.stop_signal();
//! while let Err(e) = try_once() {
//!     if stop.wait(backoff) { return Err(Error::retry(format!("stopping: {e}"))); }
//! }
//! ```
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

#[derive(Debug, Default)]
pub(crate) struct StopState {
    stopped: Mutex<bool>,
    changed: Condvar,
}

impl StopState {
    pub(crate) fn trigger(&self) {
        *self.stopped.lock().unwrap_or_else(|p| p.into_inner()) = true;
        self.changed.notify_all();
    }
}

/// A handle on one instance's stop; clones share it. A Stop made outside an open instance
/// (validate, a test) is never triggered by the host.
#[derive(Debug, Clone, Default)]
pub struct Stop(pub(crate) Arc<StopState>);

impl Stop {
    /// A signal of its own (for tests and tools); [`Stop::trigger`] sets it.
    pub fn new() -> Self {
        Self::default()
    }
    /// Whether the host is stopping the instance.
    pub fn is_stopped(&self) -> bool {
        *self.0.stopped.lock().unwrap_or_else(|p| p.into_inner())
    }
    /// Waits `timeout`, or less when the stop comes: true when stopped (now or before).
    pub fn wait(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut stopped = self.0.stopped.lock().unwrap_or_else(|p| p.into_inner());
        while !*stopped {
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            stopped = self
                .0
                .changed
                .wait_timeout(stopped, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        true
    }
    /// Sets the signal (what the host's `stop()` does).
    pub fn trigger(&self) {
        self.0.trigger();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_ends_when_the_stop_comes_and_a_later_wait_returns_at_once() {
        let stop = Stop::new();
        assert!(!stop.wait(Duration::from_millis(20)), "not stopped: the wait runs out");
        let other = stop.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            other.trigger();
        });
        let start = Instant::now();
        assert!(stop.wait(Duration::from_secs(30)));
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "ended by the stop, not the timeout"
        );
        t.join().unwrap();
        let start = Instant::now();
        assert!(stop.wait(Duration::from_secs(30)) && stop.is_stopped());
        assert!(start.elapsed() < Duration::from_millis(100));
    }
}
