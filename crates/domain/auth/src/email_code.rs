//! Email sign-in codes (API.md 14), while `auth.email_code_enabled`: an
//! email with a link and a 6-digit code, both valid 15 minutes and
//! single-use; the code dies with its 5th wrong try. Every failure answers
//! the same 400 INVALID_TOKEN, and asking always answers 204.

use audit::{Actor, AuditEvent};
use kernel::validate::Email;
use rand::RngCore;
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::email::EmailKind;
use crate::model::*;
use crate::secret;
use crate::{AccountService, AuthError, SignInService};

/// Longest code or link token looked at; longer ones are refused unread.
const INPUT_MAX: usize = 512;

/// A new 6-digit code.
pub(crate) fn new_email_code() -> String {
    format!("{:06}", rand::rng().next_u32() % 1_000_000)
}

/// What a code's token stores of it: SHA-256 of the token's hash followed
/// by the code (so a code is only good with its own token).
pub(crate) fn email_code_hash(token_hash: &[u8; 32], code: &str) -> [u8; 32] {
    let mut digest = Sha256::new();
    digest.update(token_hash);
    digest.update(code.as_bytes());
    digest.finalize().into()
}

/// How a person proves they received the email.
#[derive(Debug, Clone, Copy)]
pub enum EmailCodeProof<'a> {
    /// The token of the emailed link.
    Link(&'a str),
    /// The address and the code typed.
    Code {
        /// The account's email.
        email: &'a str,
        /// The six digits.
        code: &'a str,
    },
}

impl AccountService {
    /// Queues a sign-in code to an active account with API access, while
    /// `auth.email_code_enabled` is on (as of this request, whatever the
    /// address); does nothing otherwise. The account is looked up in the
    /// background, so that the answer takes the same time either way.
    pub async fn request_email_code(
        &self,
        email: String,
        ip: Option<String>,
    ) -> Result<(), AuthError> {
        if !self.settings.heeded().await?.email_code_enabled() {
            return Ok(());
        }
        let service = self.clone();
        tokio::spawn(async move {
            crate::account::after_the_answer().await;
            if let Err(error) = service.send_email_code(&email, ip).await {
                tracing::error!(?error, "queuing a sign-in code failed");
            }
        });
        Ok(())
    }

    async fn send_email_code(&self, email: &str, ip: Option<String>) -> Result<(), AuthError> {
        let Ok(email) = Email::parse(email, "email") else {
            return Ok(());
        };
        match self.store.user_by_email(email.as_str()).await? {
            Some(user) if user.active && user.api_access => {
                self.mail_user(
                    &user,
                    EmailKind::SignInCode,
                    "auth.email_code_requested",
                    ip,
                )
                .await
            }
            _ => Ok(()),
        }
    }
}

impl SignInService {
    /// Signs in with an emailed link or code: answers what a sign-in with
    /// the password would have (the email then counts as verified; an
    /// account with TOTP on gets MFA_REQUIRED), or 400 INVALID_TOKEN.
    pub async fn verify_email_code(
        &self,
        proof: EmailCodeProof<'_>,
        origin: Origin,
    ) -> Result<(String, User), AuthError> {
        let settings = self.settings.heeded().await?;
        if !settings.email_code_enabled() {
            return Err(AuthError::InvalidToken);
        }
        let lookup = match proof {
            EmailCodeProof::Link(token) if !token.is_empty() && token.len() <= INPUT_MAX => {
                EmailCodeLookup::Link {
                    hash: secret::hash_secret(token),
                }
            }
            EmailCodeProof::Code { email, code }
                if code.len() == 6 && code.bytes().all(|b| b.is_ascii_digit()) =>
            {
                let email = Email::parse(email, "email").map_err(|_| AuthError::InvalidToken)?;
                EmailCodeLookup::Code {
                    email: email.as_str().to_owned(),
                    code: code.to_owned(),
                }
            }
            _ => return Err(AuthError::InvalidToken),
        };
        // The session is made for whoever the code turns out to be for.
        let now = self.now();
        let (token, session) = self.new_session(
            uuid::Uuid::nil(),
            SignInMethod::EmailCode,
            &settings,
            &origin,
        );
        let event = AuditEvent::new(
            Actor::UNKNOWN_USER,
            "auth.login",
            target("session", session.id),
            origin.ip.clone(),
        )
        .with_details(json!({ "method": "email_code" }));
        let lockout = Lockout {
            threshold: i64::from(settings.lockout_threshold()),
            until: now + chrono::Duration::minutes(settings.lockout_minutes()),
        };
        match self
            .store
            .redeem_email_code(
                lookup,
                settings.mfa_required_for_admins(),
                session,
                now,
                lockout,
                event,
            )
            .await?
        {
            EmailCodeOutcome::Refused => Err(AuthError::InvalidToken),
            EmailCodeOutcome::Challenge(user_id) => {
                let challenge = self
                    .mfa_challenge(user_id, SignInMethod::EmailCode, None, &origin)
                    .await?;
                Err(AuthError::MfaRequired { challenge })
            }
            EmailCodeOutcome::Session(user_id) => {
                let user = self
                    .store
                    .user(user_id)
                    .await?
                    .ok_or(AuthError::InvalidToken)?;
                Ok((token, user))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_six_digits_bound_to_their_token() {
        for _ in 0..100 {
            let code = new_email_code();
            assert_eq!(code.len(), 6);
            assert!(code.bytes().all(|b| b.is_ascii_digit()));
        }
        let (a, b) = ([1u8; 32], [2u8; 32]);
        assert_ne!(email_code_hash(&a, "123456"), email_code_hash(&b, "123456"));
        assert_ne!(email_code_hash(&a, "123456"), email_code_hash(&a, "123457"));
    }
}
