//! Emails the auth domain sends, rendered from the templates in `templates/`.

use uuid::Uuid;

/// What an email is for; also the kind of its one-time token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmailKind {
    /// A password-reset link (valid 1 hour).
    PasswordReset,
    /// An email-verification link (valid 48 hours).
    EmailVerification,
    /// An invitation link (valid 7 days).
    Invitation,
}

impl EmailKind {
    /// The stored name of the kind (`reset`, `verify`, `invite`).
    pub const fn as_str(self) -> &'static str {
        match self {
            EmailKind::PasswordReset => "reset",
            EmailKind::EmailVerification => "verify",
            EmailKind::Invitation => "invite",
        }
    }

    /// How long the link stays valid.
    pub fn lifetime(self) -> chrono::Duration {
        match self {
            EmailKind::PasswordReset => chrono::Duration::hours(1),
            EmailKind::EmailVerification => chrono::Duration::hours(48),
            EmailKind::Invitation => chrono::Duration::days(7),
        }
    }

    /// The page under the links base that takes the token.
    const fn page(self) -> &'static str {
        match self {
            EmailKind::PasswordReset => "reset-password",
            EmailKind::EmailVerification => "verify-email",
            EmailKind::Invitation => "accept-invitation",
        }
    }

    fn templates(self) -> (&'static str, &'static str, &'static str) {
        match self {
            EmailKind::PasswordReset => (
                "Reset your password",
                include_str!("../templates/reset.txt"),
                include_str!("../templates/reset.html"),
            ),
            EmailKind::EmailVerification => (
                "Confirm your email address",
                include_str!("../templates/verify.txt"),
                include_str!("../templates/verify.html"),
            ),
            EmailKind::Invitation => (
                "You are invited",
                include_str!("../templates/invite.txt"),
                include_str!("../templates/invite.html"),
            ),
        }
    }
}

/// An email to put in the outbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewEmail {
    /// Outbox id.
    pub id: Uuid,
    /// Recipient address.
    pub to: String,
    /// `reset`, `verify` or `invite`.
    pub kind: &'static str,
    /// Subject line.
    pub subject: String,
    /// Plain-text body.
    pub body_text: String,
    /// HTML body.
    pub body_html: String,
    /// The link the email carries.
    pub link: String,
}

fn escape_html(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

/// The link of `kind` carrying `token`, under `links_base` (no trailing slash).
pub fn link(links_base: &str, kind: EmailKind, token: &str) -> String {
    format!("{links_base}/{}?token={token}", kind.page())
}

/// Renders the email of `kind` to `to`.
pub fn compose(kind: EmailKind, to: &str, name: Option<&str>, link: String) -> NewEmail {
    let (subject, text, html) = kind.templates();
    let greeting = name.map(|n| format!(" {n}")).unwrap_or_default();
    NewEmail {
        id: kernel::new_id(),
        to: to.to_owned(),
        kind: kind.as_str(),
        subject: subject.to_owned(),
        body_text: text
            .replace("{{name}}", &greeting)
            .replace("{{link}}", &link),
        body_html: html
            .replace("{{name}}", &escape_html(&greeting))
            .replace("{{link}}", &escape_html(&link)),
        link,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_links_and_escapes_html() {
        let link = link("https://app.example/auth", EmailKind::PasswordReset, "abc");
        assert_eq!(link, "https://app.example/auth/reset-password?token=abc");
        let email = compose(
            EmailKind::PasswordReset,
            "a@b.c",
            Some("<Ann>"),
            link.clone(),
        );
        assert!(email.body_text.contains(&link));
        assert!(email.body_text.starts_with("Hello <Ann>,"));
        assert!(email.body_html.contains("Hello &lt;Ann&gt;,"));
        assert!(
            email
                .body_html
                .contains("href=\"https://app.example/auth/reset-password?token=abc\"")
        );
        let anonymous = compose(EmailKind::Invitation, "a@b.c", None, "x".into());
        assert!(anonymous.body_text.starts_with("Hello,"));
    }
}
