//! What each op of the engine is for: a typed token, carried in the op's user data.
//!
//! The engine keeps no table of ops: a completion names its connection and socket by its
//! user data alone, so the token is encoded into it (one shift and mask each way, no lookup
//! in the hot path) and decoded back into this enum before anything reads it.

/// What an op does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(super) enum Op {
    /// A connect (a linked timeout beside it).
    Connect = 1,
    /// A connect's linked timeout: its completion needs nothing done.
    ConnectTimeout = 2,
    /// The multishot recv of a connection.
    Recv = 3,
    /// A send of claimed requests.
    Send = 4,
}

impl Op {
    fn from_u8(op: u8) -> Option<Op> {
        Some(match op {
            1 => Op::Connect,
            2 => Op::ConnectTimeout,
            3 => Op::Recv,
            4 => Op::Send,
            _ => return None,
        })
    }
}

/// Whose op it is: a connection of the load, or a held one (`--idle-conns`, `--slow-conns`),
/// by its index in the worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Conn {
    Load(usize),
    Held(usize),
}

/// An op's token: what it does, for which connection, on which of its sockets (the
/// connection's socket number, of which the low 24 bits are kept: enough to tell a late
/// completion of an earlier socket from the current one's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Token {
    pub op: Op,
    pub gen: u32,
    pub conn: Conn,
}

/// The socket numbers a token tells apart.
pub(super) const GEN_MASK: u32 = 0x00ff_ffff;
/// Marks a held connection's index.
const HELD_BIT: u64 = 1 << 31;
/// Indexes of connections: below the held bit.
const INDEX_MASK: u64 = HELD_BIT - 1;

impl Token {
    pub(super) fn new(op: Op, gen: u32, conn: Conn) -> Token {
        Token { op, gen, conn }
    }

    /// Whether `gen` (a connection's socket number) is this token's.
    pub(super) fn is_of(&self, gen: u32) -> bool {
        self.gen == gen & GEN_MASK
    }
}

impl tailscope_uring::OpToken for Token {
    /// `op` in the top byte, the socket number's low 24 bits, the held bit, the index.
    fn encode(self) -> u64 {
        let (held, index) = match self.conn {
            Conn::Load(i) => (0, i as u64),
            Conn::Held(i) => (HELD_BIT, i as u64),
        };
        debug_assert!(index <= INDEX_MASK, "connection index {index}");
        (self.op as u64) << 56 | u64::from(self.gen & GEN_MASK) << 32 | held | (index & INDEX_MASK)
    }

    fn decode(user_data: u64) -> Option<Token> {
        let op = Op::from_u8((user_data >> 56) as u8)?;
        let gen = ((user_data >> 32) as u32) & GEN_MASK;
        let index = (user_data & INDEX_MASK) as usize;
        let conn = if user_data & HELD_BIT != 0 {
            Conn::Held(index)
        } else {
            Conn::Load(index)
        };
        Some(Token { op, gen, conn })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tailscope_uring::OpToken;

    #[test]
    fn a_token_comes_back_from_its_user_data() {
        for op in [Op::Connect, Op::ConnectTimeout, Op::Recv, Op::Send] {
            for conn in [
                Conn::Load(0),
                Conn::Load(19_999),
                Conn::Held(0),
                Conn::Held(7),
            ] {
                for gen in [0, 1, GEN_MASK] {
                    let token = Token::new(op, gen, conn);
                    assert_eq!(Token::decode(token.encode()), Some(token));
                }
            }
        }
        // A socket number past 24 bits is kept modulo them, and still recognised.
        let token = Token::new(Op::Recv, GEN_MASK + 5, Conn::Load(3));
        let back = Token::decode(token.encode()).unwrap();
        assert!(back.is_of(GEN_MASK + 5));
        assert!(!back.is_of(5 + 1));
    }

    #[test]
    fn user_data_of_no_token_is_none() {
        assert_eq!(Token::decode(0), None);
        assert_eq!(Token::decode(0xfe << 56), None);
    }
}
