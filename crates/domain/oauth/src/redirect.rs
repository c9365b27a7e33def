//! Where a flow may send the browser back to: `redirect_to` is checked
//! against an allow-list of origins before anything leaves the service.

use kernel::FieldError;
use url::{Origin, Url};

/// Longest `redirect_to` accepted.
const REDIRECT_MAX: usize = 2048;

/// The origins a flow may return to.
#[derive(Debug, Clone)]
pub(crate) struct AllowedOrigins(Vec<Origin>);

impl AllowedOrigins {
    /// The origins of `urls` (each an absolute http(s) URL); others are skipped.
    pub fn of<'a>(urls: impl IntoIterator<Item = &'a str>) -> Self {
        Self(
            urls.into_iter()
                .filter_map(|u| Url::parse(u).ok())
                .filter(|u| matches!(u.scheme(), "http" | "https"))
                .map(|u| u.origin())
                .collect(),
        )
    }

    /// `raw` as a URL when it is absolute, http(s), without credentials or
    /// backslashes, and its origin (scheme, host, port) is exactly one of the
    /// allowed ones: no prefix matching, no scheme-relative `//host`.
    pub fn check(&self, raw: &str) -> Result<Url, FieldError> {
        let refused = || FieldError::new("redirect_to", "is not an allowed redirect URL");
        if raw.len() > REDIRECT_MAX
            || raw.contains('\\')
            || raw.chars().any(|c| c.is_whitespace() || c.is_control())
        {
            return Err(refused());
        }
        let url = Url::parse(raw).map_err(|_| refused())?;
        let plain = matches!(url.scheme(), "http" | "https")
            && url.username().is_empty()
            && url.password().is_none()
            && url.host().is_some();
        if plain && self.0.contains(&url.origin()) {
            Ok(url)
        } else {
            Err(refused())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allowed() -> AllowedOrigins {
        AllowedOrigins::of([
            "https://good.example/admin/auth",
            "http://localhost:3000",
            "javascript:alert(1)",
        ])
    }

    #[test]
    fn exact_origins_pass() {
        let a = allowed();
        for ok in [
            "https://good.example/",
            "https://good.example/app?x=1#old",
            "https://GOOD.example:443/deep/path",
            "http://localhost:3000/cb",
        ] {
            assert!(a.check(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn every_trick_is_refused() {
        let a = allowed();
        for bad in [
            "https://evil.example/",
            "//evil.example/",
            "/relative/path",
            "https://good.example@evil.example/",
            "https://user:pw@good.example/",
            "https://good.example.evil.example/",
            "https://evil.example/https://good.example/",
            "http://good.example/",
            "https://good.example:8443/",
            "http://localhost:3001/",
            "https:\\\\evil.example/",
            "https://good.example\\@evil.example/",
            "javascript:alert(1)",
            "JavaScript://good.example/%0aalert(1)",
            "data:text/html,hi",
            " https://good.example/",
            "https://good.example/\n",
            "",
        ] {
            assert!(
                a.check(bad).is_err_and(|e| e.field == "redirect_to"),
                "{bad}"
            );
        }
    }

    #[test]
    fn overlong_urls_are_refused() {
        let long = format!("https://good.example/{}", "a".repeat(REDIRECT_MAX));
        assert!(allowed().check(&long).is_err());
    }
}
