//! Secrets: random bearer strings stored as SHA-256 (password hashes are
//! the [`crate::HashPool`]'s).

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rand::RngCore;
use sha2::{Digest, Sha256};

/// Prefix of every personal access token.
pub const TOKEN_PREFIX: &str = "svc_";
/// Characters of a token kept in clear to recognise it in lists.
const DISPLAY_PREFIX_LEN: usize = 12;

fn random_string() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    URL_SAFE_NO_PAD.encode(bytes)
}

/// A new opaque session token (32 random bytes, base64url). It never starts
/// with the token prefix, so the resolver always looks in the right table.
pub fn new_session_token() -> String {
    loop {
        let token = random_string();
        if !is_api_token(&token) {
            return token;
        }
    }
}

/// A new personal access token and the part of it shown in lists.
pub fn new_api_token() -> (String, String) {
    let token = format!("{TOKEN_PREFIX}{}", random_string());
    let prefix = token[..DISPLAY_PREFIX_LEN].to_owned();
    (token, prefix)
}

/// Whether a bearer string is a personal access token (else a session token).
pub fn is_api_token(bearer: &str) -> bool {
    bearer.starts_with(TOKEN_PREFIX)
}

/// The stored form of a bearer secret. Lookups go by this hash, so the secret
/// itself is never compared or kept.
pub fn hash_secret(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_random_and_prefixed() {
        let (a, prefix) = new_api_token();
        let (b, _) = new_api_token();
        assert_ne!(a, b);
        assert!(is_api_token(&a));
        assert!(a.starts_with(&prefix));
        assert!(a.len() >= 4 + 43);
        assert!(!is_api_token(&new_session_token()));
        assert_ne!(hash_secret(&a), hash_secret(&b));
    }
}
