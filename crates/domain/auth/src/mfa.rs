//! Second factors (API.md 14): TOTP (RFC 6238: HMAC-SHA-1, 6 digits, 30 s
//! steps, one step of drift either way) with recovery codes, and the
//! sign-in challenge a right password (or a provider) leads to when the
//! account has one.

use audit::{Actor, AuditEvent};
use chrono::{DateTime, Duration, Utc};
use hmac::{Hmac, KeyInit, Mac};
use kernel::new_id;
use permissions::Principal;
use rand::RngCore;
use serde_json::json;
use sha1::Sha1;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use uuid::Uuid;

use crate::model::*;
use crate::secret;
use crate::{AuthError, SignInService};

/// Seconds of one TOTP step.
const STEP_SECONDS: i64 = 30;
/// Bytes of a TOTP secret (160 bits, as RFC 4226 recommends).
const SECRET_BYTES: usize = 20;
/// Recovery codes given at enrollment.
const RECOVERY_CODES: usize = 10;
/// Characters of a recovery code (50 bits), shown in two groups of five.
const RECOVERY_LEN: usize = 10;
/// Lifetime of a sign-in challenge.
const CHALLENGE_MINUTES: i64 = 5;
/// RFC 4648 base32 alphabet (secrets in `otpauth://` URLs, recovery codes).
const BASE32: &[u8; 32] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
/// Issuer shown by authenticator apps.
const ISSUER: &str = "Tessera";

/// The TOTP code of `secret` at time step `step` (RFC 6238 over HMAC-SHA-1,
/// 6 digits).
pub fn totp_code(secret: &[u8], step: i64) -> u32 {
    let Ok(mut mac) = Hmac::<Sha1>::new_from_slice(secret) else {
        unreachable!("HMAC takes a key of any length")
    };
    mac.update(&step.to_be_bytes());
    let digest = mac.finalize().into_bytes();
    let offset = usize::from(digest[digest.len() - 1] & 0x0f);
    let word = u32::from_be_bytes([
        digest[offset],
        digest[offset + 1],
        digest[offset + 2],
        digest[offset + 3],
    ]);
    (word & 0x7fff_ffff) % 1_000_000
}

/// The TOTP step of `at`.
pub fn totp_step(at: DateTime<Utc>) -> i64 {
    at.timestamp().div_euclid(STEP_SECONDS)
}

/// The step (of `now`'s, or one either side) after `after` whose code is
/// `code`: every step of the window is compared, in constant time.
fn matching_step(secret: &[u8], code: u32, now: DateTime<Utc>, after: Option<i64>) -> Option<i64> {
    let current = totp_step(now);
    let mut found = None;
    for step in current - 1..=current + 1 {
        let same: bool = totp_code(secret, step).ct_eq(&code).into();
        if same && after.is_none_or(|last| step > last) && found.is_none() {
            found = Some(step);
        }
    }
    found
}

/// `bytes` in RFC 4648 base32, without padding.
fn base32(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(5) * 8);
    let (mut buffer, mut bits) = (0u32, 0u32);
    for &byte in bytes {
        buffer = (buffer << 8) | u32::from(byte);
        bits += 8;
        while bits >= 5 {
            bits -= 5;
            out.push(char::from(BASE32[((buffer >> bits) & 31) as usize]));
        }
    }
    if bits > 0 {
        out.push(char::from(BASE32[((buffer << (5 - bits)) & 31) as usize]));
    }
    out
}

/// A code as typed: six digits are a TOTP code; anything else is read as a
/// recovery code (case, spaces and dashes ignored).
enum Typed {
    Totp(u32),
    /// Normalised: upper case, without spaces and dashes.
    Recovery(String),
}

impl Typed {
    fn of(code: &str) -> Option<Self> {
        let code = code.trim();
        if code.len() == 6 && code.bytes().all(|b| b.is_ascii_digit()) {
            return code.parse().ok().map(Typed::Totp);
        }
        let plain: String = code
            .chars()
            .filter(|c| !matches!(c, '-' | ' '))
            .map(|c| c.to_ascii_uppercase())
            .collect();
        (plain.len() == RECOVERY_LEN && plain.bytes().all(|b| BASE32.contains(&b)))
            .then_some(Typed::Recovery(plain))
    }

    /// The proof this code gives for `user_id`'s TOTP `secret` whose last
    /// accepted step is `last_step`, if any.
    fn proof(
        self,
        user_id: Uuid,
        secret: &[u8],
        last_step: Option<i64>,
        now: DateTime<Utc>,
    ) -> Option<MfaProof> {
        match self {
            Typed::Totp(code) => {
                matching_step(secret, code, now, last_step).map(|step| MfaProof::Totp { step })
            }
            Typed::Recovery(plain) => Some(MfaProof::Recovery {
                hash: recovery_hash(user_id, &plain),
            }),
        }
    }
}

/// What is stored of a recovery code: SHA-256 of its user's id and the
/// code, so that one code's hash says nothing of another account's.
fn recovery_hash(user_id: Uuid, plain: &str) -> [u8; 32] {
    let mut digest = Sha256::new();
    digest.update(user_id.as_bytes());
    digest.update(plain.as_bytes());
    digest.finalize().into()
}

/// New recovery codes of `user_id` as shown (`xxxxx-xxxxx`) and as stored.
fn recovery_codes(user_id: Uuid) -> (Vec<String>, Vec<[u8; 32]>) {
    let mut rng = rand::rng();
    (0..RECOVERY_CODES)
        .map(|_| {
            let plain: String = (0..RECOVERY_LEN)
                .map(|_| char::from(BASE32[(rng.next_u32() % 32) as usize]))
                .collect();
            let hash = recovery_hash(user_id, &plain);
            let shown = format!("{}-{}", &plain[..5], &plain[5..]).to_ascii_lowercase();
            (shown, hash)
        })
        .unzip()
}

/// A TOTP enrollment waiting for its first code.
#[derive(Debug, Clone)]
pub struct TotpEnrollment {
    /// The secret, base32.
    pub secret: String,
    /// The `otpauth://` URL authenticator apps read (as a QR code).
    pub otpauth_url: String,
}

impl FactorGate {
    /// Why API.md 17 refuses a change of factors (`adding` one or not) to
    /// a caller with this gate: adding one while the email is unverified
    /// (403 EMAIL_NOT_VERIFIED), and any change, once the account has a
    /// factor, from a credential that proved none (403 MFA_REQUIRED).
    pub fn refusal(&self, adding: bool) -> Option<AuthError> {
        if adding && !self.email_verified {
            Some(AuthError::EmailNotVerified)
        } else if self.has_factor && !self.session_factor {
            Some(AuthError::FactorProofRequired)
        } else {
            None
        }
    }
}

impl SignInService {
    /// Refuses a change of the caller's factors that API.md 17 forbids:
    /// adding one while the email is unverified (403 EMAIL_NOT_VERIFIED),
    /// and any change, once the account has a factor, from a credential
    /// that proved none (403 MFA_REQUIRED). Read at this request.
    pub(crate) async fn check_factor_change(
        &self,
        caller: &Principal,
        adding: bool,
    ) -> Result<(), AuthError> {
        let gate = self
            .store
            .factor_gate(caller.user_id, caller.session_id())
            .await?;
        gate.refusal(adding).map_or(Ok(()), Err)
    }

    /// Starts a TOTP enrollment of the caller: a new pending secret,
    /// replacing an older pending one. Refused while TOTP is on.
    pub async fn start_totp(
        &self,
        caller: &Principal,
        origin: &Origin,
    ) -> Result<TotpEnrollment, AuthError> {
        self.take_account_call(origin).await?;
        self.check_factor_change(caller, true).await?;
        let ip = origin.ip.clone();
        let user = self
            .store
            .user(caller.user_id)
            .await?
            .ok_or(AuthError::AuthenticationRequired)?;
        let mut secret = vec![0u8; SECRET_BYTES];
        rand::rng().fill_bytes(&mut secret);
        let event = AuditEvent::new(
            caller.actor(),
            "mfa.totp_start",
            target("user", caller.user_id),
            ip,
        );
        if !self
            .store
            .set_pending_totp(caller.user_id, secret.clone(), event)
            .await?
        {
            return Err(kernel::StoreError::Conflict {
                field: None,
                message: "TOTP is already on; turn it off before enrolling again".into(),
            }
            .into());
        }
        let secret = base32(&secret);
        let label = format!("{ISSUER}:{}", user.email);
        let otpauth_url = format!(
            "otpauth://totp/{}?secret={secret}&issuer={ISSUER}&algorithm=SHA1&digits=6&period={STEP_SECONDS}",
            percent_encode(&label)
        );
        Ok(TotpEnrollment {
            secret,
            otpauth_url,
        })
    }

    /// Turns TOTP on with the pending secret, when `code` is its code;
    /// answers the recovery codes, shown this once. The caller's session
    /// counts from then on as made with TOTP.
    pub async fn confirm_totp(
        &self,
        caller: &Principal,
        code: &str,
        origin: &Origin,
    ) -> Result<Vec<String>, AuthError> {
        self.take_account_call(origin).await?;
        self.check_factor_change(caller, true).await?;
        let now = self.now();
        let record = self.store.totp(caller.user_id).await?;
        let step = record
            .and_then(|r| r.pending_secret.map(|s| (s, Typed::of(code))))
            .and_then(|(secret, typed)| match typed {
                Some(Typed::Totp(code)) => {
                    matching_step(&secret, code, now, None).map(|step| (secret, step))
                }
                _ => None,
            });
        let Some((secret, step)) = step else {
            return Err(AuthError::InvalidMfaCode);
        };
        let (shown, hashes) = recovery_codes(caller.user_id);
        let event = AuditEvent::new(
            caller.actor(),
            "mfa.totp_enable",
            target("user", caller.user_id),
            origin.ip.clone(),
        );
        match self
            .store
            .enable_totp(
                caller.user_id,
                caller.session_id(),
                &secret,
                step,
                hashes,
                now,
                event,
            )
            .await?
        {
            TotpEnabled::Enabled => Ok(shown),
            TotpEnabled::PendingChanged => Err(AuthError::InvalidMfaCode),
            TotpEnabled::SessionEnded => Err(AuthError::SessionExpired),
            TotpEnabled::Refused(gate) => {
                Err(gate.refusal(true).unwrap_or(AuthError::InvalidMfaCode))
            }
        }
    }

    /// Turns the caller's TOTP off, given one of its codes or an unused
    /// recovery code; its recovery codes go with it.
    pub async fn disable_totp(
        &self,
        caller: &Principal,
        code: &str,
        origin: &Origin,
    ) -> Result<(), AuthError> {
        self.take_account_call(origin).await?;
        self.check_factor_change(caller, false).await?;
        let settings = self.settings.heeded().await?;
        let now = self.now();
        let user_id = caller.user_id;
        // Counted before the code is looked at, as a sign-in is: a stolen
        // session guesses no more codes than a sign-in would.
        let Some(attempt) = self.store.take_code_attempt(user_id, now).await? else {
            return Err(AuthError::InvalidMfaCode);
        };
        let proof = self.store.totp(user_id).await?.and_then(|record| {
            let secret = record.secret?;
            Typed::of(code)?.proof(user_id, &secret, record.last_step, now)
        });
        if let Some(proof) = proof {
            let event = AuditEvent::new(
                caller.actor(),
                "mfa.totp_disable",
                target("user", user_id),
                origin.ip.clone(),
            );
            if self.store.disable_totp(user_id, proof, now, event).await? {
                return Ok(());
            }
        }
        let event = AuditEvent::new(
            caller.actor(),
            "mfa.code_refused",
            target("user", user_id),
            origin.ip.clone(),
        );
        self.store
            .refuse_mfa_code(user_id, failure(attempt, &settings, now), now, event)
            .await?;
        Err(AuthError::InvalidMfaCode)
    }

    /// Removes every second factor of `user_id` (an administrator's reset)
    /// and ends that person's sessions, from a credential that proved the
    /// caller's own factor when the caller has one.
    pub async fn reset_mfa(
        &self,
        caller: &Principal,
        user_id: Uuid,
        ip: Option<String>,
    ) -> Result<(), AuthError> {
        self.check_factor_change(caller, false).await?;
        let event = AuditEvent::new(caller.actor(), "mfa.reset", target("user", user_id), ip);
        if self.store.reset_mfa(user_id, event).await? {
            Ok(())
        } else {
            Err(kernel::StoreError::NotFound.into())
        }
    }

    /// A new sign-in challenge for an account with a second factor whose
    /// first step (`method`) passed, to be finished by
    /// [`SignInService::verify_mfa`]: answers its secret. `checked_hash` is
    /// the password verified (none: a provider or an email code).
    pub async fn mfa_challenge(
        &self,
        user_id: Uuid,
        method: SignInMethod,
        checked_hash: Option<String>,
        origin: &Origin,
    ) -> Result<String, AuthError> {
        let challenge = secret::new_session_token();
        let now = self.now();
        let new = NewMfaChallenge {
            id: new_id(),
            token_hash: secret::hash_secret(&challenge),
            user_id,
            checked_hash,
            method,
            created_at: now,
            expires_at: now + Duration::minutes(CHALLENGE_MINUTES),
        };
        let event = AuditEvent::new(
            Actor::user(user_id),
            "auth.mfa_challenge",
            target("user", user_id),
            origin.ip.clone(),
        );
        self.store.create_mfa_challenge(new, event).await?;
        Ok(challenge)
    }

    /// Finishes a sign-in challenge with a TOTP or recovery code: answers
    /// what the sign-in would have. A wrong code counts toward the
    /// challenge's death and the account's lockout.
    pub async fn verify_mfa(
        &self,
        challenge: &str,
        code: &str,
        origin: Origin,
    ) -> Result<(String, User), AuthError> {
        let now = self.now();
        let (hash, record) = self.take_challenge_attempt(challenge).await?;
        let proof = match (&record.secret, record.locked) {
            (Some(secret), false) => {
                Typed::of(code).and_then(|t| t.proof(record.user_id, secret, record.last_step, now))
            }
            _ => None,
        };
        self.settle_challenge(&hash, &record, proof, origin).await
    }

    /// Counts an attempt at the live challenge `challenge` (API.md 14):
    /// answers its hash and record, or 400 INVALID_TOKEN.
    pub(crate) async fn take_challenge_attempt(
        &self,
        challenge: &str,
    ) -> Result<([u8; 32], MfaChallengeRecord), AuthError> {
        let hash = secret::hash_secret(challenge);
        let record = self
            .store
            .take_mfa_attempt(&hash, self.now())
            .await?
            .ok_or(AuthError::InvalidToken)?;
        Ok((hash, record))
    }

    /// Settles a challenge whose attempt was counted: with a proof, the
    /// session made by the challenge's first step and that factor; without
    /// one (or with one used meanwhile), a wrong code counted toward the
    /// lockout, 401 INVALID_MFA_CODE.
    pub(crate) async fn settle_challenge(
        &self,
        hash: &[u8; 32],
        record: &MfaChallengeRecord,
        proof: Option<MfaProof>,
        origin: Origin,
    ) -> Result<(String, User), AuthError> {
        let settings = self.settings.heeded().await?;
        let now = self.now();
        let user_id = record.user_id;
        let refused = match proof {
            Some(proof) => {
                let (token, mut session) =
                    self.new_session(user_id, record.method, &settings, &origin);
                session.factor = Some(proof.factor());
                let event = AuditEvent::new(
                    Actor::user(user_id),
                    "auth.login",
                    target("session", session.id),
                    origin.ip.clone(),
                )
                .with_details(json!({
                    "method": record.method.as_str(),
                    "mfa": proof.factor().as_str(),
                }));
                let settle = MfaSettle::Proof { proof, session };
                match self
                    .store
                    .settle_mfa(hash, user_id, settle, now, event)
                    .await?
                {
                    MfaFinish::Done(user) => return Ok((token, user)),
                    MfaFinish::Gone => return Err(AuthError::InvalidToken),
                    MfaFinish::Refused => "mfa_code_used",
                }
            }
            None if record.locked => "locked",
            None => "wrong_mfa_code",
        };
        let effect = if record.locked {
            MfaFailure::Keep
        } else {
            failure(record.attempt, &settings, now)
        };
        let failed = AuditEvent::new(
            Actor::user(user_id),
            "auth.login_failed",
            target("user", user_id),
            origin.ip.clone(),
        )
        .with_details(json!({ "reason": refused }));
        self.store
            .settle_mfa(hash, user_id, MfaSettle::Wrong(effect), now, failed)
            .await?;
        Err(AuthError::MfaCodeRefused)
    }
}

/// What a wrong code that was the account's `attempt`th in a row does:
/// the one reaching `auth.lockout_threshold` locks it.
fn failure(attempt: i64, settings: &kernel::settings::Settings, now: DateTime<Utc>) -> MfaFailure {
    if attempt >= i64::from(settings.lockout_threshold()) {
        MfaFailure::Lock {
            until: now + Duration::minutes(settings.lockout_minutes()),
        }
    } else {
        MfaFailure::Keep
    }
}

/// `text` percent-encoded for a URL path (unreserved characters kept).
fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~' | b':' | b'@') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_follow_rfc_6238() {
        // RFC 6238 appendix B, SHA-1, the last six of the eight digits.
        let secret = b"12345678901234567890";
        for (time, code) in [
            (59, 287_082),
            (1_111_111_109, 81_804),
            (1_234_567_890, 5_924),
            (2_000_000_000, 279_037),
        ] {
            let at = DateTime::from_timestamp(time, 0).unwrap();
            assert_eq!(totp_code(secret, totp_step(at)), code, "at {time}");
        }
    }

    #[test]
    fn a_code_matches_its_step_and_a_neighbour_once() {
        let secret = b"12345678901234567890";
        let now = DateTime::from_timestamp(1_111_111_109, 0).unwrap();
        let step = totp_step(now);
        let before = totp_code(secret, step - 1);
        assert_eq!(matching_step(secret, before, now, None), Some(step - 1));
        assert_eq!(matching_step(secret, before, now, Some(step - 1)), None);
        let far = totp_code(secret, step - 2);
        assert_eq!(matching_step(secret, far, now, None), None);
    }

    #[test]
    fn base32_is_rfc_4648() {
        assert_eq!(base32(b""), "");
        assert_eq!(base32(b"f"), "MY");
        assert_eq!(base32(b"foobar"), "MZXW6YTBOI");
        assert_eq!(base32(&[0u8; SECRET_BYTES]).len(), 32);
    }

    #[test]
    fn recovery_codes_are_read_whatever_their_case_and_dashes() {
        let (shown, hashes) = recovery_codes(Uuid::nil());
        assert_eq!(shown.len(), RECOVERY_CODES);
        for (code, hash) in shown.iter().zip(&hashes) {
            assert_eq!(code.len(), RECOVERY_LEN + 1);
            match Typed::of(&code.to_uppercase().replace('-', " - ")) {
                Some(Typed::Recovery(read)) => assert_eq!(&recovery_hash(Uuid::nil(), &read), hash),
                _ => panic!("{code} is not read as a recovery code"),
            }
        }
        assert!(matches!(Typed::of(" 012345 "), Some(Typed::Totp(12_345))));
        assert!(Typed::of("01234").is_none());
        assert!(Typed::of("abcde-fghi1").is_none());
    }
}
