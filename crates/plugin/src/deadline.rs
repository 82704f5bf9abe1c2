//! Time budgets, one formula for all of them: what is left of a span of time after holding back a
//! [`Reserve`] — a share of the span (`1/divisor`), at least `min`, at most `max`.
//!
//! Every budget of the suite is one of these: the runtime's work deadline before the watchdog's,
//! the API client's per-request timeout, the name lookups' time, the probes' rounds, the time a
//! log-reading check keeps to answer ([`ANSWER_RESERVE`]). A leaf module: it names nothing else
//! of the crate.

use std::time::{Duration, Instant};

/// A part of a span of time kept back: `span / divisor`, clamped to `[min, max]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reserve {
    divisor: u32,
    min: Duration,
    max: Duration,
}

/// What a check that reads until a deadline of its own (a kernel log, a kubelet log) keeps back
/// to evaluate and answer before the runtime's: a fifth of what is left, 100 ms to 2 s.
pub const ANSWER_RESERVE: Reserve =
    Reserve::share(5, Duration::from_millis(100), Duration::from_secs(2));

impl Reserve {
    /// `1/divisor` of the span, at least `min`, at most `max` (`Duration::MAX`: no upper bound,
    /// `Duration::ZERO`: no lower one). Panics (at compile time in a `const`) when `divisor` is 0
    /// or `min > max`.
    pub const fn share(divisor: u32, min: Duration, max: Duration) -> Self {
        assert!(divisor > 0, "a reserve's divisor is at least 1");
        assert!(
            min.as_nanos() <= max.as_nanos(),
            "a reserve's min is at most its max"
        );
        Reserve { divisor, min, max }
    }

    /// The same amount whatever the span.
    pub const fn fixed(amount: Duration) -> Self {
        Reserve::share(1, amount, amount)
    }

    /// The reserve held back from `span`.
    pub fn of(self, span: Duration) -> Duration {
        (span / self.divisor).clamp(self.min, self.max)
    }

    /// What is left of `span` after the reserve (zero when the reserve is all of it).
    pub fn left(self, span: Duration) -> Duration {
        span.saturating_sub(self.of(span))
    }

    /// A timeout of one's own: `wanted`, but no more than what is left of `span` after the
    /// reserve, and never below `floor` (a probe needs some time even when little is left).
    pub fn cap(self, wanted: Duration, span: Duration, floor: Duration) -> Duration {
        wanted.min(self.left(span)).max(floor)
    }

    /// A deadline of one's own, earlier than the one `remaining` is left of: now plus what is
    /// left of `remaining` after the reserve.
    pub fn deadline(self, remaining: Duration) -> Instant {
        Instant::now() + self.left(remaining)
    }
}

/// The time left until `deadline` (zero once it passed).
pub fn remaining(deadline: Instant) -> Duration {
    deadline.saturating_duration_since(Instant::now())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_share_is_clamped_to_its_bounds() {
        let r = Reserve::share(10, ms(50), ms(500));
        assert_eq!(r.of(ms(100)), ms(50));
        assert_eq!(r.left(ms(100)), ms(50));
        assert_eq!(r.of(ms(2000)), ms(200));
        assert_eq!(r.left(ms(2000)), ms(1800));
        assert_eq!(r.of(ms(60_000)), ms(500));
        assert_eq!(r.left(ms(60_000)), ms(59_500));
        // Less than the minimum: nothing left, never an underflow.
        assert_eq!(r.left(ms(30)), Duration::ZERO);
        assert_eq!(r.left(Duration::ZERO), Duration::ZERO);
    }

    #[test]
    fn unbounded_and_fixed_reserves() {
        let at_least = Reserve::share(4, ms(500), Duration::MAX);
        assert_eq!(at_least.left(ms(8000)), ms(6000));
        assert_eq!(at_least.left(ms(1000)), ms(500));
        assert_eq!(at_least.left(ms(400)), Duration::ZERO);
        let at_most = Reserve::share(10, Duration::ZERO, ms(500));
        assert_eq!(at_most.left(ms(1000)), ms(900));
        assert_eq!(at_most.left(ms(10_000)), ms(9500));
        let fixed = Reserve::fixed(ms(300));
        assert_eq!(fixed.left(ms(10_000)), ms(9700));
        assert_eq!(fixed.left(ms(200)), Duration::ZERO);
    }

    #[test]
    fn a_capped_timeout_stays_between_the_floor_and_what_is_left() {
        let r = Reserve::fixed(ms(300));
        assert_eq!(r.cap(ms(3000), ms(10_000), ms(50)), ms(3000));
        assert_eq!(r.cap(ms(3000), ms(1000), ms(50)), ms(700));
        assert_eq!(r.cap(ms(3000), ms(200), ms(50)), ms(50));
    }

    #[test]
    fn the_answer_reserve_is_a_fifth_between_100ms_and_2s() {
        assert_eq!(ANSWER_RESERVE.left(ms(10_000)), ms(8000));
        assert_eq!(ANSWER_RESERVE.left(ms(300)), ms(200));
        assert_eq!(ANSWER_RESERVE.left(ms(60_000)), ms(58_000));
    }

    #[test]
    fn deadlines_and_what_is_left_of_them() {
        let before = Instant::now();
        let d = Reserve::fixed(ms(300)).deadline(ms(10_000));
        let after = Instant::now();
        assert!(d >= before + ms(9700) && d <= after + ms(9700));
        assert!(remaining(d) <= ms(9700) && remaining(d) > ms(9000));
        assert_eq!(remaining(before), Duration::ZERO);
    }

    #[test]
    #[should_panic(expected = "min is at most its max")]
    fn a_reserve_with_min_over_max_is_refused() {
        let _ = Reserve::share(2, ms(2), ms(1));
    }
}
