//! Racing two futures: [`select`] and [`Either`].

use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::task::Poll;

/// Which of two futures finished first, with its output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Either<A, B> {
    /// The first future finished first.
    Left(A),
    /// The second one did.
    Right(B),
}

/// Poll `a`, then `b`, until one is ready; the first is preferred when both
/// are. Neither is dropped: the caller still owns both (pinned), so a read
/// raced against a shutdown signal loses nothing and can be awaited again.
/// For more than two futures, or a `select!` macro, the `futures` crate's
/// work on ringkit too.
///
/// ```
/// use std::pin::pin;
/// use std::time::Duration;
/// use ringkit::sync::{select, Either};
/// ringkit::run(async {
///     let mut slow = pin!(ringkit::time::sleep(Duration::from_secs(60)));
///     let mut quick = pin!(async { 42 });
///     match select(slow.as_mut(), quick.as_mut()).await {
///         Either::Left(()) => unreachable!(),
///         Either::Right(n) => assert_eq!(n, 42),
///     }
/// })?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub async fn select<A: Future + ?Sized, B: Future + ?Sized>(
    mut a: Pin<&mut A>,
    mut b: Pin<&mut B>,
) -> Either<A::Output, B::Output> {
    poll_fn(|cx| {
        if let Poll::Ready(v) = a.as_mut().poll(cx) {
            return Poll::Ready(Either::Left(v));
        }
        if let Poll::Ready(v) = b.as_mut().poll(cx) {
            return Poll::Ready(Either::Right(v));
        }
        Poll::Pending
    })
    .await
}
