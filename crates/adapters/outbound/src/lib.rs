//! Outgoing HTTP for the workflow http step. Unless private targets are
//! allowed, the host is resolved once, every address of IANA's
//! special-purpose registries is refused (IPv4, IPv6 and IPv4 inside IPv6;
//! the table is in `ranges`), and the connection goes to an address that was
//! checked: no second lookup, so no DNS rebinding. Redirects are not followed.
//! Answers are capped in size; bodies can be signed with HMAC-SHA256.

use std::error::Error as StdError;
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use async_trait::async_trait;
use hmac::{Hmac, Mac};
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use serde_json::{Map, Value, json};
use sha2::Sha256;
use workflows::run::{HTTP_REQUEST_FAILED, HTTP_TARGET_FORBIDDEN};
use workflows::{OutgoingRequest, RunError};

mod ranges;
pub use ranges::forbidden;

/// Largest answer body kept, in bytes.
pub const RESPONSE_MAX_BYTES: usize = 1024 * 1024;
/// The header carrying the body's signature.
pub const SIGNATURE_HEADER: &str = "Tessera-Signature";

/// The guard refused every address of a target.
#[derive(Debug)]
struct TargetForbidden;

impl fmt::Display for TargetForbidden {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the target address is not allowed")
    }
}

impl StdError for TargetForbidden {}

/// Resolves names and keeps only allowed addresses.
struct GuardedResolver;

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        Box::pin(async move {
            let found = tokio::net::lookup_host((name.as_str(), 0)).await?;
            let allowed: Vec<SocketAddr> = found.filter(|addr| !forbidden(addr.ip())).collect();
            if allowed.is_empty() {
                return Err(Box::new(TargetForbidden) as Box<dyn StdError + Send + Sync>);
            }
            Ok(Box::new(allowed.into_iter()) as Addrs)
        })
    }
}

/// The http step's client.
#[derive(Clone)]
pub struct HttpClient {
    guarded: reqwest::Client,
    open: reqwest::Client,
}

impl HttpClient {
    /// Two clients: one behind the address guard, one for
    /// `workflows.http_allow_private`.
    pub fn new() -> Result<Self, reqwest::Error> {
        let base = || {
            reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .no_proxy()
                .user_agent(concat!("Tessera/", env!("CARGO_PKG_VERSION")))
        };
        Ok(Self {
            guarded: base().dns_resolver(Arc::new(GuardedResolver)).build()?,
            open: base().build()?,
        })
    }
}

/// `t=<unix>,v1=<hex of HMAC-SHA256(secret, "<unix>.<body>")>`.
pub fn signature(secret: &str, unix: i64, body: &[u8]) -> String {
    let mut mac = match Hmac::<Sha256>::new_from_slice(secret.as_bytes()) {
        Ok(mac) => mac,
        Err(_) => return String::new(),
    };
    mac.update(unix.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("t={unix},v1={}", hex::encode(mac.finalize().into_bytes()))
}

fn failed(message: impl Into<String>) -> RunError {
    RunError::new(HTTP_REQUEST_FAILED, message)
}

fn refused() -> RunError {
    RunError::new(
        HTTP_TARGET_FORBIDDEN,
        "The target address is loopback, private or link-local (workflows.http_allow_private is off)",
    )
}

fn is_forbidden(error: &reqwest::Error) -> bool {
    let mut source: Option<&(dyn StdError + 'static)> = Some(error);
    while let Some(e) = source {
        if e.is::<TargetForbidden>() {
            return true;
        }
        source = e.source();
    }
    false
}

#[async_trait]
impl workflows::Outbound for HttpClient {
    async fn send(&self, request: OutgoingRequest) -> Result<Value, RunError> {
        let url = url::Url::parse(&request.url).map_err(|_| failed("The URL is not valid"))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(failed("The URL must be http or https"));
        }
        if !request.allow_private {
            let literal = match url.host() {
                Some(url::Host::Ipv4(ip)) => Some(IpAddr::V4(ip)),
                Some(url::Host::Ipv6(ip)) => Some(IpAddr::V6(ip)),
                Some(url::Host::Domain(_)) => None,
                None => return Err(failed("The URL has no host")),
            };
            if literal.is_some_and(forbidden) {
                return Err(refused());
            }
        }
        let client = if request.allow_private {
            &self.open
        } else {
            &self.guarded
        };
        let method = reqwest::Method::from_bytes(request.method.as_bytes())
            .map_err(|_| failed("The method is not valid"))?;
        let mut builder = client.request(method, url).timeout(request.timeout);
        for (name, value) in &request.headers {
            builder = builder.header(name.as_str(), value.as_str());
        }
        if let Some(body) = &request.body {
            let bytes = serde_json::to_vec(body).unwrap_or_default();
            if let Some((secret, at)) = &request.signing {
                builder =
                    builder.header(SIGNATURE_HEADER, signature(secret, at.timestamp(), &bytes));
            }
            builder = builder
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(bytes);
        }
        let mut response = builder.send().await.map_err(|e| {
            if is_forbidden(&e) {
                refused()
            } else if e.is_timeout() {
                failed("The request timed out")
            } else {
                failed("The target could not be reached")
            }
        })?;
        let status = response.status().as_u16();
        let mut headers = Map::new();
        for (name, value) in response.headers() {
            headers.insert(
                name.as_str().to_owned(),
                Value::String(String::from_utf8_lossy(value.as_bytes()).into_owned()),
            );
        }
        let json_answer = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.contains("json"));
        let mut bytes: Vec<u8> = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| {
            if e.is_timeout() {
                failed("The request timed out")
            } else {
                failed("The answer could not be read")
            }
        })? {
            if bytes.len() + chunk.len() > RESPONSE_MAX_BYTES {
                return Err(failed(format!(
                    "The answer is larger than {RESPONSE_MAX_BYTES} bytes"
                )));
            }
            bytes.extend_from_slice(&chunk);
        }
        let body = match serde_json::from_slice::<Value>(&bytes) {
            Ok(value) if json_answer => value,
            _ if bytes.is_empty() => Value::Null,
            _ => Value::String(String::from_utf8_lossy(&bytes).into_owned()),
        };
        Ok(json!({ "status": status, "headers": headers, "body": body }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signs_timestamp_and_body() {
        let signed = signature("secret", 1_700_000_000, b"{\"a\":1}");
        assert!(signed.starts_with("t=1700000000,v1="));
        assert_eq!(signed.len(), "t=1700000000,v1=".len() + 64);
        assert_ne!(signed, signature("other", 1_700_000_000, b"{\"a\":1}"));
        assert_ne!(signed, signature("secret", 1_700_000_001, b"{\"a\":1}"));
    }

    #[tokio::test]
    async fn a_name_resolving_to_loopback_is_refused() {
        use workflows::Outbound;
        let client = HttpClient::new().unwrap();
        let request = |url: &str, allow_private| OutgoingRequest {
            method: "GET".into(),
            url: url.into(),
            headers: Vec::new(),
            body: None,
            timeout: std::time::Duration::from_secs(2),
            signing: None,
            allow_private,
        };
        for url in [
            "http://localhost:9/",
            "http://127.0.0.1:9/",
            "http://[::1]:9/",
        ] {
            let err = client.send(request(url, false)).await.unwrap_err();
            assert_eq!(err.code, HTTP_TARGET_FORBIDDEN, "{url}");
        }
        let err = client
            .send(request("http://127.0.0.1:9/", true))
            .await
            .unwrap_err();
        assert_eq!(err.code, HTTP_REQUEST_FAILED);
    }
}
