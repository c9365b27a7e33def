//! Read-your-writes over read replicas: the token a write answers with and
//! a later read may send back.
//!
//! While replicas serve reads, a Data API write notes its transaction for
//! the user (server side, so any instance honours it) and answers a token
//! naming it. A read that sends a token back goes to a replica only once
//! that transaction is visible there, whoever the reader is: a client hands
//! the token on to a read under another user's credential, or keeps it
//! across credentials. The HTTP layer opens a [`scope`] per request; the
//! store reads the token sent ([`sent`]) and notes the one to answer
//! ([`note`]). Outside a scope both do nothing.

use std::cell::RefCell;
use std::fmt;
use std::future::Future;

/// The request header a read sends a token back in, and the response
/// header a write answers one in.
pub const HEADER: &str = "Tessera-Consistency-Token";

/// A write's transaction: its id and where the primary's WAL stood while it
/// ran (a little before its commit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Token {
    /// Byte position in the primary's WAL (`pg_lsn` as a number).
    pub lsn: u64,
    /// The writing transaction's id (`xid8`).
    pub xid: u64,
}

impl Token {
    /// A token as [`Token`]'s `Display` writes it; `None` for anything else.
    pub fn parse(text: &str) -> Option<Self> {
        let (lsn, xid) = text.trim().split_once('.')?;
        Some(Self {
            lsn: u64::from_str_radix(lsn, 16).ok()?,
            xid: u64::from_str_radix(xid, 16).ok()?,
        })
    }
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:x}.{:x}", self.lsn, self.xid)
    }
}

#[derive(Debug, Default)]
struct Tokens {
    sent: Option<Token>,
    answered: Option<Token>,
}

tokio::task_local! {
    static TOKENS: RefCell<Tokens>;
}

/// Runs `request` with `sent` (the header's value, if any) as the token its
/// reads wait for; answers its output and the token of its last write.
/// A header that is not a token is ignored (the read then goes by the
/// user's own writes alone).
pub async fn scope<F: Future>(sent: Option<&str>, request: F) -> (F::Output, Option<Token>) {
    let tokens = RefCell::new(Tokens {
        sent: sent.and_then(Token::parse),
        answered: None,
    });
    TOKENS
        .scope(tokens, async {
            let output = request.await;
            let answered = TOKENS.with(|t| t.borrow().answered);
            (output, answered)
        })
        .await
}

/// The token the request sent back, if any.
pub fn sent() -> Option<Token> {
    TOKENS.try_with(|t| t.borrow().sent).ok().flatten()
}

/// Notes `token` as the one the request answers with (the latest write's).
pub fn note(token: Token) {
    let _ = TOKENS.try_with(|t| t.borrow_mut().answered = Some(token));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_reads_back_as_written() {
        let token = Token {
            lsn: 0x0301_6038,
            xid: 725,
        };
        assert_eq!(Token::parse(&token.to_string()), Some(token));
        for bad in ["", "1", "1.", ".1", "x.1", "1.1.1", "-1.2", "1 .2"] {
            assert_eq!(Token::parse(bad), None, "{bad:?}");
        }
    }

    #[tokio::test]
    async fn a_scope_carries_the_token_sent_and_answers_the_one_noted() {
        let (sent, answered) = scope(Some("a.b"), async {
            let sent = super::sent();
            note(Token { lsn: 1, xid: 2 });
            sent
        })
        .await;
        assert_eq!(sent, Some(Token { lsn: 10, xid: 11 }));
        assert_eq!(answered, Some(Token { lsn: 1, xid: 2 }));
        assert_eq!(super::sent(), None);
        note(Token { lsn: 3, xid: 4 });
    }
}
