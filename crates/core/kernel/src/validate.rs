//! Validated input: each type can only be built through `parse`, which caps
//! lengths and rejects malformed values with a [`FieldError`] naming the field.

use std::fmt;

use crate::error::FieldError;

/// Longest email address accepted (RFC 5321 path limit).
pub const EMAIL_MAX: usize = 254;
/// Longest display name or record name accepted, in characters.
pub const NAME_MAX: usize = 200;
/// Longest free text (descriptions) accepted, in characters.
pub const TEXT_MAX: usize = 2000;
/// Longest password accepted, in bytes; argon2 input stays bounded.
pub const PASSWORD_MAX_BYTES: usize = 1024;

/// An email address, trimmed, with one `@` and a dotted-or-local domain.
/// Comparison is case-insensitive at the database level.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Email(String);

impl Email {
    /// Validates `raw` as the email of field `field`.
    pub fn parse(raw: &str, field: &'static str) -> Result<Self, FieldError> {
        let value = raw.trim();
        let invalid = || FieldError::new(field, "must be a valid email address");
        if value.is_empty() || value.len() > EMAIL_MAX {
            return Err(invalid());
        }
        let (local, domain) = value.split_once('@').ok_or_else(invalid)?;
        let bad_char = |c: char| c.is_whitespace() || c.is_control() || c == '@';
        if local.is_empty()
            || domain.is_empty()
            || local.len() > 64
            || value.chars().filter(|c| *c == '@').count() != 1
            || value.chars().any(|c| c.is_whitespace() || c.is_control())
            || domain.chars().any(bad_char)
            || domain.starts_with('.')
            || domain.ends_with('.')
            || domain.contains("..")
        {
            return Err(invalid());
        }
        Ok(Self(value.to_owned()))
    }

    /// The address as entered (trimmed).
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Email {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Whether `code` is an error code of the user's own: an UPPER_SNAKE word
/// of at most 64 characters starting with a letter (a function's hint, a
/// script's thrown `code`).
pub fn is_code(code: &str) -> bool {
    !code.is_empty()
        && code.len() <= 64
        && code.starts_with(|c: char| c.is_ascii_uppercase())
        && code
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
}

/// A URL slug: 1 to 64 lower-case letters, digits or `-`, not starting with `-`.
pub fn slug(raw: &str, field: &'static str) -> Result<String, FieldError> {
    let ok = !raw.is_empty()
        && raw.len() <= 64
        && raw
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !raw.starts_with('-');
    if ok {
        Ok(raw.to_owned())
    } else {
        Err(FieldError::new(
            field,
            "must be 1 to 64 lower-case letters, digits or -",
        ))
    }
}

/// A trimmed, non-empty, single-line text of at most `max` characters.
pub fn short_text(raw: &str, field: &'static str, max: usize) -> Result<String, FieldError> {
    let value = raw.trim();
    if value.is_empty() {
        return Err(FieldError::new(field, "must not be empty"));
    }
    if value.chars().count() > max {
        return Err(FieldError::new(
            field,
            format!("must be at most {max} characters"),
        ));
    }
    if value.chars().any(char::is_control) {
        return Err(FieldError::new(
            field,
            "must not contain control characters",
        ));
    }
    Ok(value.to_owned())
}

/// Optional free text of at most [`TEXT_MAX`] characters; blank becomes `None`.
pub fn optional_text(raw: Option<&str>, field: &'static str) -> Result<Option<String>, FieldError> {
    match raw.map(str::trim) {
        None | Some("") => Ok(None),
        Some(value) if value.chars().count() > TEXT_MAX => Err(FieldError::new(
            field,
            format!("must be at most {TEXT_MAX} characters"),
        )),
        Some(value) => Ok(Some(value.to_owned())),
    }
}

/// An IANA time zone name known to the zone database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimeZoneName(String);

impl TimeZoneName {
    /// Validates `raw` as an IANA zone name for field `field`.
    pub fn parse(raw: &str, field: &'static str) -> Result<Self, FieldError> {
        if raw.len() > 64 {
            return Err(FieldError::new(field, "must be an IANA time zone name"));
        }
        raw.parse::<chrono_tz::Tz>()
            .map(|tz| Self(tz.name().to_owned()))
            .map_err(|_| FieldError::new(field, "must be an IANA time zone name"))
    }

    /// The canonical zone name.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Takes the name out.
    pub fn into_inner(self) -> String {
        self.0
    }
}

/// A new password, checked against the instance's minimum length.
#[derive(Clone, PartialEq, Eq)]
pub struct NewPassword(String);

impl fmt::Debug for NewPassword {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("NewPassword(***)")
    }
}

impl NewPassword {
    /// Validates `raw` as a password of at least `min_chars` characters.
    pub fn parse(raw: &str, field: &'static str, min_chars: usize) -> Result<Self, FieldError> {
        if raw.chars().count() < min_chars {
            return Err(FieldError::new(
                field,
                format!("must be at least {min_chars} characters"),
            ));
        }
        if raw.len() > PASSWORD_MAX_BYTES {
            return Err(FieldError::new(
                field,
                format!("must be at most {PASSWORD_MAX_BYTES} bytes"),
            ));
        }
        Ok(Self(raw.to_owned()))
    }

    /// The password text.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_upper_snake_words_are_codes() {
        for code in ["OUT_OF_STOCK", "E1", "A"] {
            assert!(is_code(code), "{code}");
        }
        for hint in ["", "out_of_stock", "Try again later", "_X", "1A", "OUT-OF"] {
            assert!(!is_code(hint), "{hint}");
        }
    }

    #[test]
    fn emails() {
        assert!(Email::parse("a@b.io", "email").is_ok());
        assert_eq!(
            Email::parse("  Ann@Example.com ", "email")
                .unwrap()
                .as_str(),
            "Ann@Example.com"
        );
        for bad in [
            "",
            "a",
            "a@",
            "@b",
            "a@@b",
            "a b@c.d",
            "a@b..c",
            "a@.b",
            &format!("{}@b.c", "x".repeat(260)),
        ] {
            assert!(Email::parse(bad, "email").is_err(), "{bad}");
        }
    }

    #[test]
    fn zones() {
        assert_eq!(
            TimeZoneName::parse("Pacific/Auckland", "tz")
                .unwrap()
                .as_str(),
            "Pacific/Auckland"
        );
        assert!(TimeZoneName::parse("Mars/Olympus", "tz").is_err());
    }

    #[test]
    fn texts_and_passwords() {
        assert!(short_text("  ", "name", 10).is_err());
        assert!(short_text("abcdefghijk", "name", 10).is_err());
        assert_eq!(short_text(" ok ", "name", 10).unwrap(), "ok");
        assert!(NewPassword::parse("short", "password", 8).is_err());
        assert!(NewPassword::parse(&"x".repeat(2000), "password", 8).is_err());
        assert!(NewPassword::parse("long enough", "password", 8).is_ok());
    }
}
