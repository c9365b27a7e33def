//! Emails the auth domain sends, rendered when queued from the templates in
//! `svc.email_templates` (editable through the Data API).

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
    /// A sign-in link with its 6-digit code (valid 15 minutes).
    SignInCode,
}

impl EmailKind {
    /// The stored name of the kind (`reset`, `verify`, `invite`).
    pub const fn as_str(self) -> &'static str {
        match self {
            EmailKind::PasswordReset => "reset",
            EmailKind::EmailVerification => "verify",
            EmailKind::Invitation => "invite",
            EmailKind::SignInCode => "code",
        }
    }

    /// How long the link stays valid.
    pub fn lifetime(self) -> chrono::Duration {
        match self {
            EmailKind::PasswordReset => chrono::Duration::hours(1),
            EmailKind::EmailVerification => chrono::Duration::hours(48),
            EmailKind::Invitation => chrono::Duration::days(7),
            EmailKind::SignInCode => chrono::Duration::minutes(15),
        }
    }

    /// The page under the links base that takes the token.
    const fn page(self) -> &'static str {
        match self {
            EmailKind::PasswordReset => "reset-password",
            EmailKind::EmailVerification => "verify-email",
            EmailKind::Invitation => "accept-invitation",
            EmailKind::SignInCode => "code",
        }
    }
}

/// An email to put in the outbox, rendered by the store from the template
/// of its kind in the same transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewEmail {
    /// Outbox id.
    pub id: Uuid,
    /// Recipient address.
    pub to: String,
    /// `reset`, `verify` or `invite`: the template used.
    pub kind: &'static str,
    /// The recipient's name, when known.
    pub name: Option<String>,
    /// The link the email carries.
    pub link: String,
    /// The sign-in code it carries (`code` emails).
    pub code: Option<String>,
}

/// A template of `svc.email_templates`: `{{name}}` becomes `" <name>"` (or
/// nothing), `{{link}}` the link, `{{code}}` the sign-in code; each
/// HTML-escaped in the HTML body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmailTemplate {
    /// Subject line.
    pub subject: String,
    /// Plain-text body.
    pub body_text: String,
    /// HTML body.
    pub body_html: String,
}

/// An email as sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderedEmail {
    /// Subject line.
    pub subject: String,
    /// Plain-text body.
    pub body_text: String,
    /// HTML body.
    pub body_html: String,
}

impl NewEmail {
    /// The email written with `template`.
    pub fn render(&self, template: &EmailTemplate) -> RenderedEmail {
        let greeting = self
            .name
            .as_deref()
            .map(|n| format!(" {n}"))
            .unwrap_or_default();
        let code = self.code.as_deref().unwrap_or_default();
        let plain = |text: &str| {
            text.replace("{{name}}", &greeting)
                .replace("{{link}}", &self.link)
                .replace("{{code}}", code)
        };
        RenderedEmail {
            // One line, whatever the name holds.
            subject: plain(&template.subject).replace(['\r', '\n'], " "),
            body_text: plain(&template.body_text),
            body_html: template
                .body_html
                .replace("{{name}}", &escape_html(&greeting))
                .replace("{{link}}", &escape_html(&self.link))
                .replace("{{code}}", &escape_html(code)),
        }
    }
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

/// The email of `kind` to `to`, to be rendered when queued.
pub fn compose(kind: EmailKind, to: &str, name: Option<&str>, link: String) -> NewEmail {
    NewEmail {
        id: kernel::new_id(),
        to: to.to_owned(),
        kind: kind.as_str(),
        name: name.map(str::to_owned),
        link,
        code: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_links_and_escapes_html() {
        let link = link("https://app.example/auth", EmailKind::PasswordReset, "abc");
        assert_eq!(link, "https://app.example/auth/reset-password?token=abc");
        let template = EmailTemplate {
            subject: "Hi{{name}}".into(),
            body_text: "Hello{{name}},\n{{link}}".into(),
            body_html: "<p>Hello{{name}},</p><a href=\"{{link}}\">go</a>".into(),
        };
        let email = compose(
            EmailKind::PasswordReset,
            "a@b.c",
            Some("<Ann>\nBcc: x"),
            link.clone(),
        )
        .render(&template);
        assert!(email.body_text.contains(&link));
        assert!(email.body_text.starts_with("Hello <Ann>"));
        assert_eq!(email.subject, "Hi <Ann> Bcc: x");
        assert!(email.body_html.contains("Hello &lt;Ann&gt;"));
        assert!(
            email
                .body_html
                .contains("href=\"https://app.example/auth/reset-password?token=abc\"")
        );
        let anonymous = compose(EmailKind::Invitation, "a@b.c", None, "x".into()).render(&template);
        assert!(anonymous.body_text.starts_with("Hello,"));
    }
}
