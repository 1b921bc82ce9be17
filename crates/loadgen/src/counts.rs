//! Small arithmetic on counts shared by the counters of `snapshot`, `recorder` and
//! `transport`: a leaf, so that those modules need not import each other for it.

/// `skip_serializing_if` for a count that is left out of the JSON when zero.
pub(crate) fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The sum of two counts, either of which may be unknown: unknown only if both are.
pub fn sum_some(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a + b),
        (a, b) => a.or(b),
    }
}

/// The smaller of two counts, either of which may be unknown: unknown only if both are.
pub(crate) fn min_some(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}
