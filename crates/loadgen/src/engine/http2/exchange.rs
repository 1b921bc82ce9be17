//! One stream's exchange: the response head, then its body to the end.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::Instant;

use h2::client::ResponseFuture;
use h2::RecvStream;

/// How a stream ended.
pub(super) enum StreamEnd {
    Done {
        status: u16,
        bytes: u64,
        first_byte: Instant,
        end: Instant,
    },
    Failed(h2::Error),
}

/// One stream's exchange, its request sent: awaits the response head, then reads the body
/// to the end, giving flow-control credit back as it goes. Written out as a state machine
/// (not an `async fn`) so that it is `Unpin` and needs no box of its own.
pub(super) struct Exchange {
    pub(super) key: u64,
    pub(super) state: Exchanging,
}

pub(super) enum Exchanging {
    Head(ResponseFuture),
    Body {
        body: RecvStream,
        status: u16,
        bytes: u64,
        first_byte: Instant,
    },
    Ended,
}

impl Future for Exchange {
    type Output = (u64, StreamEnd);

    fn poll(self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        loop {
            match &mut this.state {
                Exchanging::Head(response) => match Pin::new(response).poll(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(Err(e)) => {
                        this.state = Exchanging::Ended;
                        return Poll::Ready((this.key, StreamEnd::Failed(e)));
                    }
                    Poll::Ready(Ok(head)) => {
                        let status = head.status().as_u16();
                        this.state = Exchanging::Body {
                            body: head.into_body(),
                            status,
                            bytes: 0,
                            first_byte: Instant::now(),
                        };
                    }
                },
                Exchanging::Body {
                    body,
                    status,
                    bytes,
                    first_byte,
                } => match body.poll_data(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(Some(Ok(data))) => {
                        *bytes += data.len() as u64;
                        let _ = body.flow_control().release_capacity(data.len());
                    }
                    Poll::Ready(Some(Err(e))) => {
                        this.state = Exchanging::Ended;
                        return Poll::Ready((this.key, StreamEnd::Failed(e)));
                    }
                    Poll::Ready(None) => {
                        let end = StreamEnd::Done {
                            status: *status,
                            bytes: *bytes,
                            first_byte: *first_byte,
                            end: Instant::now(),
                        };
                        this.state = Exchanging::Ended;
                        return Poll::Ready((this.key, end));
                    }
                },
                Exchanging::Ended => return Poll::Pending,
            }
        }
    }
}
